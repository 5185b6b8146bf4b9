"""Advice rules on small exact inputs: each fires on its evidence, with its arithmetic."""

from __future__ import annotations

import pytest

from lltrace.analysis.advice import advise, advise_steps
from lltrace.analysis.classify import classify

ATT = {
    "requests": 10,
    "e2e_s": 100.0,
    "queue_s": 10.0,
    "prefill_s": 40.0,
    "decode_s": 45.0,
    "overhead_s": 5.0,
    "preempted_s": 0.0,
    "queue_share": 0.1,
    "prefill_share": 0.4,
    "decode_share": 0.45,
    "overhead_share": 0.05,
    "preempted_share": 0.0,
    "prefill_tokens_per_s": 5000.0,
    "decode_s_per_token": 0.01,
    "mean_output_tokens": 100,
}


def test_balanced_run_and_its_crossover():
    c = classify(ATT, kv_wait_s=None)
    assert c["label"] == "balanced" and c["crossover_input_tokens"] == pytest.approx(5000)


def test_prefix_reuse_advice_uses_the_measured_reuse():
    items = advise(ATT, "balanced", None, None, {"prefix_reuse": 0.25, "prefix_blocks": 400})
    pre = [i for i in items if i["action"].startswith("Turn on prefix caching")][0]
    assert pre["expected_gain"] == {"metric": "mean prefill time per request", "from": 4.0, "to": 3.0, "unit": "s"}
    assert advise(ATT, "balanced", None, None, {"prefix_reuse": 0.05}) == [
        i for i in advise(ATT, "balanced", None) if not i["action"].startswith("Turn on prefix caching")
    ]


def test_interference_advice_needs_a_share_of_decode():
    inter = {"total_s": 9.0, "share_of_parent": 0.2, "mixed_steps": 7}
    item = [i for i in advise(ATT, "balanced", None, inter) if i["bottleneck"] == "interference"][0]
    assert item["expected_gain"]["to"] == pytest.approx(4.5 - 0.9)
    assert not [
        i
        for i in advise(ATT, "balanced", None, {"total_s": 0.1, "share_of_parent": 0.002})
        if i["bottleneck"] == "interference"
    ]


def test_cuda_graph_advice_from_eager_decode_steps_with_launch_gaps():
    steps = {
        "source": "profiler",
        "items": [
            {"kind": "decode", "cuda_graph": False, "gpu_idle_s": 0.004, "dur_s": 0.010},
            {"kind": "decode", "cuda_graph": False, "gpu_idle_s": 0.002, "dur_s": 0.010},
        ],
    }
    (item,) = advise_steps(steps)
    assert item["expected_gain"]["from"] == pytest.approx(0.010) and item["expected_gain"]["to"] == pytest.approx(0.007)
    graphed = {
        "source": "profiler",
        "items": [{"kind": "decode", "cuda_graph": True, "gpu_idle_s": 0.004, "dur_s": 0.010}],
    }
    assert advise_steps(graphed) == []


def test_quantization_gain_from_the_roofline_when_model_and_gpu_are_known():
    att = dict(ATT, decode_share=0.6, decode_s=60.0)
    generic = [i for i in advise(att, "decode-dominant", None) if i["bottleneck"] == "pipe"][0]
    assert generic["expected_gain"]["to"] == pytest.approx(3.0)  # the halving bound, 6.0 -> 3.0 s
    roof = [
        i
        for i in advise(att, "decode-dominant", None, None, None, {"ratio": 0.6, "model": "M", "gpu": "G"})
        if i["bottleneck"] == "pipe"
    ][0]
    assert roof["expected_gain"]["to"] == pytest.approx(6.0 * 0.6) and "roofline" in roof["formula"]


def _part(total: float, queue: float = 40.0, **evidence: object) -> dict:
    return {"total_s": total, "share_of_parent": total / queue, "basis": "derived", "evidence": evidence}


QUEUED = dict(ATT, queue_s=40.0, prefill_s=10.0, queue_share=0.4, prefill_share=0.1)


def test_each_queue_part_names_the_limit_that_bound_with_a_gain_no_larger_than_the_part():
    seqs = {"value": 8.0, "basis": "stated", "origin": "server log"}
    parts = {
        "kv_wait": _part(6.0),
        "slot_wait": _part(24.0, max_num_seqs=seqs),
        "budget_wait": _part(0.2),  # 0.2 % of e2e: under queue_part_share_for_advice, no item
        "load_wait": _part(9.8),
    }
    items = advise(QUEUED, "queue-bound", parts)
    queue_items = [i for i in items if i["expected_gain"]["metric"] == "mean queue time per request"]
    assert [(i["bottleneck"], i["setting"]) for i in queue_items] == [
        ("slots", "max_num_seqs"),
        ("queue", None),
        ("room", "gpu_memory_utilization"),
    ]
    slots = queue_items[0]
    assert slots["expected_gain"] == pytest.approx(
        {"metric": "mean queue time per request", "from": 4.0, "to": 1.6, "unit": "s"}
    )
    assert "(now 8, stated)" in slots["action"] and "upper bound" in slots["formula"]
    assert slots["evidence"]["max_num_seqs"] == seqs and slots["evidence"]["share_of_queue"] == 0.6
    for item, part in zip(queue_items, ("slot_wait", "load_wait", "kv_wait"), strict=True):
        gain = item["expected_gain"]["from"] - item["expected_gain"]["to"]
        assert gain == pytest.approx(parts[part]["total_s"] / 10)  # that part of the mean queue, no more
    # plain load is advice only when the run is bound by its queue
    assert "queue" not in [i["bottleneck"] for i in advise(QUEUED, "balanced", parts)]


def test_budget_part_advises_the_token_budget():
    parts = {"budget_wait": _part(30.0, max_num_batched_tokens={"value": 512.0, "basis": "stated"})}
    (item,) = [i for i in advise(QUEUED, "queue-bound", parts) if i["bottleneck"] == "budget"]
    assert item["setting"] == "max_num_batched_tokens" and "(now 512, stated)" in item["action"]
    assert item["expected_gain"]["to"] == pytest.approx(4.0 - 3.0)


def test_unknown_queue_parts_give_no_queue_advice():
    parts = {p: {"total_s": None, "share_of_parent": None, "basis": None} for p in ("kv_wait", "slot_wait")}
    items = advise(QUEUED, "queue-bound", parts)
    assert not [i for i in items if i["bottleneck"] in ("room", "slots", "budget")]


def test_prefix_advice_only_where_the_engine_is_not_known_to_cache():
    work = {"prefix_reuse": 0.25, "prefix_blocks": 400}

    def prefix_items(**kw: object) -> list:
        return [i for i in advise(ATT, "balanced", None, None, work, **kw) if i["bottleneck"] == "prefix"]

    assert prefix_items()[0]["setting"] == "enable_prefix_caching"
    assert prefix_items(prefix_caching=False)[0]["evidence"]["prefix_caching"] is False
    assert prefix_items(prefix_caching=True) == []
    assert prefix_items(kv={"prefix_cache_hit_rate": 0.4}) == []  # the cache is on and measured


def test_every_item_names_its_setting_or_none():
    parts = {"kv_wait": _part(30.0)}
    items = advise(QUEUED, "capacity-bound", parts, {"total_s": 9.0, "share_of_parent": 0.2}, {"prefix_reuse": 0.3})
    assert items and all("setting" in i for i in items)
    assert {i["bottleneck"]: i["setting"] for i in items}["room"] == "gpu_memory_utilization"


def test_queue_bound_names_the_limit_that_held_its_queue():
    att = dict(ATT, queue_s=60.0, queue_share=0.6, prefill_share=0.2, decode_share=0.15)
    parts = {"kv_wait": {"total_s": 1.2}, "slot_wait": {"total_s": 54.0}, "budget_wait": {"total_s": None}}
    c = classify(att, kv_wait_s=1.2, queue_parts=parts)
    assert c["label"] == "queue-bound"  # KV room held 2 % of the queue: not capacity-bound
    assert c["why"].endswith("90% of it waiting for a sequence slot (max_num_seqs), 2% waiting for KV room")
    assert classify(att, kv_wait_s=36.0)["label"] == "capacity-bound"  # 60 % of the queue without KV room


def test_each_setting_is_named_as_the_runs_engine_names_it():
    """The canonical ``setting`` stays vLLM's name; the action and ``engine_setting`` name the run's engine's own
    argument (SGLang's server arguments, TensorRT-LLM's trtllm-serve options), vLLM's where the engine is vLLM or
    not known."""
    seqs = {"value": 8.0, "basis": "stated", "origin": "server log"}
    parts = {"kv_wait": _part(6.0), "slot_wait": _part(24.0, max_num_seqs=seqs)}
    named = {}
    for engine in (None, "vllm", "sglang", "trtllm"):
        items = advise(QUEUED, "queue-bound", parts, engine=engine)
        named[engine] = {i["bottleneck"]: (i["setting"], i["engine_setting"], i["action"]) for i in items}
    assert named[None] == named["vllm"]
    assert named["vllm"]["slots"][:2] == ("max_num_seqs", "max_num_seqs")
    setting, flag, action = named["sglang"]["slots"]
    assert (setting, flag) == ("max_num_seqs", "--max-running-requests")
    assert action.startswith("Raise --max-running-requests (now 8, stated)")
    assert (
        named["sglang"]["room"][1] == "--mem-fraction-static" and "--mem-fraction-static" in named["sglang"]["room"][2]
    )
    assert named["trtllm"]["slots"][1] == "--max_batch_size"
    # every item carries both, also those without an engine-specific name
    assert all("engine_setting" in i for i in advise(QUEUED, "capacity-bound", parts, engine="sglang"))


def test_the_verdict_names_the_limit_as_the_runs_engine_does():
    att = dict(ATT, queue_s=60.0, queue_share=0.6, prefill_share=0.2, decode_share=0.15)
    parts = {"kv_wait": {"total_s": 1.2}, "slot_wait": {"total_s": 54.0}, "budget_wait": {"total_s": None}}
    why = classify(att, kv_wait_s=1.2, queue_parts=parts, engine="sglang")["why"]
    assert why.endswith("90% of it waiting for a sequence slot (--max-running-requests), 2% waiting for KV room")

"""Attribution, classification and advice on the real vLLM CPU runs (spans are the ground truth)."""

from __future__ import annotations

import pytest
from conftest import DATA

import lltrace


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    store = tmp_path_factory.mktemp("store")
    return {
        r: lltrace.analyze([DATA / "vllm_cpu" / r], store=store).to_dict()
        for r in ("A_baseline", "B_kvpressure", "B2_kv2x")
    }


def test_run_a_is_not_queue_or_capacity_bound_and_closes(docs):
    a = docs["A_baseline"]
    assert a["classification"]["label"] not in ("queue-bound", "capacity-bound")
    att = a["attribution"]
    assert att["requests"] == 508 and att["clock_errors"] == 0 and att["requests_incomplete"] == 0
    shares = sum(att[c]["share"] for c in ("overhead", "queue", "prefill", "decode", "preempted"))
    assert shares == pytest.approx(1.0)
    assert att["overhead"]["total_s"] >= 0
    assert att["prefill_tokens_per_s"] > 0 and att["decode_s_per_token"] > 0
    assert a["classification"]["crossover_input_tokens"] > 0


def test_run_b_is_capacity_bound_with_the_evidence_and_room_advice(docs):
    b = docs["B_kvpressure"]
    assert b["classification"]["label"] == "capacity-bound"
    assert b["kv"]["preemptions"] == 55 and b["kv"]["peak_usage"] == 1.0 and b["kv"]["peak_waiting_capacity"] == 51
    top = b["advice"][0]
    assert top["bottleneck"] == "room"
    g = top["expected_gain"]
    assert g["to"] < g["from"] and top["evidence"]["preemptions"] == 55
    assert b["attribution"]["kv_wait"]["share_of_parent"] > 0.5


def test_b2_with_twice_the_kv_blocks_waits_less(docs):
    b, b2 = docs["B_kvpressure"], docs["B2_kv2x"]
    assert b2["kv"]["kv_wait_s"] < b["kv"]["kv_wait_s"]
    assert b2["kv"]["preemptions"] < b["kv"]["preemptions"]
    assert b2["attribution"]["queue"]["total_s"] < b["attribution"]["queue"]["total_s"]


def test_every_advice_item_carries_gain_formula_and_evidence(docs):
    for doc in docs.values():
        for item in doc["advice"]:
            assert item["bottleneck"] in ("engine", "pipe", "room", "queue", "overhead", "interference")
            assert set(item["expected_gain"]) == {"metric", "from", "to", "unit"}
            assert item["formula"] and item["evidence"]


def test_azure_code_trace_classified_from_its_token_mix_with_an_assumption(tmp_path):
    from conftest import data_file

    path = data_file("serving", "azure_llm_2023", "AzureLLMInferenceTrace_code.csv")
    doc = lltrace.analyze([path], store=tmp_path / "s", model="llama-2-70b", gpu="H100-SXM").to_dict()
    cls = doc["classification"]
    assert cls["basis"] == "estimated" and cls["assumption"]["model"] == "Llama-2-70B"
    assert cls["label"] in ("prefill-dominant", "decode-dominant", "balanced")
    assert cls["prefill_share"] + cls["decode_share"] == pytest.approx(1.0)
    assert doc["attribution"] is None  # no latency was measured: nothing to attribute
    assert doc["requests"]["count"] == 8819 and doc["requests"]["ttft_s"] is None


def test_profiler_only_run_is_classified_from_its_steps(tmp_path):
    from conftest import data_file

    path = data_file("torch", "vllm_b200_tp8_gptoss_mxfp4_prefill_eager.rank0.json.gz")
    cls = lltrace.analyze([path], store=tmp_path / "s").to_dict()["classification"]
    assert (cls["label"], cls["basis"]) == ("prefill-dominant", "profiler steps")


def test_run_b_interference_is_measured_from_its_iteration_log(docs):
    inter = docs["B_kvpressure"]["attribution"]["interference"]
    assert inter["basis"] == "estimated" and inter["mixed_steps"] == 76  # mixed Iteration lines of the log
    assert inter["total_s"] > 0 and 0 < inter["share_of_parent"] < 1


def _spans(run: str) -> list[dict[str, float]]:
    """The run's ``llm_request`` spans' numeric attributes, read from the raw OTLP/JSON lines."""
    import json

    out = []
    for line in (DATA / "vllm_cpu" / run / "otlp" / "traces.otlp.jsonl").read_text().splitlines():
        for rs in json.loads(line).get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for sp in ss.get("spans", []):
                    if sp["name"] == "llm_request":
                        out.append(
                            {
                                a["key"]: float(next(iter(a["value"].values())))
                                for a in sp["attributes"]
                                if a["key"].startswith("gen_ai.")
                                and "Value" in next(iter(a["value"]))
                                and next(iter(a["value"])) in ("intValue", "doubleValue")
                            }
                        )
    return out


def test_the_prefill_rate_of_a_run_with_prefix_caching_says_what_was_computed(tmp_path):
    """E took 59,392 of its 69,319 prompt tokens from the prefix cache (the engine's counters). Its measured
    prefill rate counts every prompt token; beside it, the rate of the tokens the engine computed: the same prefill
    time over 9,927 tokens. Expected values from the raw spans and the final scrape."""
    doc = lltrace.analyze([DATA / "vllm_cpu" / "E_prefix"], store=tmp_path / "s").to_dict()
    att = doc["attribution"]
    spans = _spans("E_prefix")
    prompt = sum(s["gen_ai.usage.prompt_tokens"] for s in spans)
    prefill_s = sum(s["gen_ai.latency.time_in_model_prefill"] for s in spans)
    final = (DATA / "vllm_cpu" / "E_prefix" / "metrics_final.prom").read_text().splitlines()
    hits = next(float(ln.split()[-1]) for ln in final if ln.startswith("vllm:prefix_cache_hits_total{"))
    assert (len(spans), prompt, hits) == (120, 69_319, 59_392)
    assert att["prefill_tokens_per_s"] == pytest.approx(prompt / prefill_s, rel=1e-6)
    assert att["prefill_cached_tokens"] == hits
    assert att["prefill_computed_tokens_per_s"] == pytest.approx((prompt - hits) / prefill_s, rel=1e-6)
    b = lltrace.analyze([DATA / "vllm_cpu" / "B_kvpressure"], store=tmp_path / "s").to_dict()["attribution"]
    assert b["prefill_cached_tokens"] is None and b["prefill_computed_tokens_per_s"] is None  # no figure per request


def test_each_client_of_a_run_is_its_share_of_the_runs_attribution(docs):
    """A, B and B2 each ran several bench files (load levels, the profiled batch): per client, the means times the
    requests add up to the run's totals, and each client's parts add up to its e2e."""
    for name, doc in docs.items():
        att = doc["attribution"]
        clients = att["by_client"]
        assert clients and len(clients) >= 2, name
        assert sum(c["requests"] for c in clients) == att["requests"]
        for part in ("queue", "prefill", "decode", "preempted", "overhead"):
            summed = sum(c["requests"] * c[f"{part}_s"] for c in clients)
            assert summed == pytest.approx(att[part]["total_s"], rel=1e-9, abs=1e-9), (name, part)
        for c in clients:
            parts = sum(c[f"{p}_s"] for p in ("queue", "prefill", "decode", "preempted", "overhead"))
            assert parts == pytest.approx(c["e2e_s"], rel=1e-9), (name, c["client_id"])
    # A's load levels: the rate-40 file waited and decoded longer per request than the rate-4 one
    a = {c["client_id"]: c for c in docs["A_baseline"]["attribution"]["by_client"]}
    low, high = a["bench_random_200req_rate4.json"], a["bench_random_300req_rate40.json"]
    assert high["arrival_rate_per_s"] > 9 * low["arrival_rate_per_s"]
    assert high["e2e_s"] > low["e2e_s"]


def test_the_slowest_tenth_against_the_rest(docs, tmp_path):
    """The tail section against its own computation from the per-request attribution (numpy's linear percentile
    is quantile_cont's): B's slowest tenth waited for KV room; A's decoded longer (its rate-40 phase)."""
    import numpy as np

    for name, doc in docs.items():
        run = lltrace.ingest([DATA / "vllm_cpu" / name], store=tmp_path)
        rows = run.sql(
            "SELECT e2e_s, queue_s, decode_s, output_tokens FROM attribution_request WHERE e2e_s IS NOT NULL AND "
            "queue_s IS NOT NULL AND prefill_s IS NOT NULL AND decode_s IS NOT NULL"
        ).to_dicts()
        p90 = np.percentile([r["e2e_s"] for r in rows], 90)
        slow = [r for r in rows if r["e2e_s"] >= p90]
        rest = [r for r in rows if r["e2e_s"] < p90]
        tail = doc["attribution"]["tail"]
        assert (tail["slowest"]["requests"], tail["rest"]["requests"]) == (len(slow), len(rest))
        for part in ("e2e", "queue", "decode"):
            for side, group in (("slowest", slow), ("rest", rest)):
                mean = sum(r[f"{part}_s"] for r in group) / len(group)
                assert tail[side][f"{part}_s"] == pytest.approx(mean, rel=1e-9), (name, side, part)
        assert tail["slowest"]["e2e_from_s"] == pytest.approx(min(r["e2e_s"] for r in slow))
        assert sum(tail["gap_by_part_s"].values()) == pytest.approx(tail["gap_s"], rel=1e-9)
    b = docs["B_kvpressure"]["attribution"]["tail"]
    assert b["lead"] == "queue" and "waiting for KV room" in b["verdict"]
    assert docs["A_baseline"]["attribution"]["tail"]["lead"] == "decode"


def test_the_tail_says_when_its_leading_part_is_an_estimate(docs, tmp_path):
    """B's bench files and server log without its spans: the queue is estimated (from the log), the tail's sentence
    says so, and its queue gap stays within 5 % of the one the spans measure."""
    b = DATA / "vllm_cpu" / "B_kvpressure"
    doc = lltrace.analyze([b / "bench", b / "server.log"], store=tmp_path).to_dict()
    tail = doc["attribution"]["tail"]
    assert doc["attribution"]["queue"]["basis"] == "estimated" and tail["lead"] == "queue"
    assert "queue is estimated here" in tail["verdict"]
    measured = docs["B_kvpressure"]["attribution"]["tail"]["gap_by_part_s"]["queue"]
    assert tail["gap_by_part_s"]["queue"] == pytest.approx(measured, rel=0.05)

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

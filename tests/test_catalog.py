"""GPU/model catalog lookups and the step roofline, checked against real A100 operator timings."""

from __future__ import annotations

import csv

import pytest
from conftest import shared_file

from lltrace.physics.catalog import find_gpu, find_model, gpus, models
from lltrace.physics.roofline import step_roofline


@pytest.mark.parametrize(
    ("name", "expect"),
    [
        ("A100-80GB", "A100-80GB"),
        ("a100", "A100-40GB"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("H100-SXM", "H100-SXM"),
        ("h100", "H100-SXM"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA B200", "B200"),
        ("AMD Instinct MI300X", "MI300X"),
        ("h200", "H200"),
        ("L40S", "L40S"),
    ],
)
def test_gpu_names(name, expect):
    assert find_gpu(name).name == expect


def test_a100_memory_picks_the_variant():
    # deviceProperties of the HTA traces: "NVIDIA A100-PG509-200", totalGlobalMem 42297524224 (40 GB part).
    assert find_gpu("NVIDIA A100-PG509-200", 42297524224).name == "A100-40GB"
    assert find_gpu("NVIDIA A100-PG509-200", 85899345920).name == "A100-80GB"
    assert find_gpu("tpu-v5e") is None


@pytest.mark.parametrize(
    ("name", "expect"),
    [
        ("llama-2-7b", "Llama-2-7B"),
        ("meta-llama/Llama-2-7b-hf", "Llama-2-7B"),
        ("Qwen/Qwen3-8B", "Qwen3-8B"),
        ("openai/gpt-oss-120b", "gpt-oss-120b"),
        ("mistralai/Mixtral-8x7B-v0.1", "Mixtral-8x7B"),
    ],
)
def test_model_names(name, expect):
    assert find_model(name).name == expect


def test_every_catalog_entry_has_a_source_and_sane_figures():
    for g in gpus():
        assert g.source and g.hbm_gbps > 500 and g.bf16_tflops > 100 and g.memory_gb >= 40
    for m in models():
        assert m.source and m.layers > 0 and m.heads % m.kv_heads == 0
        assert m.active_params_b <= m.params_b


def _a100_linear_ms(tokens: int) -> float:
    """Measured A100 time of Llama-2-7B's non-attention ops for one forward pass (vidur profile, TP=1)."""
    path = shared_file("gpu_op_profiles", "a100_Llama-2-7b-hf_linear_ops.csv")
    for row in csv.DictReader(path.open()):
        if int(row["num_tokens"]) == tokens and row["num_tensor_parallel_workers"] == "1":
            per_layer = sum(
                float(v) for k, v in row.items() if k.endswith(".median") and not k.startswith("time_stats.emb.")
            )
            return per_layer * 32
    raise AssertionError(f"no row for {tokens} tokens")


@pytest.mark.parametrize(("tokens", "bound"), [(1, "memory"), (1024, "compute")])
def test_roofline_matches_real_a100_timings_at_both_ends(tokens, bound):
    """The one roofline runs at the catalog's achievable rates (fractions of peak fitted to these timings):
    within 10 % of the real A100 step at 1 token (memory-bound) and 1024 (compute-bound), and the peak
    figures, computed here from the datasheet, are a floor of the real time."""
    measured_s = _a100_linear_ms(tokens) / 1e3
    m, g = find_model("llama-2-7b"), find_gpu("A100-80GB")
    r = step_roofline(m, g, tokens, None)
    assert r.bound == bound
    assert measured_s == pytest.approx(r.min_time_s, rel=0.10)
    peak_floor = max(2 * m.active_params_b * 1e9 * tokens / 312e12, m.active_params_b * 1e9 * 2 / 2039e9)
    assert peak_floor <= measured_s


def test_decode_with_long_context_reads_the_kv_cache():
    m, g = find_model("llama-2-7b"), find_gpu("H100-SXM")
    short = step_roofline(m, g, tokens=32, context_tokens=32 * 100, requests=32)
    long = step_roofline(m, g, tokens=32, context_tokens=32 * 4000, requests=32)
    assert long.bytes - short.bytes == pytest.approx(m.kv_bytes_per_token() * 32 * 3900)
    assert long.bound == "memory"

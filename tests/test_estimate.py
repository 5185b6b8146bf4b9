"""`lltrace estimate`: the latency model's arithmetic and its agreement with real A100 timings."""

from __future__ import annotations

import csv
import json

import pytest
from conftest import data_file
from typer.testing import CliRunner

from lltrace.cli import app
from lltrace.physics.estimate import estimate


@pytest.mark.parametrize(("n_in", "share"), [(100, 0.02), (1000, 0.17), (5000, 0.50), (10000, 0.67)])
def test_prefill_share_and_crossover_from_rates(n_in, share):
    r = CliRunner().invoke(
        app,
        [
            "estimate",
            "--prefill-tps",
            "5000",
            "--decode-ms-per-token",
            "10",
            "--input-tokens",
            str(n_in),
            "--output-tokens",
            "100",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert round(doc["prefill_share"], 2) == pytest.approx(share, abs=0.005)
    assert doc["crossover_input_tokens"] == pytest.approx(5000)
    assert doc["decode_s"] == pytest.approx(1.0) and doc["basis"] == "estimated"


def test_llama2_7b_decode_on_a100_agrees_with_real_timings():
    """Real linear-op time at 1 token (vidur A100 profile) plus attention's KV reads at 1,024 tokens of context."""
    path = data_file("gpu_op_profiles", "a100_Llama-2-7b-hf_linear_ops.csv")
    row = next(
        r for r in csv.DictReader(path.open()) if r["num_tokens"] == "1" and r["num_tensor_parallel_workers"] == "1"
    )
    linear_s = (
        sum(float(v) for k, v in row.items() if k.endswith(".median") and not k.startswith("time_stats.emb."))
        * 32
        / 1e3
    )
    assert linear_s == pytest.approx(9.28e-3, abs=1e-5)
    doc = estimate(model="llama-2-7b", gpu="A100-80GB", quant="fp16", input_tokens=1024, output_tokens=1)
    gpu = doc["inputs"]["gpu"]
    kv_bytes = 2 * 32 * 32 * 128 * 2 * 1024  # K and V, 32 layers x 32 heads x 128 dims, fp16, 1,024 tokens
    real = linear_s + kv_bytes / (gpu["hbm_gbps"] * 1e9 * gpu["achievable_bw_fraction"])
    assert abs(doc["decode_s_per_token"] - real) / real < 0.25
    peak_only = 6.74e9 * 2 / (gpu["hbm_gbps"] * 1e9)
    assert abs(peak_only - linear_s) / linear_s > 0.25  # why the catalog models achievable bandwidth
    assert doc["bound"] == {"prefill": "compute", "decode": "memory"}
    assert "vidur" in gpu["achievable_source"]


def test_estimate_needs_rates_or_model_and_gpu():
    r = CliRunner().invoke(app, ["estimate", "--input-tokens", "10", "--output-tokens", "5"])
    assert r.exit_code == 1 and r.stderr.startswith("lltrace: error: give --model and --gpu")

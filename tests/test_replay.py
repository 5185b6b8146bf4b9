"""The replay scheduler model: exact timings on hand-made cases, then the real KV-pressure runs B and B2."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import SAMPLES, data_file, raw_llm_spans
from typer.testing import CliRunner

import lltrace
from lltrace.cli import app
from lltrace.documents import checked
from lltrace.errors import AnalysisError
from lltrace.replay.cost import StepCost, fit_step_cost, fit_step_cost_without_stalls, speed_change
from lltrace.replay.document import replay
from lltrace.replay.scheduler import EngineConfig, simulate


def test_single_request_timing_is_exact() -> None:
    cost = StepCost(c0=0.01, c_prefill=0.001, c_decode=0.0)
    res = simulate([5.0], [100], [3], EngineConfig(num_blocks=100, block_size=16), cost)
    row = res.requests.row(0, named=True)
    assert row["queue_s"] == 0.0
    assert row["ttft_s"] == pytest.approx(0.11)  # one prefill step: 0.01 + 100 * 0.001
    assert row["e2e_s"] == pytest.approx(0.13)  # then two decode steps of 0.01
    assert row["tpot_s"] == pytest.approx(0.01)
    assert res.steps == 3 and res.preemptions == 0


def test_chunked_prefill_splits_the_prompt_by_token_budget() -> None:
    cost = StepCost(c0=0.01, c_prefill=0.001, c_decode=0.0)
    cfg = EngineConfig(num_blocks=100, block_size=16, max_num_batched_tokens=128)
    res = simulate([0.0], [300], [1], cfg, cost)
    assert res.steps == 3  # 128 + 128 + 44
    assert res.requests["ttft_s"][0] == pytest.approx(3 * 0.01 + 300 * 0.001)


def test_second_request_queues_behind_max_num_seqs() -> None:
    cost = StepCost(c0=0.01, c_prefill=0.0, c_decode=0.0)
    res = simulate([0.0, 0.0], [10, 10], [2, 2], EngineConfig(num_blocks=100, max_num_seqs=1), cost)
    q = res.requests.sort("index")
    assert q["queue_s"].to_list() == [0.0, pytest.approx(0.02)]  # waits for the first one's two steps


def test_kv_exhaustion_preempts_the_newest_request_and_both_finish() -> None:
    cost = StepCost(c0=0.01, c_prefill=0.0, c_decode=0.0)
    # two requests of 8 + 8 tokens need 4 blocks of 4 each; only 6 blocks exist
    res = simulate([0.0, 0.001], [8, 8], [8, 8], EngineConfig(num_blocks=6, block_size=4), cost)
    q = res.requests.sort("index")
    assert res.preemptions >= 1
    assert q["num_preemptions"].to_list()[0] == 0 and q["num_preemptions"].to_list()[1] >= 1
    assert q["status"].to_list() == ["ok", "ok"] and q["e2e_s"].null_count() == 0
    assert res.peak_kv_blocks <= 6


def test_request_larger_than_the_cache_is_rejected_not_looped() -> None:
    cost = StepCost(c0=0.01, c_prefill=0.0, c_decode=0.0)
    res = simulate([0.0, 0.0], [100, 4], [100, 4], EngineConfig(num_blocks=4, block_size=4), cost)
    assert res.requests.sort("index")["status"].to_list() == ["rejected", "ok"]


def _final_preemptions(run_dir: str) -> float:
    """vllm:num_preemptions_total from the run's final /metrics scrape, read straight from the text."""
    text = Path(data_file("vllm_cpu", run_dir, "metrics_final.prom")).read_text()
    return sum(float(m) for m in re.findall(r"^vllm:num_preemptions_total\{[^}]*\} ([0-9.e+]+)$", text, re.M))


@pytest.fixture(scope="module")
def kv_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("replay-store")


@pytest.fixture(scope="module")
def kv_runs(kv_store: Path) -> dict[str, lltrace.Run]:
    return {d: lltrace.ingest([data_file("vllm_cpu", d)], store=kv_store) for d in ("B_kvpressure", "B2_kv2x")}


def _replay(run: lltrace.Run, cost: StepCost, blocks: int):
    q = run.table("requests").sort("arrival_s")
    cfg = EngineConfig(num_blocks=blocks, block_size=128, max_num_seqs=32, max_num_batched_tokens=2048)
    lengths = (q["input_tokens"].to_numpy(), q["output_tokens"].to_numpy())
    return q, simulate(q["arrival_s"].to_numpy(), *lengths, cfg, cost)


def test_run_b_replay_reproduces_preemptions_and_queueing(kv_runs: dict[str, lltrace.Run]) -> None:
    b = kv_runs["B_kvpressure"]
    cost = fit_step_cost(b.table("engine_steps").filter(pl.col("source") == "log"))
    assert cost.steps > 8000 and cost.overhead > 0
    measured, res = _replay(b, cost, blocks=40)
    assert measured.height == 96 and (res.requests["status"] == "ok").all()
    assert _final_preemptions("B_kvpressure") == 55
    assert res.preemptions == pytest.approx(55, rel=0.30)
    assert res.requests["queue_s"].median() == pytest.approx(measured["queue_s"].median(), rel=0.30)


def test_kv_blocks_80_what_if_predicts_b2_preemptions(kv_runs: dict[str, lltrace.Run]) -> None:
    cost = fit_step_cost(kv_runs["B_kvpressure"].table("engine_steps").filter(pl.col("source") == "log"))
    _, res = _replay(kv_runs["B2_kv2x"], cost, blocks=80)  # B2 is B's workload; only the lengths are taken
    b2_preemptions = _final_preemptions("B2_kv2x")
    assert b2_preemptions == 37
    assert res.preemptions == pytest.approx(b2_preemptions, rel=0.30)


def test_replay_document_on_run_b(kv_runs: dict[str, lltrace.Run], kv_store: Path) -> None:
    doc = replay(kv_runs["B_kvpressure"], what_ifs={"kv_blocks": 80, "rate": 0.5}, store=kv_store)
    eng = doc["engine"]
    # from the server log: num_gpu_blocks_override 40, max_num_seqs 32, "KV cache size: 5,120 tokens"
    assert (eng["kv_blocks"]["value"], eng["block_size"]["value"], eng["max_num_seqs"]["value"]) == (40, 128, 32)
    # not in B's log: vLLM 0.32's API-server default on CPU (one worker), which the step log's largest step agrees
    # with (the inference lltrace falls back on where the version or device is not known)
    assert eng["max_num_batched_tokens"]["value"] == 2048 and eng["max_num_batched_tokens"]["origin"].startswith(
        "default: vLLM 0.32.0 default for the API server on CPU"
    )
    assert doc["baseline"]["measured_preemptions"] == _final_preemptions("B_kvpressure")
    assert doc["baseline"]["preemptions"] == pytest.approx(55, rel=0.30)
    v = doc["validation"]
    assert 0 < v["requests"] < 96
    assert all(v["mape"][m]["mean"] is not None for m in ("queue_s", "ttft_s", "tpot_s", "e2e_s"))
    kv80, slow = doc["whatifs"]
    assert kv80["basis"] == "estimated" and kv80["what_if"] == {"kv_blocks": 80}
    assert kv80["preemptions"] == pytest.approx(_final_preemptions("B2_kv2x"), rel=0.30)
    assert kv80["delta"]["queue_s"]["p50"] < 0  # twice the cache: less waiting for blocks
    assert slow["what_if"] == {"rate": 0.5}


def _span_queue_median(run_dir: str) -> float:
    """Median time in queue over the run's requests, from the engine's own OTLP spans."""
    return statistics.median(a["gen_ai.latency.time_in_queue"] for _, a in raw_llm_spans(run_dir).values())


def test_kv_blocks_80_from_b_predicts_b2_queue_and_preemptions(kv_runs: dict[str, lltrace.Run], kv_store: Path) -> None:
    """Issue 6: B's workload replayed with 80 blocks predicts B2, the same workload really run with 80."""
    doc = replay(kv_runs["B_kvpressure"], what_ifs=[("kv_blocks", 80), ("kv_blocks", 40)], store=kv_store)
    b_queue, b2_queue = _span_queue_median("B_kvpressure"), _span_queue_median("B2_kv2x")
    assert b2_queue == pytest.approx(4.265, abs=1e-3)  # GROUND_TRUTH.json of B2 says the same
    assert doc["baseline"]["queue_median_s"] == pytest.approx(b_queue, rel=0.30)
    assert doc["baseline"]["preemptions"] == pytest.approx(_final_preemptions("B_kvpressure"), rel=0.30)
    kv80, kv40 = doc["whatifs"]
    assert kv80["queue_median_s"] == pytest.approx(b2_queue, rel=0.30)
    assert kv80["preemptions"] == pytest.approx(_final_preemptions("B2_kv2x"), rel=0.30)
    assert kv40["preemptions"] == doc["baseline"]["preemptions"]  # the run's own capacity: the baseline again
    # the profiler's trace flush inside one step (reproduce.sh stops the profiler during the second burst)
    (stall,) = doc["calibration"]["stalls"]
    assert stall["duration_s"] > 1.0 and 29.5 < stall["start_s"] < 33.0


def test_resumed_requests_recomputed_tokens_are_priced_as_prefill() -> None:
    """vLLM counts a resumed request's recomputed tokens as generation tokens; only one per request decodes."""
    rng = np.random.default_rng(1)
    n = 400
    prefill = rng.integers(0, 2048, n)
    reqs = rng.integers(1, 32, n)
    recomputed = np.where(rng.random(n) < 0.2, rng.integers(100, 900, n), 0)
    wall = 0.002 + 2e-5 * (prefill + recomputed) + 2e-4 * reqs
    steps = pl.DataFrame(
        {
            "prefill_tokens": prefill,
            "decode_tokens": reqs + recomputed,
            "decode_reqs": reqs,
            "wall_s": wall,
            "start_s": np.cumsum(wall),
        }
    )
    cost = fit_step_cost(steps)
    assert (cost.c0, cost.c_prefill, cost.c_decode) == pytest.approx((0.002, 2e-5, 2e-4), rel=1e-6)
    assert cost.r2 == pytest.approx(1.0)
    # a 1.5 s step among them is a stall: left out of the fit, found, and its excess measured
    stalled = pl.concat([steps, steps.head(1).with_columns(pl.lit(1.5).alias("wall_s"))])
    refit, stalls = fit_step_cost_without_stalls(stalled.with_columns(pl.int_range(pl.len()).alias("step_id")))
    assert stalls["step_id"].to_list() == [n] and stalls["excess_s"][0] == pytest.approx(1.5 - wall[0])
    assert refit.c_decode == pytest.approx(2e-4, rel=1e-6)


def test_a_pause_delays_the_steps_that_would_start_inside_it() -> None:
    cost = StepCost(c0=0.01, c_prefill=0.0, c_decode=0.0)
    cfg = EngineConfig(num_blocks=100, block_size=16)
    plain = simulate([0.0], [10], [5], cfg, cost)  # 5 steps of 10 ms
    paused = simulate([0.0], [10], [5], cfg, cost, pauses=[(0.015, 0.5)])
    assert plain.requests["e2e_s"][0] == pytest.approx(0.05)
    # steps start at 0 and 0.01; the one due at 0.02 waits for the pause to end at 0.5, then 3 more steps
    assert paused.requests["e2e_s"][0] == pytest.approx(0.5 + 0.03)
    assert paused.requests["ttft_s"][0] == pytest.approx(0.01)


def test_replay_rejects_what_ifs_it_does_not_model(kv_runs: dict[str, lltrace.Run], kv_store: Path) -> None:
    with pytest.raises(AnalysisError, match="tensor_parallel"):
        replay(kv_runs["B_kvpressure"], what_ifs={"tensor_parallel": 2.0}, store=kv_store)


def test_replay_cli_json_and_bad_what_if(kv_runs: dict[str, lltrace.Run], kv_store: Path) -> None:
    run_id = kv_runs["B_kvpressure"].id
    ok = CliRunner().invoke(app, ["replay", run_id, "--store", str(kv_store), "--what-if", "max_num_seqs=4", "--json"])
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.stdout)
    assert set(doc) >= {"calibration", "validation", "baseline", "whatifs"}
    assert doc["whatifs"][0]["max_running"] <= 4
    bad = CliRunner().invoke(app, ["replay", run_id, "--store", str(kv_store), "--what-if", "kv_blocks"])
    assert bad.exit_code == 1 and "KEY=VALUE" in bad.output and "Traceback" not in bad.output


@pytest.mark.parametrize("seed", range(12))
def test_fast_forward_equals_stepping_through(seed: int) -> None:
    """Decoders kept in aggregate + skipped decode runs give what request-by-request stepping gives."""
    rng = np.random.default_rng(seed)
    n = 300
    arrival = np.cumsum(rng.exponential(0.02, n))
    inp = rng.integers(1, 900, n)
    out = rng.integers(1, 300, n)
    block_size = int(rng.choice([4, 16, 128]))
    cfg = EngineConfig(
        num_blocks=int(rng.integers(70, 400)) * 16 // block_size + 8,
        block_size=block_size,
        max_num_seqs=int(rng.integers(4, 64)),
        max_num_batched_tokens=int(rng.choice([16, 64, 512])),
        chunked_prefill=seed % 4 != 3,
    )
    cached = rng.integers(0, 600, n) if seed % 3 == 2 else None
    cost = StepCost(c0=0.002, c_prefill=2e-5, c_decode=1e-4, c_ctx=1e-7 if seed % 5 == 4 else 0.0, overhead=0.001)
    pauses = [(float(arrival[k]) + 0.013, float(arrival[k]) + 0.4) for k in (50, 200)] if seed % 2 else None
    fast = simulate(arrival, inp, out, cfg, cost, cached_tokens=cached, pauses=pauses)
    slow = simulate(arrival, inp, out, cfg, cost, cached_tokens=cached, pauses=pauses, fast_forward=False)
    assert fast.steps == slow.steps and fast.preemptions == slow.preemptions
    assert fast.peak_kv_blocks == slow.peak_kv_blocks and fast.max_running == slow.max_running
    assert fast.max_waiting == slow.max_waiting
    for col in ("queue_s", "ttft_s", "e2e_s", "tpot_s"):
        assert fast.requests[col].to_list() == pytest.approx(slow.requests[col].to_list(), abs=1e-9)
    assert fast.requests["num_preemptions"].to_list() == slow.requests["num_preemptions"].to_list()
    assert fast.requests["status"].to_list() == slow.requests["status"].to_list()


def test_run_a_without_step_log_calibrates_on_requests_and_validates(tmp_path: Path) -> None:
    doc = replay(data_file("vllm_cpu", "A_baseline"), store=tmp_path)
    assert doc["calibration"]["source"].startswith("per-request")
    # "KV cache size: 2,097,152 tokens" in 128-token blocks (vllm:cache_config_info: block_size 128)
    assert doc["engine"]["kv_blocks"]["value"] == 2_097_152 // 128
    assert doc["engine"]["block_size"]["value"] == 128
    mape = doc["validation"]["mape"]
    # issue 19: each within 10 %. As fitted on the requests the step cost replays the calibration requests' decode
    # 1.10x long, and the 40 req/s tail, near the engine's capacity, amplifies that to TPOT and e2e ~21 % high;
    # with the cost's level matched to the calibration requests' measured decode time, 5 / 7 / 6 %
    assert mape["ttft_s"]["mean"] <= 0.10 and mape["tpot_s"]["mean"] <= 0.10 and mape["e2e_s"]["mean"] <= 0.10
    match = doc["calibration"]["decode_match"]
    assert 0.9 < match["scale"] < 1.0 and match["replayed_over_measured"] > 1.0
    assert doc["validation"]["left_out"]["requests"] == 8  # bench_profiled_8req.json: the profiler's window
    # the frontend shares the 2 CPUs: its time before the first token grows with the requests the engine holds
    assert doc["calibration"]["outside_engine_s"]["frontend_per_request_in_engine"] > 0


def test_gpu_and_precision_transfer_follow_the_catalog_ratios() -> None:
    from lltrace.physics.catalog import gpu_or_error
    from lltrace.replay.cost import transfer_step_cost

    a100, h100 = gpu_or_error("A100-80GB"), gpu_or_error("H100-SXM")
    cost = StepCost(c0=0.01, c_prefill=7e-5, c_decode=2e-5, overhead=0.001)
    moved, ratios = transfer_step_cost(cost, a100, h100)
    bw = (a100.hbm_gbps * a100.achievable_bw_fraction) / (h100.hbm_gbps * h100.achievable_bw_fraction)
    fl = (a100.bf16_tflops * a100.achievable_flops_fraction) / (h100.bf16_tflops * h100.achievable_flops_fraction)
    assert moved.c0 == pytest.approx(0.01 * bw) and moved.c_decode == pytest.approx(2e-5 * bw)
    assert moved.c_prefill == pytest.approx(7e-5 * fl) and moved.overhead == 0.001  # CPU-side time kept
    assert ratios["per_step"] < 1 and ratios["per_prefill_token"] < 1  # H100 is faster on both
    fp8, _ = transfer_step_cost(cost, h100, h100, quant_to="fp8")
    assert fp8.c0 == pytest.approx(0.005)  # half the weight bytes
    assert fp8.c_prefill == pytest.approx(7e-5 * h100.bf16_tflops / h100.fp8_tflops)
    with pytest.raises(AnalysisError, match="precision"):
        transfer_step_cost(cost, a100, h100, quant_to="fp3")


def test_gpu_what_if_needs_the_runs_gpu(kv_runs: dict[str, lltrace.Run], kv_store: Path) -> None:
    with pytest.raises(AnalysisError, match="--gpu"):
        replay(kv_runs["B_kvpressure"], what_ifs={"gpu": "H100-SXM"}, store=kv_store)
    doc = replay(kv_runs["B_kvpressure"], what_ifs={"gpu": "H100-SXM"}, store=kv_store, gpu="A100-80GB")
    faster = doc["whatifs"][0]
    assert faster["basis"] == "estimated" and faster["cost_ratios"]["per_step"] < 1
    assert faster["summary"]["tpot_s"]["mean"] < doc["baseline"]["summary"]["tpot_s"]["mean"]


def test_reference_step_cost_is_the_catalog_roofline() -> None:
    from lltrace.physics.catalog import gpu_or_error
    from lltrace.replay.cost import reference_step_cost

    a100 = gpu_or_error("A100-80GB")
    cost, blocks, info = reference_step_cost("llama-2-7b", "A100-80GB", mean_context=1000)
    bw = a100.hbm_gbps * 1e9 * a100.achievable_bw_fraction
    kv_token = 2 * 32 * 32 * 128 * 2  # K and V, 32 layers, 32 KV heads of 128, bf16 (Llama-2-7B config)
    assert cost.c0 == pytest.approx(6.74e9 * 2 / bw, rel=1e-3)
    assert cost.c_prefill == pytest.approx(2 * 6.74e9 / (a100.bf16_tflops * 1e12 * a100.achievable_flops_fraction))
    assert cost.c_decode == pytest.approx(kv_token * 1000 / bw)
    assert blocks == int((a100.memory_gb * 1e9 * 0.9 - 6.74e9 * 2) // (kv_token * 16))
    assert info["gpu"] == "A100-80GB"


def test_arrival_trace_replays_only_with_a_reference(tmp_path: Path) -> None:
    trace = data_file("serving", "azure_llm_2023", "AzureLLMInferenceTrace_code.csv")
    with pytest.raises(AnalysisError, match="--reference"):
        replay(trace, store=tmp_path)
    doc = replay(trace, store=tmp_path, reference="llama-2-7b@A100-80GB", what_ifs={"gpu": "H100-SXM"})
    assert doc["validation"] is None  # nothing measured to score against
    rows = len(trace.read_text().splitlines()) - 1  # the CSV's data rows; none has zero generated tokens
    assert doc["requests"] == {
        "replayed": rows,
        "left_out": 0,
        "why_left_out": "no arrival time, no input length, or no output tokens (failed or unknown)",
    }
    assert doc["calibration"]["source"].startswith("reference")
    assert doc["engine"]["kv_blocks"]["origin"].startswith("reference")
    assert doc["baseline"]["measured_preemptions"] is None
    h100 = doc["whatifs"][0]
    assert h100["summary"]["e2e_s"]["mean"] < doc["baseline"]["summary"]["e2e_s"]["mean"]
    # the A100's decode time per token and prefill rate, and the H100's speedups: the catalog's ratios
    from lltrace.physics.catalog import gpu_or_error

    a, h = gpu_or_error("A100-80GB"), gpu_or_error("H100-SXM")
    c = doc["calibration"]
    assert c["rates"]["decode_s_per_token_batch1"] == pytest.approx(c["c0_s"] + c["c_decode_s_per_token"])
    assert c["rates"]["prefill_tokens_per_s"] == pytest.approx(1 / c["c_prefill_s_per_token"])
    bw = (h.hbm_gbps * h.achievable_bw_fraction) / (a.hbm_gbps * a.achievable_bw_fraction)
    flops = (h.bf16_tflops * h.achievable_flops_fraction) / (a.bf16_tflops * a.achievable_flops_fraction)
    assert h100["speedup"]["decode_batch1"] == pytest.approx(bw) and h100["speedup"]["prefill"] == pytest.approx(flops)


def test_prefix_cache_hits_skip_prompt_tokens_but_hold_blocks() -> None:
    cost = StepCost(c0=0.01, c_prefill=0.001, c_decode=0.0)
    res = simulate([0.0], [100], [1], EngineConfig(num_blocks=100, block_size=16), cost, cached_tokens=[64])
    assert res.requests["ttft_s"][0] == pytest.approx(0.01 + 36 * 0.001)
    assert res.peak_kv_blocks == 7  # ceil(100 / 16): the cached prefix still occupies its blocks
    full = simulate([0.0], [100], [1], EngineConfig(num_blocks=100, block_size=16), cost, cached_tokens=[100])
    assert full.requests["ttft_s"][0] == pytest.approx(0.01 + 1 * 0.001)  # the last prompt token is recomputed


def test_mooncake_prefix_reuse_from_hash_ids(tmp_path: Path) -> None:
    path = data_file("serving", "mooncake", "conversation_trace.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    # a prompt reuses its leading blocks that a request arriving strictly earlier had (requests arriving at
    # the same instant cannot reuse each other's)
    by_time: dict[int, list[dict]] = {}
    for r in rows:
        by_time.setdefault(r["timestamp"], []).append(r)
    seen: set[int] = set()
    expected = 0
    for t in sorted(by_time):
        for r in by_time[t]:
            lead = next((i for i, h in enumerate(r["hash_ids"]) if h not in seen), len(r["hash_ids"]))
            expected += lead * 512
        for r in by_time[t]:
            seen.update(r["hash_ids"])
    doc = replay(path, store=tmp_path, reference="llama-2-7b@H100-SXM", what_ifs={"prefix_cache": 0})
    assert doc["prefix_cache"]["hit_tokens"] == expected
    assert doc["prefix_cache"]["basis"].startswith("estimated")
    no_cache = doc["whatifs"][0]["summary"]["ttft_s"]["mean"]
    assert no_cache > doc["baseline"]["summary"]["ttft_s"]["mean"]  # without reuse, more prefill to do


def test_an_engine_that_cannot_keep_up_is_called_overloaded() -> None:
    from lltrace.replay.document import overload_note as _overload_note

    cost = StepCost(c0=0.01, c_prefill=0.0, c_decode=0.0)
    cfg = EngineConfig(num_blocks=1000, block_size=16, max_num_seqs=1)
    arrivals = np.arange(20) * 0.1  # one request every 0.1 s, each needs 1 s of steps, one at a time
    res = simulate(arrivals, [10] * 20, [100] * 20, cfg, cost)
    (note,) = _overload_note(res.requests)
    assert note.startswith("overloaded: the last request finishes 20 s after the first arrival, 10.5x the 2 s")
    light = simulate(np.arange(20) * 2.0, [10] * 20, [100] * 20, cfg, cost)
    assert _overload_note(light.requests) == []


def test_design_what_if_keys_on_an_arrival_trace(tmp_path: Path) -> None:
    """The documented what-if keys (docs/replay.md): tp, gpu, weights, kv_dtype and kv_memory_gb move step cost and
    KV capacity together."""
    from lltrace.physics.catalog import gpu_or_error

    trace = data_file("serving", "azure_llm_2023", "AzureLLMInferenceTrace_code.csv")
    cases = [("tp", 2.0), ("gpu", "H200"), ("kv_dtype", "fp8"), ("kv_memory_gb", 20.0), ("weights", "fp8")]
    doc = replay(trace, store=tmp_path, reference="llama-2-7b@A100-80GB", what_ifs=cases)
    assert doc["model"] == {"name": "Llama-2-7B", "origin": "reference"}
    blocks = doc["engine"]["kv_blocks"]["value"]
    a100, h200 = gpu_or_error("A100-80GB"), gpu_or_error("H200")
    weights, kv_block = 6.74e9 * 2, 2 * 32 * 32 * 128 * 2 * 16  # Llama-2-7B bf16; K+V bytes of a 16-token block
    free = {g.name: g.memory_gb * 1e9 * 0.9 - weights for g in (a100, h200)}
    tp2, on_h200, kv_fp8, kv_20gb, fp8 = doc["whatifs"]
    assert tp2["kv_blocks"] == int(blocks * (2 * a100.memory_gb * 1e9 * 0.9 - weights) / free["A100-80GB"])
    assert tp2["speedup"]["decode_batch1"] == pytest.approx(2.0, rel=0.01)  # weights and KV split, all-reduce small
    assert on_h200["kv_blocks"] == int(blocks * free["H200"] / free["A100-80GB"])
    assert kv_fp8["kv_blocks"] == 2 * blocks  # half the bytes per KV element
    assert kv_20gb["kv_blocks"] == int(20e9 // kv_block)
    assert fp8["kv_blocks"] > blocks and fp8["speedup"]["decode_batch1"] > 1  # smaller weights: more KV, faster
    assert all(w["basis"] == "estimated" for w in doc["whatifs"])


def test_switch_and_alias_what_ifs_on_run_b(kv_runs: dict[str, lltrace.Run], kv_store: Path) -> None:
    cases = [("rate_scale", 0.5), ("rate", 0.5), ("chunked_prefill", "off"), ("prefix_caching", "off")]
    doc = replay(kv_runs["B_kvpressure"], what_ifs=cases, store=kv_store)
    assert doc["engine"]["chunked_prefill"] == {
        "value": True,
        "origin": "stated: server log: engine config line (enable_chunked_prefill)",
    }
    scale, rate, no_chunks, no_cache = doc["whatifs"]
    assert scale["summary"] == rate["summary"]  # DESIGN's rate_scale and lltrace's rate are one key
    assert scale["summary"]["queue_s"]["p50"] < doc["baseline"]["summary"]["queue_s"]["p50"]  # half the load
    assert no_chunks["what_if"] == {"chunked_prefill": "off"} and no_chunks["not_finished"] == 0
    assert no_cache["summary"] == doc["baseline"]["summary"]  # B logged no prefix hits: nothing to turn off
    wrong = ((("chunked_prefill", "maybe"), "on or off"), (("tp", 2.0), "--gpu"), (("kv_blocks", "x"), "number"))
    for bad, why in wrong:
        with pytest.raises(AnalysisError, match=why):
            replay(kv_runs["B_kvpressure"], what_ifs=[bad], store=kv_store)


def test_without_chunked_prefill_a_prompt_waits_for_a_step_with_room() -> None:
    cost = StepCost(c0=0.01, c_prefill=0.001, c_decode=0.0)
    chunked = EngineConfig(num_blocks=100, block_size=16, max_num_batched_tokens=256)
    whole = EngineConfig(num_blocks=100, block_size=16, max_num_batched_tokens=256, chunked_prefill=False)
    a = simulate([0.0, 0.0], [200, 200], [1, 1], chunked, cost).requests["ttft_s"].to_list()
    b = simulate([0.0, 0.0], [200, 200], [1, 1], whole, cost).requests["ttft_s"].to_list()
    assert a == pytest.approx([0.266, 0.266 + 0.154])  # 200 + 56 tokens in step 1, then the other 144
    assert b == pytest.approx([0.21, 0.42])  # the second prompt waits, whole, for step 2


def test_run_a_from_its_engine_spans_and_log_alone_is_validated_on_the_analysis_figures(tmp_path: Path) -> None:
    """The common production case: engine spans and the server log, no bench file. The replay's measured
    figures are the server's (the one view of them), so its validation has numbers, and its measured means
    over all requests are analyze's; with the bench files present the same holds on the client's figures."""
    a = data_file("vllm_cpu", "A_baseline")
    spans_and_log = [a / "otlp", a / "server.log"]
    for paths in (spans_and_log, [a / "bench", *spans_and_log]):
        doc = replay(paths, store=tmp_path)
        analysis = lltrace.analyze(paths, store=tmp_path).to_dict()
        v = doc["validation"]
        assert all(v[k] is not None for k in ("ttft_mean_mape", "tpot_mean_mape", "e2e_mean_mape"))
        assert v["ttft_mean_mape"] < 0.15 and v["e2e_mean_mape"] < 0.25  # see the test above
        assert doc["requests"]["left_out"] == 0
        for m in ("ttft_s", "tpot_s", "e2e_s"):
            assert doc["baseline"]["measured"][m]["mean"] == analysis["requests"][m]["mean"]
    assert analysis["requests"]["basis"] == "client"


def test_replay_takes_a_runs_files_like_its_folder(tmp_path: Path) -> None:
    a = data_file("vllm_cpu", "A_baseline")
    runner = CliRunner()
    args = ["replay", "--store", str(tmp_path), "--json", "-q"]
    listed = runner.invoke(app, [*args, str(a / "bench"), str(a / "otlp"), str(a / "server.log"), str(a / "profiler")])
    folder = runner.invoke(app, [*args, str(a)])
    assert listed.exit_code == 0 and folder.exit_code == 0, listed.output + folder.output
    one, two = json.loads(listed.stdout), json.loads(folder.stdout)
    for key in ("calibration", "validation", "requests"):
        assert one[key] == two[key], key
    # the same engine; the folder's metrics files state the block size the listed files leave to vLLM's default
    assert {k: v["value"] for k, v in one["engine"].items()} == {k: v["value"] for k, v in two["engine"].items()}
    assert one["engine"]["block_size"]["origin"].startswith("default: vLLM 0.32.0 default on CPU")
    assert two["engine"]["block_size"]["origin"] == "stated: Prometheus vllm:cache_config_info (block_size)"
    assert one["baseline"]["summary"] == two["baseline"]["summary"]
    assert one["baseline"]["measured"] == two["baseline"]["measured"]


def test_what_if_texts_expand_into_combined_cases_and_sweeps() -> None:
    """docs/replay.md: several keys in one case, comma-separated; a list or a range (powers of two) is a sweep."""
    from lltrace.replay.whatifs import what_ifs

    (both,) = what_ifs(["kv_blocks=60,max_num_seqs=16"])
    assert both.settings() == {"kv_blocks": 60.0, "max_num_seqs": 16.0}
    assert [w.setting for w in both.items] == [60, 16]
    assert [c.settings()["max_num_seqs"] for c in what_ifs(["max_num_seqs=4..32"])] == [4, 8, 16, 32]
    assert [c.settings()["max_num_seqs"] for c in what_ifs(["max_num_seqs=3..20"])] == [3, 6, 12, 20]
    assert [c.settings()["rate_scale"] for c in what_ifs(["rate_scale=0.5|1|2|4"])] == [0.5, 1, 2, 4]
    grid = what_ifs(["kv_blocks=60|80,max_num_seqs=8|16"])
    assert [tuple(c.settings().values()) for c in grid] == [(60, 8), (60, 16), (80, 8), (80, 16)]
    assert {c.asked for c in grid} == {"kv_blocks=60|80,max_num_seqs=8|16"}
    assert [c.settings() for c in what_ifs({"kv_blocks": 80, "rate": 0.5})] == [{"kv_blocks": 80}, {"rate": 0.5}]
    for bad, why in (
        ("kv_blocks=60,kv_blocks=80", "set twice"),
        ("rate=1,rate_scale=2", "set twice"),  # an alias is the same key
        ("max_num_seqs=32..4", "LOW..HIGH"),
        ("max_num_seqs=4|x", "number"),
        ("kv_blocks=60,bogus=1", "bogus"),
    ):
        with pytest.raises(AnalysisError, match=why):
            what_ifs([bad])


def test_a_combined_what_if_is_one_case_with_every_key(kv_runs: dict[str, lltrace.Run], kv_store: Path) -> None:
    run_id = kv_runs["B_kvpressure"].id
    asked = ["kv_blocks=200,max_num_seqs=4", "kv_blocks=200", "max_num_seqs=4", "kv_blocks=200,max_num_seqs=32"]
    args = [a for w in asked for a in ("--what-if", w)]
    ok = CliRunner().invoke(app, ["replay", run_id, "--store", str(kv_store), *args, "--json"])
    assert ok.exit_code == 0, ok.output
    both, kv200, seqs4, kv200_own_seqs = json.loads(ok.stdout)["whatifs"]
    assert both["what_if"] == {"kv_blocks": 200.0, "max_num_seqs": 4.0} and both["kv_blocks"] == 200
    assert both["max_running"] <= 4 and kv200["max_running"] > 4  # the sequence limit applies with the blocks
    assert both["summary"] != kv200["summary"] and both["summary"] != seqs4["summary"]
    assert kv200_own_seqs["summary"] == kv200["summary"]  # B's own max_num_seqs is 32: the kv_blocks case again
    shown = CliRunner().invoke(app, ["replay", run_id, "--store", str(kv_store), "--what-if", asked[0]])
    assert shown.exit_code == 0 and "kv_blocks=200 max_num_seqs=4" in shown.output


def test_a_sweep_is_one_case_per_value_and_is_drawn(kv_runs: dict[str, lltrace.Run], kv_store: Path) -> None:
    doc = replay(kv_runs["B_kvpressure"], what_ifs=["max_num_seqs=1..8", "kv_blocks=80"], store=kv_store)
    assert [w["what_if"] for w in doc["whatifs"]] == [{"max_num_seqs": s} for s in (1, 2, 4, 8)] + [{"kv_blocks": 80}]
    assert doc["sweeps"] == [{"what_if": "max_num_seqs=1..8", "keys": ["max_num_seqs"], "cases": [0, 1, 2, 3]}]
    running = [w["max_running"] for w in doc["whatifs"][:4]]
    assert running[:3] == [1, 2, 4] and 4 < running[3] <= 8  # at 8, B's 40 KV blocks bind first
    # one sequence at a time: nothing shares the KV cache, so nothing is preempted
    assert doc["whatifs"][0]["preemptions"] == 0
    from rich.console import Console

    from lltrace.reports.charts import replay_sweep_chart
    from lltrace.reports.terminal_replay import render_replay

    console = Console(width=160, record=True)
    console.print(render_replay(checked(doc, "replay")))
    text = console.export_text()
    assert "sweep max_num_seqs=1..8" in text and "█" in text
    chart = replay_sweep_chart(checked(doc, "replay")).to_dict()
    (panel,) = chart["vconcat"]
    assert panel["encoding"]["x"]["field"] == "value" and panel["encoding"]["x"]["scale"]["type"] == "log"


def test_calibrated_on_b_the_replay_of_b2_holds_its_queue_and_preemptions(kv_runs: dict[str, lltrace.Run]) -> None:
    """Issue 19: B2 is B's workload with twice the KV blocks. The step cost and outside time fitted on all of B,
    B2's arrivals replayed with B2's settings: its preemptions within 5 % of B2's measured ones, the median queue
    within 25 %.

    The preemptions are the scheduler's: 36 replayed of 37 since the replay keeps vLLM's null block out of the KV
    blocks (42 before). The queue and latencies are B's step cost on B2's engine, which ran faster at the same batches
    (README: the same-batch step times of the two runs), so the replay queues longer than B2 did: with one block
    fewer the median queue 20 % over (17 % with it), TTFT and e2e 17 % (14 %)."""
    doc = replay(kv_runs["B2_kv2x"], calibrate_on=kv_runs["B_kvpressure"].id, store=kv_runs["B2_kv2x"].store)
    x = doc["cross_validation"]
    assert x["calibrated_on"] == kv_runs["B_kvpressure"].id
    assert x["preemptions"]["measured"] == _final_preemptions("B2_kv2x") == 37
    assert x["preemptions"]["replayed"] == pytest.approx(37, rel=0.05)
    assert x["queue_median_mape"] <= 0.25
    assert x["replayed"]["queue_s"]["p50"] > x["measured"]["queue_s"]["p50"]  # B's slower cost: longer, not shorter
    # B's cost matched to B's own decode time (x1.06) prices B2
    assert x["ttft_mean_mape"] <= 0.20 and x["e2e_mean_mape"] <= 0.20
    # the step cost is B's, not B2's own
    b = replay(kv_runs["B_kvpressure"], store=kv_runs["B_kvpressure"].store)
    assert x["c_decode_s_per_token"] == b["calibration"]["c_decode_s_per_token"]
    # the profiled burst (B2's profiler window and the trace flush stall) is left out of the score, by count
    assert x["requests"] == 64
    from rich.console import Console

    from lltrace.reports.terminal_replay import render_replay

    console = Console(width=160, record=True)
    console.print(render_replay(checked(doc, "replay")))
    text = console.export_text()
    assert "cross-run validation" in text
    assert f"preemptions: replayed {x['preemptions']['replayed']}, measured 37" in text
    with pytest.raises(AnalysisError, match="itself"):
        replay(kv_runs["B2_kv2x"], calibrate_on=kv_runs["B2_kv2x"].id, store=kv_runs["B2_kv2x"].store)


def test_e_without_its_prefix_cache_prefills_every_prompt_token(tmp_path: Path) -> None:
    e = data_file("vllm_cpu", "E_prefix")
    prompt = sum(int(a["gen_ai.usage.prompt_tokens"]) for _, a in raw_llm_spans("E_prefix").values())
    logged = sum(
        int(m.group(1))
        for m in re.finditer(
            r"Iteration\(\d+\): \d+ context requests, (\d+) context tokens", (e / "server.log").read_text()
        )
    )
    assert (prompt, logged) == (69_319, 9_927)  # GROUND_TRUTH.md of E says the same
    doc = replay(e, store=tmp_path, what_ifs=["prefix_caching=off"])
    off = doc["whatifs"][0]
    assert doc["baseline"]["prefill_tokens"] == logged and off["prefill_tokens"] == prompt
    # every extra token is prefilled at the fitted rate: TTFT rises by at least that (and by the waits behind
    # the longer steps)
    rise = off["summary"]["ttft_s"]["mean"] - doc["baseline"]["summary"]["ttft_s"]["mean"]
    assert rise >= (prompt - logged) / doc["requests"]["replayed"] * doc["calibration"]["c_prefill_s_per_token"]
    # E's queue is microseconds: scored by its absolute error, not a percentage of almost nothing
    v = doc["validation"]
    assert v["measured"]["queue_s"]["mean"] < 1e-3 and v["queue_mean_mape"] is None
    assert v["scored_by"]["queue_s"]["mean"] == "abs_error" and v["abs_within_floor"]["queue_s"]["mean"]
    assert v["scored_by"]["ttft_s"]["mean"] == "mape"


def test_run_a_from_its_engine_spans_alone_reports_a_validation_with_numbers(tmp_path: Path) -> None:
    """Issue 19: spans alone (no server log: no KV size, no step log) still validate, the KV room labelled."""
    doc = replay(data_file("vllm_cpu", "A_baseline", "otlp"), store=tmp_path)
    v = doc["validation"]
    assert v["requests"] > 100 and all(v[k] is not None for k in ("ttft_mean_mape", "tpot_mean_mape", "e2e_mean_mape"))
    assert doc["engine"]["kv_blocks"]["origin"].startswith("assumed: room for every request at once")
    assert doc["calibration"]["source"].startswith("per-request")


def test_h_without_its_prefix_cache_against_the_real_run_without_it(tmp_path: Path) -> None:
    """A real what-if pair (sample_traces/vllm_cpu_limits: H_pfx_on, and H_pfx_off, the same prompts at the same
    arrival offsets with the cache off): the replay of H_pfx_on with ``prefix_caching=off`` computes exactly the
    prompt tokens the real run without the cache computed, and its decode and end-to-end figures hold against it."""
    on, off = SAMPLES / "vllm_cpu_limits" / "H_pfx_on", SAMPLES / "vllm_cpu_limits" / "H_pfx_off"

    def logged(run: Path) -> int:
        text = (run / "server.log").read_text()
        return sum(int(m.group(1)) for m in re.finditer(r"Iteration\(\d+\): \d+ context requests, (\d+) context", text))

    hits = re.search(r"^vllm:prefix_cache_hits_total\{[^}]*\} (\S+)$", (on / "metrics_final.prom").read_text(), re.M)
    assert (logged(on), logged(off), float(hits.group(1))) == (7_265, 46_177, 38_912)
    doc = replay(on, store=tmp_path, what_ifs=["prefix_caching=off"])
    # the per-request cached prefixes derived from the log add up to the engine's own hit counter
    run = lltrace.ingest([on], store=tmp_path)
    assert run.sql("SELECT sum(cached_tokens) FROM requests_cached_tokens").item() == 38_912
    what_if = doc["whatifs"][0]
    assert doc["baseline"]["prefill_tokens"] == 7_265 and what_if["prefill_tokens"] == 46_177
    real = replay(off, store=tmp_path)["baseline"]["measured"]
    for metric, q in (("tpot_s", "mean"), ("e2e_s", "p50"), ("e2e_s", "mean")):
        assert what_if["summary"][metric][q] == pytest.approx(real[metric][q], rel=0.10), (metric, q)


def test_speed_change_compares_the_same_batches_before_and_in_the_scored_window() -> None:
    """Batch 2 steps take 1 ms before the split and 3 ms after; batch 4 steps 2 ms before and 2 ms after, with three
    times as many after: (3 x 1 + 2 x 3) / (1 x 1 + 2 x 3) = 9/7. A step with recomputed prompt tokens, a batch seen on
    one side only, a step past the window and steps inside a disturbed window count for nothing."""
    rows = [  # start_s, wall_s, prefill_tokens, decode_tokens, decode_reqs
        (0.0, 0.001, 0, 2, 2),
        (1.0, 0.002, 0, 4, 4),
        (1.5, 0.050, 0, 4, 4),  # inside the disturbed window [1.4, 1.6)
        (2.0, 0.009, 0, 6, 6),  # batch 6 only before
        (3.0, 0.090, 0, 5, 2),  # recomputed tokens: not decode-only
        (10.0, 0.003, 0, 2, 2),
        (11.0, 0.002, 0, 4, 4),
        (12.0, 0.002, 0, 4, 4),
        (13.0, 0.002, 0, 4, 4),
        (14.0, 0.007, 0, 8, 8),  # batch 8 only after
        (30.0, 0.100, 0, 2, 2),  # past the scored window
    ]
    names = ["start_s", "wall_s", "prefill_tokens", "decode_tokens", "decode_reqs"]
    steps = pl.DataFrame(rows, schema=names, orient="row")
    got = speed_change(steps, split=5.0, until=20.0, disturbed=[(1.4, 1.6, "profiler")])
    assert got is not None and got["ratio"] == pytest.approx(9 / 7)
    assert (got["steps_after"], got["steps_before"], got["batches"]) == (4, 2, 2)
    assert speed_change(steps, split=0.0, until=20.0, disturbed=[]) is None  # nothing before: nothing to compare


def test_the_held_out_window_of_f_ran_slower_steps_which_the_replay_says(tmp_path: Path) -> None:
    """F_slots (lltrace's own run): its log's decode steps at 4 sequences took about 0.8 ms for its first iterations
    and about 2 ms for its last ones. The validation says the scored window's steps were that much slower at the
    same batches; on H_pfx_on, whose steps kept their speed, it says about 1. Both ratios checked against the raw
    log lines (the median 4-sequence step of the last 30 % of the iterations over that of the first 70 %)."""
    for name, low, high in (("F_slots", 2.0, 3.0), ("H_pfx_on", 0.85, 1.15)):
        folder = SAMPLES / "vllm_cpu_limits" / name
        text = (folder / "server.log").read_text()
        its = [
            (int(m.group(1)), int(m.group(2)), float(m.group(3)))
            for m in re.finditer(
                r"Iteration\(\d+\): (\d+) context requests, \d+ context tokens, (\d+) generation requests, \d+ "
                r"generation tokens, iteration elapsed time: ([\d.]+) ms",
                text,
            )
        ]
        cut = int(len(its) * 0.7)
        batch = max({g for c, g, _ in its if c == 0}, key=lambda b: sum(1 for c, g, _ in its if c == 0 and g == b))
        early = [t for c, g, t in its[:cut] if c == 0 and g == batch]
        late = [t for c, g, t in its[cut:] if c == 0 and g == batch]
        raw = statistics.median(late) / statistics.median(early)
        doc = replay(folder, store=tmp_path)
        change = doc["validation"]["speed_change"]
        assert low <= raw <= high and low <= change["ratio"] <= high, (name, raw, change)
    shown = CliRunner().invoke(app, ["replay", str(SAMPLES / "vllm_cpu_limits" / "F_slots"), "--store", str(tmp_path)])
    assert shown.exit_code == 0 and "same-batch step time" in shown.output


def test_the_validation_says_how_the_time_outside_the_engine_changed_in_the_scored_window(tmp_path: Path) -> None:
    """L_aiperf (lltrace's own run: AIPerf's workers and its /metrics scraper on the engine's two cores): the
    frontend (arrival to queued) and the client's share of TTFT grew in the scored window while the engine's own
    steps kept their speed. The validation's outside_change gives each side's median, checked against the raw
    files: the spans' TTFT less their queue and prefill times, AIPerf's TTFT less the span's (requests joined by
    the X-Request-Id AIPerf sent), split where the last 30 % by arrival begin (no stall in this run)."""
    folder = SAMPLES / "vllm_cpu_limits" / "L_aiperf"
    spans = {}
    for line in (folder / "otlp" / "traces.otlp.jsonl").read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for sp in (sp for ss in rs["scopeSpans"] for sp in ss["spans"] if sp["name"] == "llm_request"):
                a = {x["key"]: next(iter(x["value"].values())) for x in sp["attributes"]}
                spans[a["gen_ai.request.id"]] = (int(sp["startTimeUnixNano"]), a)
    rows = []
    for line in (folder / "bench" / "profile_export.jsonl").read_text().splitlines():
        r = json.loads(line)
        start, a = spans[f"cmpl-{r['metadata']['x_request_id']}-0"]
        ttft = a["gen_ai.latency.time_to_first_token"]
        frontend = ttft - a["gen_ai.latency.time_in_model_prefill"] - a["gen_ai.latency.time_in_queue"]
        rows.append((start, frontend, r["metrics"]["time_to_first_token"]["value"] / 1e3 - ttft))
    rows.sort()
    cut = int(round(0.7 * len(rows)))
    doc = replay(folder, store=tmp_path)
    change = doc["validation"]["outside_change"]
    for k, key in ((1, "frontend"), (2, "client_first_token")):
        before, after = (statistics.median(r[k] for r in part) for part in (rows[:cut], rows[cut:]))
        assert change[key]["before_s"] == pytest.approx(before, abs=1e-6)
        assert change[key]["after_s"] == pytest.approx(after, abs=1e-6)
        assert change[key]["ratio"] > 1.3  # the host was busier in the scored window
    assert 0.85 <= doc["validation"]["speed_change"]["ratio"] <= 1.15  # while the engine's steps kept their speed
    shown = CliRunner().invoke(app, ["replay", str(folder), "--store", str(tmp_path)])
    assert shown.exit_code == 0 and "outside the engine, median per request" in shown.output


def test_a_prefill_started_on_a_prefix_hit_has_its_own_cost_and_the_prefill_rate_then_agrees_per_machine(
    tmp_path: Path,
) -> None:
    """E and H_pfx_on compute 65-token suffixes over cached 512-token prefixes, D and H_pfx_off whole prompts, on
    two machines (D, E on one; H_pfx_on, H_pfx_off on another). Fitted with a cost per prefill started on a hit
    (placed by requests_cached_tokens), the per-token prefill rate of a run with hits agrees with the rate of the
    hit-free run of its machine within 25 %. Without it, H_pfx_on's hits' cost lands on its tokens (1.7x H_pfx_off's
    rate; E's rate stays within 25 % of D's either way, so E alone could not tell)."""
    from lltrace.replay.calibration import log_steps

    runs = {
        "D": data_file("vllm_cpu", "D_chunked"),
        "E": data_file("vllm_cpu", "E_prefix"),
        "H_on": SAMPLES / "vllm_cpu_limits" / "H_pfx_on",
        "H_off": SAMPLES / "vllm_cpu_limits" / "H_pfx_off",
    }
    steps = {k: log_steps(lltrace.ingest([v], store=tmp_path)) for k, v in runs.items()}
    with_hits = {k: fit_step_cost(s) for k, s in steps.items()}
    without = {k: fit_step_cost(s.drop("hit_prefills")) for k, s in steps.items()}
    assert int(steps["E"]["hit_prefills"].sum()) == 116 and int(steps["H_on"]["hit_prefills"].sum()) == 76
    assert with_hits["D"].c_hit == 0 and with_hits["H_off"].c_hit == 0  # nothing to fit: no hits
    for hits, fresh in (("E", "D"), ("H_on", "H_off")):
        assert with_hits[hits].c_hit > 0
        assert with_hits[hits].c_prefill / with_hits[fresh].c_prefill == pytest.approx(1.0, abs=0.25), hits
    assert without["H_on"].c_prefill / without["H_off"].c_prefill > 1.5


def test_the_engines_first_step_is_left_out_of_the_fit() -> None:
    """vLLM's Iteration(0) runs cold: however slow it is, the fit is the one of the other steps."""
    rows = [(k, 0.001 + 0.0001 * k % 3 + 0.00001 * (k % 7) * 10, 10 * (k % 7), k % 5) for k in range(1, 60)]
    names = ["step_id", "wall_s", "prefill_tokens", "decode_tokens"]
    steps = pl.DataFrame(rows, schema=names, orient="row").with_columns(pl.lit("vllm iteration log").alias("detection"))
    cold = pl.concat(
        [
            pl.DataFrame([(0, 0.5, 100, 0)], schema=names, orient="row").with_columns(
                pl.lit("vllm iteration log").alias("detection")
            ),
            steps,
        ]
    )
    a, b = fit_step_cost(steps), fit_step_cost(cold)
    assert (a.c0, a.c_prefill, a.c_decode) == (b.c0, b.c_prefill, b.c_decode)


def test_at_load_the_prefix_caches_absence_is_mostly_waiting_and_the_replay_says_so(tmp_path: Path) -> None:
    """H2_pfx_on / H2_pfx_off (lltrace's own real pair at 60 req/s): without the cache the mean TTFT rose from 16 to
    210 ms (the bench files), while the extra prompt tokens' own prefill is a few ms a request. The replay of
    H2_pfx_on with ``prefix_caching=off`` gets the real run's mean TTFT within 30 %, the waiting included."""
    on, off = SAMPLES / "vllm_cpu_limits" / "H2_pfx_on", SAMPLES / "vllm_cpu_limits" / "H2_pfx_off"
    real_on, real_off = (json.loads((f / "bench" / "bench.json").read_text())["mean_ttft_ms"] / 1e3 for f in (on, off))
    assert (round(real_on, 4), round(real_off, 4)) == (0.0164, 0.2099)
    doc = replay(on, store=tmp_path, what_ifs=["prefix_caching=off"])
    what_if = doc["whatifs"][0]
    extra = (what_if["prefill_tokens"] - doc["baseline"]["prefill_tokens"]) / doc["requests"]["replayed"]
    prefill_alone = extra * doc["calibration"]["c_prefill_s_per_token"]
    assert real_off - real_on > 10 * prefill_alone  # the rise is the waiting, not the tokens
    assert what_if["summary"]["ttft_s"]["mean"] == pytest.approx(real_off, rel=0.30)


def test_matching_the_decode_time_finds_the_scale_or_says_why_not() -> None:
    """``match_decode`` on replays whose decode time is a known function of the cost's scale: the root of a steep
    response (near capacity), of a proportional one, none where no scale within the bounds meets the measured
    time (the cost kept as fitted, the reason given), and none with too few requests."""
    from lltrace.replay.calibration import MATCH_BOUNDS, match_decode

    cost = StepCost(c0=1e-3, c_prefill=2e-5, c_decode=2e-4, overhead=5e-4, c_hit=1e-3)
    cases = [  # replayed decode time at scale k, the measured time, the scale that meets it
        (lambda k: 10.0 * k**5, 8.0, 0.8**0.2),  # steep: near capacity
        (lambda k: 10.0 * k, 12.5, 1.25),  # in proportion
        (lambda k: 8.0 + 2.0 * k, 11.0, 1.5),  # a part the cost does not move (a stall replayed as a pause)
        (lambda k: 10.0 * k, 10.0, 1.0),  # already met
    ]
    for response, measured, want in cases:
        matched, info = match_decode(cost, lambda c, r=response: r(c.scale), measured, requests=50)
        assert response(info["scale"]) == pytest.approx(measured, rel=0.003)
        assert info["scale"] == pytest.approx(want, rel=0.012) and matched.scale == info["scale"]
        assert matched.c0 == pytest.approx(cost.c0 * want, rel=0.012)
        assert matched.c_hit == pytest.approx(cost.c_hit * want, rel=0.012)
        assert matched.overhead == pytest.approx(cost.overhead * want, rel=0.012)
        assert matched.mape == cost.mape  # the fit's own quality, as fitted
    kept, info = match_decode(cost, lambda c: 10.0 * c.scale, 10.0 * MATCH_BOUNDS[1] * 1.5, requests=50)
    assert kept is cost and info["scale"] == 1.0 and "no scale between" in info["basis"]
    kept, info = match_decode(cost, lambda c: 10.0 * c.scale, 12.0, requests=5)
    assert kept is cost and info["basis"].startswith("not matched: 5 calibration requests")


@pytest.mark.parametrize("name", ["B2_kv2x", "D_chunked"])
def test_held_out_validation_of_b2_and_d_within_ten_percent(name: str, tmp_path: Path) -> None:
    """Issue 19's held-out criterion on the shared runs it holds on: mean TTFT, TPOT and e2e within 10 % (and the
    mean queue within 15 % where it measured 10 ms or more: B2's 14.8 s; D's is 4 ms)."""
    doc = replay(data_file("vllm_cpu", name), store=tmp_path)
    val = doc["validation"]
    assert val["ttft_mean_mape"] <= 0.10 and val["tpot_mean_mape"] <= 0.10 and val["e2e_mean_mape"] <= 0.10
    queue = val["measured"]["queue_s"]["mean"]
    assert queue < 0.010 or val["queue_mean_mape"] <= 0.15
    assert (name == "B2_kv2x") == (queue >= 0.010)


def test_the_engine_keeps_its_null_block_out_of_the_kv_cache() -> None:
    """vLLM V1's block pool keeps block 0 as a placeholder no request writes: with 3 blocks of 16 tokens, two
    one-block requests run at once and a third waits for a block (it would run at once with all 3)."""
    cost = StepCost(c0=0.01, c_prefill=0.0, c_decode=0.0)
    cfg = EngineConfig(num_blocks=3, block_size=16, max_num_seqs=8, max_num_batched_tokens=512)
    res = simulate([0.0, 0.0, 0.0], [8, 8, 8], [4, 4, 4], cfg, cost).requests.sort("index")
    assert res["queue_s"].to_list()[:2] == [0.0, 0.0] and res["queue_s"][2] > 0
    assert res["num_preemptions"].sum() == 0


def test_a_waiting_request_is_admitted_only_where_its_whole_prompt_fits() -> None:
    """vLLM 0.32 (``scheduler_reserve_full_isl``, on by default): a 65-token prompt whose first 16-token chunk
    would fit the free blocks waits while its whole prompt does not; admitted when the running request leaves."""
    cost = StepCost(c0=0.01, c_prefill=0.0, c_decode=0.0)
    cfg = EngineConfig(num_blocks=6, block_size=16, max_num_seqs=8, max_num_batched_tokens=16)
    # 5 blocks hold KV; the first request holds 1 for its 10 steps, and the second's prompt needs all 5
    res = simulate([0.0, 0.001], [8, 65], [10, 1], cfg, cost).requests.sort("index")
    started = res["arrival_s"][1] + res["wait_s"][1] + res["queue_s"][1]
    assert started == pytest.approx(res["e2e_s"][0], abs=1e-9)  # the step the first finished in

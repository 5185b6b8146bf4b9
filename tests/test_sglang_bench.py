"""SGLang bench_serving results of every schema it has written, read the way bench_serving computes them.

The real files in ``sample_traces/serving/sglang_bench_serving/`` are of the 2024-07 schema; the later ones are
fixtures built field by field from the source that wrote them: ``python/sglang/bench_serving.py`` @0033168f
(2024-09 to 2025: the result dict of ``benchmark()``, ``--output-details`` lists) and
``python/sglang/benchmark/metrics.py`` @1291c7fc (2026: ``save_results``, ``args`` + ``duration`` +
``BenchmarkMetrics.__dict__``). Expected figures are computed here by the tool's formulas (``calculate_metrics`` /
``do_calculate_metrics``: numpy mean, median and percentile over the successful requests).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import DATA

import lltrace

# successful requests: input tokens, output tokens, TTFT (s), inter-token gaps (s); latency = TTFT + gaps
_REQ = [
    (512, 5, 0.080, [0.010, 0.012, 0.011, 0.013]),
    (1024, 4, 0.150, [0.014, 0.015, 0.013]),
    (256, 6, 0.060, [0.009, 0.010, 0.011, 0.010, 0.012]),
]
_DURATION = 1.5


def _metrics(streamed: bool = True) -> dict[str, Any]:
    """``do_calculate_metrics`` (metrics.py @1291c7fc) over _REQ; unstreamed, every TTFT is the 0.0 default and
    there are no gaps (``np.mean(ttfts or 0)``)."""
    ttfts = [r[2] if streamed else 0.0 for r in _REQ]
    lat = [r[2] + sum(r[3]) for r in _REQ]
    itls = [g for r in _REQ for g in r[3]] if streamed else []
    tpots = [(la - t) / (r[1] - 1) for la, t, r in zip(lat, ttfts, _REQ, strict=True)]
    total_in, total_out = sum(r[0] for r in _REQ), sum(r[1] for r in _REQ)
    return {
        "completed": len(_REQ),
        "total_input": total_in,
        "total_output": total_out,
        "total_output_retokenized": total_out,
        "request_throughput": len(_REQ) / _DURATION,
        "input_throughput": total_in / _DURATION,
        "output_throughput": total_out / _DURATION,
        "output_throughput_retokenized": total_out / _DURATION,
        "total_throughput": (total_in + total_out) / _DURATION,
        "total_throughput_retokenized": (total_in + total_out) / _DURATION,
        "mean_ttft_ms": float(np.mean(ttfts)) * 1000,
        "median_ttft_ms": float(np.median(ttfts)) * 1000,
        "std_ttft_ms": float(np.std(ttfts)) * 1000,
        "p99_ttft_ms": float(np.percentile(ttfts, 99)) * 1000,
        "mean_tpot_ms": float(np.mean(tpots)) * 1000,
        "median_tpot_ms": float(np.median(tpots)) * 1000,
        "std_tpot_ms": float(np.std(tpots)) * 1000,
        "p99_tpot_ms": float(np.percentile(tpots, 99)) * 1000,
        "mean_itl_ms": float(np.mean(itls or 0)) * 1000,
        "median_itl_ms": float(np.median(itls or 0)) * 1000,
        "std_itl_ms": float(np.std(itls or 0)) * 1000,
        "p95_itl_ms": float(np.percentile(itls or 0, 95)) * 1000,
        "p99_itl_ms": float(np.percentile(itls or 0, 99)) * 1000,
        "max_itl_ms": float(np.max(itls or 0)) * 1000,
        "mean_e2e_latency_ms": float(np.mean(lat)) * 1000,
        "median_e2e_latency_ms": float(np.median(lat)) * 1000,
        "std_e2e_latency_ms": float(np.std(lat)) * 1000,
        "p99_e2e_latency_ms": float(np.percentile(lat, 99)) * 1000,
        "concurrency": float(np.sum(lat)) / _DURATION,
        "accept_length": None,
    }


def _details(streamed: bool = True) -> dict[str, Any]:
    """The ``--output-details`` lists (result_details): the same in both later schemas."""
    return {
        "input_lens": [r[0] for r in _REQ],
        "output_lens": [r[1] for r in _REQ],
        "ttfts": [r[2] if streamed else 0.0 for r in _REQ],
        "itls": [r[3] if streamed else [] for r in _REQ],
        "generated_texts": ["x"] * len(_REQ),
        "errors": [""] * len(_REQ),
    }


_ARGS = {
    "backend": "sglang",
    "dataset_name": "random",
    "max_concurrency": 4,
    "sharegpt_output_len": None,
    "random_input_len": 1024,
    "random_output_len": 8,
    "random_range_ratio": 0.0,
}


def _result_2026(rate: float | str, streamed: bool = True, details: bool = False) -> dict[str, Any]:
    """``save_results``: args, duration, then ``metrics.__dict__`` (its own field names)."""
    out = {**_ARGS, "request_rate": rate, "duration": _DURATION, **_metrics(streamed)}
    out = {k: out[k] for k in ("backend", "dataset_name", "request_rate", *out) if k in out}  # the dict's key order
    return out | (_details(streamed) if details else {})


def _result_2025(rate: float, details: bool = False) -> dict[str, Any]:
    """``benchmark()``'s result dict @0033168f: the totals named ``total_input_tokens`` / ``total_output_tokens``."""
    m = _metrics()
    renamed = {"total_input": "total_input_tokens", "total_output": "total_output_tokens"}
    keep = (
        "completed total_input total_output total_output_retokenized request_throughput input_throughput "
        "output_throughput mean_e2e_latency_ms median_e2e_latency_ms std_e2e_latency_ms p99_e2e_latency_ms "
        "mean_ttft_ms median_ttft_ms std_ttft_ms p99_ttft_ms mean_tpot_ms median_tpot_ms std_tpot_ms p99_tpot_ms "
        "mean_itl_ms median_itl_ms std_itl_ms p95_itl_ms p99_itl_ms concurrency accept_length"
    ).split()
    out = {**_ARGS, "request_rate": rate, "duration": _DURATION}
    out |= {renamed.get(k, k): m[k] for k in keep}
    return out | (_details() if details else {})


def _write(tmp_path: Path, results: list[dict[str, Any]]) -> Path:
    path = tmp_path / "sglang_0101_3_1024_8.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in results))  # bench_serving appends one line per run
    return path


def _summary(path: Path, store: Path) -> tuple[lltrace.Run, list[dict[str, Any]]]:
    run = lltrace.ingest([path], store=store)
    return run, lltrace.analyze(run).to_dict()["client_summary"]


def test_the_real_2024_07_results_are_named_by_their_schema(tmp_path: Path) -> None:
    for path in sorted((DATA / "serving" / "sglang_bench_serving").glob("*.jsonl")):
        run = lltrace.ingest([path], store=tmp_path / path.stem)
        (src,) = run.metadata["sources"]
        assert src["version"].startswith("2024-07 (bench_serving.py") and "request_throughput" not in path.read_text()


def test_a_forks_result_without_the_other_sglang_keys_is_still_sglangs(tmp_path: Path) -> None:
    """Forks of bench_serving (seen in public: a LoRA-serving study's results) drop ``sharegpt_output_len`` and the
    retokenized count but keep SGLang's e2e latency names, which vLLM's client never writes (it writes e2el): a
    real 2024-07 line with those two keys taken out is still SGLang's, not read as vLLM's result."""
    from lltrace.parsers import detect

    line = (
        DATA / "serving" / "sglang_bench_serving" / "datacrunch-h200__llama_3_3_70b_online_output.jsonl"
    ).read_text()
    raw = json.loads(line.splitlines()[0])
    fork = {k: v for k, v in raw.items() if k not in ("sharegpt_output_len", "total_output_tokens_retokenized")}
    fork |= {"architecture": "dlora", "routing_strategy": "least_loaded"}
    path = tmp_path / "fork.jsonl"
    path.write_text(json.dumps(fork) + "\n")
    assert detect(path).name == "sglang-bench"
    _, [row] = _summary(path, tmp_path / "store")
    assert row["completed"] == raw["completed"]
    assert row["e2e_s"]["mean"] == pytest.approx(raw["mean_e2e_latency_ms"] / 1e3, rel=1e-12)


@pytest.mark.parametrize("schema", ["2025", "2026"])
def test_each_later_schema_gives_the_tools_figures(schema: str, tmp_path: Path) -> None:
    make = _result_2025 if schema == "2025" else _result_2026
    results = [make(2.0), make(float("inf"))]
    _, rows = _summary(_write(tmp_path, results), tmp_path / "store")
    assert len(rows) == 2 and [r["requested_rate_per_s"] for r in rows] == [2.0, "inf"]
    m = _metrics()
    for got in rows:
        assert got["completed"] == 3 and got["duration_s"] == _DURATION
        assert got["achieved_rate_per_s"] == pytest.approx(m["request_throughput"])
        assert got["mean_input_tokens"] == pytest.approx(m["total_input"] / 3)
        assert got["mean_output_tokens"] == pytest.approx(m["total_output"] / 3)
        for lat, key in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2e", "e2e_latency")):
            assert got[f"{lat}_s"]["mean"] * 1e3 == pytest.approx(m[f"mean_{key}_ms"], rel=1e-12)
            assert got[f"{lat}_s"]["median"] * 1e3 == pytest.approx(m[f"median_{key}_ms"], rel=1e-12)
    # the 2025 dict has no total token throughput; the 2026 metrics do
    want_total = None if schema == "2025" else pytest.approx(m["total_throughput"])
    assert rows[0]["total_tokens_per_s"] == want_total


def test_the_2026_schema_and_a_trace_timed_run(tmp_path: Path) -> None:
    run, rows = _summary(_write(tmp_path, [_result_2026("trace", details=True)]), tmp_path / "store")
    (src,) = run.metadata["sources"]
    assert src["version"].startswith("2026 (sglang/benchmark/metrics.py")
    assert src["version"].endswith("with --output-details (per-request lists)")
    assert rows[0]["requested_rate_per_s"] == "trace"  # the trace's own send times, never "inf"
    reqs = run.table("requests").sort("input_tokens").to_dicts()
    assert [(r["input_tokens"], r["output_tokens"]) for r in reqs] == sorted((r[0], r[1]) for r in _REQ)
    assert sorted(r["ttft_s"] for r in reqs) == pytest.approx(sorted(r[2] for r in _REQ))


def test_a_run_that_was_not_streamed_has_no_ttft(tmp_path: Path) -> None:
    """Unstreamed, bench_serving times no first token: TTFT 0.0 per request and a mean of zeros in the summary
    (metrics.py: ``np.mean(ttfts or 0)``). lltrace reports no TTFT or ITL instead of 0 ms, and says why."""
    path = _write(tmp_path, [_result_2026(1.0, streamed=False, details=True)])
    with pytest.warns(lltrace.errors.InputWarning, match="not streamed"):
        run, rows = _summary(path, tmp_path / "store")
    (got,) = rows
    assert got["ttft_s"] is None and got["itl_s"] is None
    assert got["e2e_s"]["mean"] * 1e3 == pytest.approx(_metrics(streamed=False)["mean_e2e_latency_ms"], rel=1e-12)
    assert all(r["ttft_s"] is None for r in run.table("requests").to_dicts())
    assert run.metadata["sources"][0]["unstreamed_requests"] == len(_REQ)

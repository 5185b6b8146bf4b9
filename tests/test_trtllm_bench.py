"""trtllm-bench's files read the way trtllm-bench reads them: ``--request_json`` records and the ``--report_json``
summary it computes from them.

No real trtllm-bench file is public (PROVENANCE.md): the fixtures are built field by field from the tool's source,
``tensorrt_llm/bench/dataclasses/statistics.py`` (RequestRecord, PercentileStats.from_iterable) and
``reporting.py`` (StatsKeeper.generate_statistics_summary, ReportUtility.get_statistics_dict @0249976575). The
report is computed here from the records by those rules, independently of lltrace, so the test can check both that
lltrace carries the report's figures and that its own figures from the records agree where they are defined alike.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import lltrace

# (start, first token, end) in ns on the monotonic clock, input tokens, output tokens
_RECORDS = [
    (1_000_000_000, 1_050_000_000, 1_450_000_000, 512, 41),
    (1_010_000_000, 1_090_000_000, 1_700_000_000, 256, 61),
    (1_020_000_000, 1_140_000_000, 1_600_000_000, 1024, 33),
    (1_030_000_000, 1_180_000_000, 1_900_000_000, 700, 73),
    (1_045_000_000, 1_230_000_000, 1_800_000_000, 128, 52),
    (1_060_000_000, 1_300_000_000, 2_100_000_000, 900, 81),
    (1_080_000_000, 1_330_000_000, 1_990_000_000, 300, 60),
]


def _request_json() -> list[dict[str, Any]]:
    """``--request_json``: RequestRecord.model_dump() per request (computed fields included, ns and tok/ns)."""
    out = []
    for i, (start, first, end, isl, osl) in enumerate(_RECORDS):
        gen = osl - 1
        out.append(
            {
                "id": i,
                "num_input_tokens": isl,
                "error_tokens": 0,
                "start_timestamp": start,
                "first_token_timestamp": first,
                "end_timestamp": end,
                "decode_iteration": gen,
                "num_output_tokens": osl,
                "num_generated_tokens": gen,
                "generation_time": end - first,
                "time_to_first_token": first - start,
                "intertoken_latency": (end - first) / gen,
                "end_to_end_latency": end - start,
                "total_token_throughput": osl / (end - start),
                "output_token_throughput": gen / (end - first),
                "output": "x",
                "output_tokens": osl,
            }
        )
    return out


def _percentiles(values: list[float], p90: bool) -> dict[str, float]:
    """PercentileStats.from_iterable: the value at index int(n * q) of the sorted list (no interpolation)."""
    s, n = sorted(values), len(values)
    out = {"p50": s[int(n * 0.50)], "p95": s[int(n * 0.95)], "p99": s[int(n * 0.99)]}
    if p90:
        out["p90"] = s[int(n * 0.90)]
    return out | {"minimum": min(values), "maximum": max(values), "average": sum(values) / n}


def _report(streaming: bool, p90: bool) -> dict[str, Any]:
    """get_statistics_dict for the records above, by the tool's rules (ns -> ms as convert_to_ms)."""
    ms = 1e-6
    starts, ends = [r[0] for r in _RECORDS], [r[2] for r in _RECORDS]
    total_ns = max(ends) - min(starts)
    n, out_tokens = len(_RECORDS), sum(r[4] for r in _RECORDS)
    e2e = [(r[2] - r[0]) * ms for r in _RECORDS]
    ttft = [(r[1] - r[0]) * ms for r in _RECORDS]
    tpot = [(r[2] - r[1]) / (r[4] - 1) * ms for r in _RECORDS]
    report: dict[str, Any] = {
        "engine": {
            "model": "meta-llama/Llama-3.1-8B",
            "model_path": "None",
            "engine_dir": "None",
            "version": "1.1.0",
            "backend": "Pytorch",
            "dtype": "bfloat16",
            "kv_cache_dtype": None,
            "quantization": None,
        },
        "machine": {"name": "NVIDIA H100 80GB HBM3", "memory.total": 79.19, "clocks.mem": 2.619},
        "world_info": {
            "tp_size": 1,
            "pp_size": 1,
            "ep_size": None,
            "world_size": 1,
            "max_batch_size": 64,
            "max_num_tokens": 8192,
            "scheduling_policy": "GUARANTEED_NO_EVICT",
            "kv_cache_percentage": 0.9,
            "issue_rate": 1e9 * (max(starts) - min(starts)) / n,
        },
        "request_info": {
            "num_requests": n,
            "avg_num_concurrent_requests": 5.1,
            "avg_input_length": sum(r[3] for r in _RECORDS) / n,
            "avg_output_length": out_tokens / n,
        },
        "performance": {
            "total_latency_ms": total_ns * ms,
            "avg_request_latency_ms": sum(e2e) / n,
            "request_throughput_req_s": n / total_ns * 1e9,
            "system_output_throughput_tok_s": out_tokens / total_ns * 1e9,
            "system_total_throughput_tok_s": (out_tokens + sum(r[3] for r in _RECORDS)) / total_ns * 1e9,
            "output_throughput_per_user_tok_s": 88.0,
            "output_throughput_per_gpu_tok_s": out_tokens / total_ns * 1e9,
            "request_latency_percentiles_ms": _percentiles(e2e, p90),
        },
        "dataset": {"isl_stats": {}, "osl_stats": {}},
    }
    if streaming:
        report["streaming_metrics"] = {
            "token_output_speed_tok_s": 90.0,
            "avg_ttft_ms": sum(ttft) / n,
            "avg_tpot_ms": sum(tpot) / n,
            "tpot_percentiles": _percentiles(tpot, p90),
            "ttft_percentiles": _percentiles(ttft, p90),
            "gen_tps_percentiles": _percentiles([1e3 / t for t in tpot], p90),
        }
    return report


def _write(folder: Path, streaming: bool = True, p90: bool = True) -> tuple[Path, Path, dict[str, Any]]:
    folder.mkdir(parents=True, exist_ok=True)
    report = _report(streaming, p90)
    requests, summary = folder / "requests.json", folder / "report.json"
    requests.write_text(json.dumps(_request_json()))
    summary.write_text(json.dumps(report, indent=4))
    return requests, summary, report


def _ms(d: dict[str, Any]) -> dict[str, float]:
    return {"mean": d["average"], "median": d["p50"], "p90": d.get("p90"), "p99": d["p99"]}


def _same(got: dict[str, float | None] | None, want_ms: dict[str, float | None]) -> bool:
    """A client_summary distribution (s) equals the tool's (ms), a figure the tool did not write NULL."""
    assert got is not None and got.keys() == want_ms.keys()
    return all(
        (g is None and w is None) or (g is not None and w is not None and g * 1e3 == pytest.approx(w, rel=1e-12))
        for g, w in ((got[k], want_ms[k]) for k in got)
    )


@pytest.mark.parametrize(("streaming", "p90"), [(True, True), (False, True), (True, False)])
def test_trtllm_bench_report_gives_its_own_figures(streaming: bool, p90: bool, tmp_path: Path) -> None:
    _, path, report = _write(tmp_path / "run", streaming, p90)
    run = lltrace.ingest([path], store=tmp_path / "store")
    (src,) = run.metadata["sources"]
    assert src["format"] == "trtllm-bench-report"
    assert "TensorRT-LLM 1.1.0, Pytorch backend" in src["version"]
    assert ("not streamed" in src["version"]) is not streaming
    assert ("without p90" in src["version"]) is not p90
    (got,) = lltrace.analyze(run).to_dict()["client_summary"]
    perf, info = report["performance"], report["request_info"]
    assert got["tool"] == "trtllm-bench-report" and got["failed"] is None  # the tool counts errored requests too
    assert got["completed"] == info["num_requests"]
    assert got["achieved_rate_per_s"] == perf["request_throughput_req_s"]
    assert got["duration_s"] * 1e3 == pytest.approx(perf["total_latency_ms"], rel=1e-12)
    assert (got["mean_input_tokens"], got["mean_output_tokens"]) == (
        info["avg_input_length"],
        info["avg_output_length"],
    )
    assert got["output_tokens_per_s"] == perf["system_output_throughput_tok_s"]
    assert _same(got["e2e_s"], _ms(perf["request_latency_percentiles_ms"]))
    assert (got["e2e_s"]["p90"] is None) is not p90
    if streaming:
        stream = report["streaming_metrics"]
        assert _same(got["ttft_s"], _ms(stream["ttft_percentiles"]))
        assert _same(got["tpot_s"], _ms(stream["tpot_percentiles"]))
    else:
        assert got["ttft_s"] is None and got["tpot_s"] is None  # never the e2e relabelled as a first-token time


def test_trtllm_bench_records_and_report_agree(tmp_path: Path) -> None:
    """The records and the report of one run: lltrace's own means from the records are the report's means (the
    same definitions); its medians are interpolated where trtllm-bench takes the value at index int(n / 2)
    (PercentileStats.from_iterable), which for an odd count is the same value."""
    requests, summary, report = _write(tmp_path / "run")
    run = lltrace.ingest([requests, summary], store=tmp_path / "store")
    rows = run.table("requests").sort("client_index").to_dicts()
    assert len(rows) == len(_RECORDS)
    assert [r["ttft_s"] for r in rows] == pytest.approx([(r[1] - r[0]) / 1e9 for r in _RECORDS], abs=1e-12)
    doc = lltrace.analyze(run).to_dict()
    (client,) = doc["client_summary"]
    ttft = [(r[1] - r[0]) / 1e9 for r in _RECORDS]
    e2e = [(r[2] - r[0]) / 1e9 for r in _RECORDS]
    assert client["ttft_s"]["mean"] == pytest.approx(sum(ttft) / len(ttft), rel=1e-12)
    assert client["e2e_s"]["mean"] == pytest.approx(sum(e2e) / len(e2e), rel=1e-12)
    assert client["ttft_s"]["median"] == pytest.approx(sorted(ttft)[len(ttft) // 2], rel=1e-12)
    assert report["request_info"]["num_requests"] == doc["requests"]["count"]


def test_a_request_without_a_first_token_stamp_has_no_ttft(tmp_path: Path) -> None:
    """RequestRecord's stamps default to -1 (never set): no first-token time, not a negative TTFT."""
    records = _request_json()
    records[0]["first_token_timestamp"] = -1
    path = tmp_path / "requests.json"
    path.write_text(json.dumps(records))
    run = lltrace.ingest([path], store=tmp_path / "store")
    rows = run.table("requests").sort("client_index").to_dicts()
    assert rows[0]["ttft_s"] is None and rows[0]["e2e_s"] == pytest.approx(0.45)
    assert run.metadata["checks"]["violations"] == []  # absent, not a negative TTFT the checks had to NULL


def test_a_damaged_report_figure_is_null_and_said(tmp_path: Path) -> None:
    _, path, report = _write(tmp_path / "run")
    report["performance"]["request_throughput_req_s"] = "fast"
    report["streaming_metrics"]["ttft_percentiles"]["p99"] = -3.0
    path.write_text(json.dumps(report))
    with pytest.warns(lltrace.errors.InputWarning, match="2 summary figure"):
        run = lltrace.ingest([path], store=tmp_path / "store")
    (got,) = lltrace.analyze(run).to_dict()["client_summary"]
    assert got["achieved_rate_per_s"] is None and got["ttft_s"]["p99"] is None
    assert got["ttft_s"]["median"] is not None

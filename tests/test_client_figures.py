"""The figures each benchmark tool prints for its own run, from lltrace's reading of the tool's files.

Expected values are taken from the raw files (and, where the tool wrote one, its own summary), never from
lltrace's output: a number that differs from the tool's is a bug unless a line of the tool's source explains
it (cited beside the check).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA, SAMPLES, data_file

import lltrace

AIPERF_OLD = "aiperf-2025-10_gpt-oss-20b_c100_cancel10.profile_export.jsonl"
AIPERF_NEW = "aiperf-2025-11_qwen3-0.6b_c1_rtx6000ada.profile_export.jsonl"


def _doc(paths: list[Path], store: Path) -> dict[str, Any]:
    return lltrace.analyze([str(p) for p in paths], store=store).to_dict()


def _value(metrics: dict, *names: str) -> float | None:
    for n in names:
        if isinstance(metrics.get(n), dict):
            return metrics[n]["value"]
    return None


@pytest.mark.parametrize("name", [AIPERF_OLD, AIPERF_NEW])
def test_aiperf_both_record_schemas_give_aiperfs_own_figures(name: str, tmp_path: Path) -> None:
    """AIPerf's statistics are over its valid profiling records (records_manager.py skips other phases;
    an error record, cancelled ones included, is not valid); request throughput is valid records over
    max_response_timestamp - min_request_timestamp (benchmark_duration)."""
    path = data_file("serving", "aiperf", name)
    raw = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    valid = [r for r in raw if not r.get("error")]
    ttft = [_value(r["metrics"], "time_to_first_token", "ttft") for r in valid]
    e2e = [_value(r["metrics"], "request_latency") for r in valid]
    start_key = "request_start_ns" if "request_start_ns" in raw[0]["metadata"] else "timestamp_ns"
    starts = [r["metadata"][start_key] for r in valid]
    first, last = min(starts), max(s + lat * 1e6 for s, lat in zip(starts, e2e, strict=True))

    doc = _doc([path], tmp_path)
    req, mix = doc["requests"], doc["workload"]
    assert req["count"] == len(raw) and req["counted"] == len(valid)
    assert req["ttft_s"]["mean"] * 1e3 == pytest.approx(statistics.mean(ttft), rel=1e-12)
    assert req["e2e_s"]["mean"] * 1e3 == pytest.approx(statistics.mean(e2e), rel=1e-12)
    # arrivals are float seconds since the epoch: a microsecond's resolution
    assert mix["window_s"] == pytest.approx((last - first) / 1e9, abs=1e-6)
    assert mix["throughput_per_s"] == pytest.approx(len(valid) / ((last - first) / 1e9), rel=1e-6)
    assert mix["output_mean"] == pytest.approx(
        statistics.mean(_value(r["metrics"], "output_sequence_length") for r in valid)
    )
    version = doc["run"]["sources"][0]["version"]
    if name == AIPERF_OLD:
        assert "pre-release (metadata.timestamp_ns, credit_phase)" in version
        # its aggregate (profile_export_aiperf.json beside the file at ai-dynamo/aiperf 7c31f579) prints
        assert round(req["ttft_s"]["mean"] * 1e3, 2) == 2343.22
        assert round(req["e2e_s"]["mean"] * 1e3, 2) == 9059.65
        assert round(req["ttft_s"]["p90"] * 1e3, 4) == 3796.9312
        assert round(mix["throughput_per_s"], 4) == 9.5516  # request_throughput, 89 / 9.317788951 s
        assert req["excluded"][0]["outcome"] == "cancelled" and req["excluded"][0]["requests"] == 11
    else:
        assert "2025-10 (metadata.request_start_ns, benchmark_phase)" in version
        assert round(req["ttft_s"]["mean"] * 1e3, 3) == 31.115 and round(mix["window_s"], 3) == 250.108
        assert req["excluded"] == []


def _aiperf_record(i: int, *, schema: str, ttft_tag: str, phase: str = "profiling", **extra: Any) -> dict:
    """A record as ``MetricRecordInfo.model_dump`` wrote it: the pre-release metadata (7c31f579) or the one of
    #325 on; ``ttft`` was renamed ``time_to_first_token`` by #343."""
    t0 = 1_760_000_000_000_000_000 + i * 1_000_000_000
    md: dict[str, Any] = {"x_request_id": f"r{i}", "worker_id": "w", "record_processor_id": "p"}
    if schema == "pre-release":
        md |= {"timestamp_ns": t0, "credit_phase": phase}
    else:
        md |= {"session_num": i, "request_start_ns": t0, "request_end_ns": t0 + 2_000_000_000}
        md |= {"benchmark_phase": phase, "was_cancelled": False, "cancellation_time_ns": None}
    md |= extra.pop("metadata", {})
    metrics = {
        "input_sequence_length": {"value": 100, "unit": "tokens"},
        "output_sequence_length": {"value": 20, "unit": "tokens"},
        ttft_tag: {"value": 100.0 + i, "unit": "ms"},
        "request_latency": {"value": 2000.0, "unit": "ms"},
    }
    return {"metadata": md, "metrics": metrics, "error": None} | extra


@pytest.mark.parametrize(
    ("schema", "ttft_tag"), [("pre-release", "ttft"), ("2025-10", "ttft"), ("2025-10", "time_to_first_token")]
)
def test_aiperf_schema_versions_warmup_and_cancellation(schema: str, ttft_tag: str, tmp_path: Path) -> None:
    records = [_aiperf_record(i, schema=schema, ttft_tag=ttft_tag) for i in range(4)]
    records.append(_aiperf_record(4, schema=schema, ttft_tag=ttft_tag, phase="warmup"))
    cancel = {"code": 499, "type": "RequestCancellationError", "message": "Request was cancelled after 0.500 seconds"}
    flag = {} if schema == "pre-release" else {"metadata": {"was_cancelled": True}}
    records.append({**_aiperf_record(5, schema=schema, ttft_tag=ttft_tag, **flag), "metrics": {}, "error": cancel})
    records.append({**_aiperf_record(6, schema=schema, ttft_tag=ttft_tag), "metrics": {}, "error": {"code": 500}})
    path = tmp_path / "profile_export.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    run = lltrace.ingest([path], store=tmp_path / "store")
    status = {r["request_id"]: r["status"] for r in run.table("requests").to_dicts()}
    assert status == {"r0": "ok", "r1": "ok", "r2": "ok", "r3": "ok", "r4": "warmup", "r5": "cancelled", "r6": "error"}
    doc = lltrace.analyze(run).to_dict()
    assert doc["requests"]["ttft_s"]["mean"] == pytest.approx(0.1015)  # r0..r3 only
    assert {e["outcome"]: e["requests"] for e in doc["requests"]["excluded"]} == {
        "warmup": 1,
        "cancelled": 1,
        "failed": 1,
    }


@pytest.mark.parametrize("provider", ["bedrock", "fireworks", "lepton"])
def test_llmperf_figures_are_its_summarys_and_429_rows_stay_out(provider: str, tmp_path: Path) -> None:
    """LLMPerf's summary is over its successful requests: on the lepton file 130 of 150 rows are HTTP 429
    rejections with 1 output token and zero latencies, and results_number_output_tokens_mean is 148.15."""
    path = data_file("serving", "llmperf", f"individual__{provider}_70b.json")
    summary = json.loads(data_file("serving", "llmperf", f"summary__{provider}_70b.json").read_text())
    raw = json.loads(path.read_text())
    ok = [r for r in raw if not r["error_code"] and not r["error_msg"]]
    doc = _doc([path], tmp_path)
    assert doc["workload"]["requests"] == len(ok) == summary["results_num_completed_requests"]
    assert doc["workload"]["output_mean"] == pytest.approx(summary["results_number_output_tokens_mean"], rel=1e-12)
    assert doc["requests"]["ttft_s"]["mean"] == pytest.approx(summary["results_ttft_s_mean"], rel=1e-12)
    assert doc["requests"]["e2e_s"]["p50"] == pytest.approx(
        summary["results_end_to_end_latency_s_quantiles_p50"], rel=1e-12
    )
    excluded = [(e["outcome"], e["requests"]) for e in doc["requests"]["excluded"]]
    errors = summary["results_number_errors"]
    assert excluded == ([("failed", errors)] if errors else [])
    if provider == "lepton":
        assert round(doc["workload"]["output_mean"], 2) == 148.15 and errors == 130


BENCH = sorted((DATA / "vllm_cpu").glob("*/bench/*.json"))


@pytest.mark.parametrize("path", BENCH, ids=[f"{p.parts[-3]}/{p.stem}" for p in BENCH])
def test_vllm_bench_figures_and_its_longer_duration(path: Path, tmp_path: Path) -> None:
    """vllm bench serve's own figures, from its --save-result file alone. Its request_throughput divides by
    benchmark_duration, which starts before the first request's gamma-distributed delay
    (vllm/benchmarks/serve.py 0.32.0: ``benchmark_start_time = time.perf_counter()`` before the tasks,
    ``get_request`` sleeps ``delay_ts[0]`` before yielding the first request): lltrace's run window starts at
    the first send, so its throughput is completed / (last finish - first send), never below vLLM's."""
    raw = json.loads(path.read_text())
    ends = [s + lat for s, lat in zip(raw["start_times"], raw["latencies"], strict=True)]
    window = max(ends) - min(raw["start_times"])
    doc = _doc([path], tmp_path)
    mix, req = doc["workload"], doc["requests"]
    assert req["counted"] == raw["completed"]
    assert req["ttft_s"]["mean"] * 1e3 == pytest.approx(raw["mean_ttft_ms"], rel=1e-9)
    assert mix["window_s"] == pytest.approx(window, rel=1e-9)
    assert mix["throughput_per_s"] == pytest.approx(raw["completed"] / window, rel=1e-9)
    assert window <= raw["duration"]
    assert raw["completed"] / raw["duration"] == pytest.approx(raw["request_throughput"], rel=1e-9)
    assert mix["mean_concurrency"] == pytest.approx(sum(raw["latencies"]) / window, rel=1e-9)
    events = sorted([(s, 1) for s in raw["start_times"]] + [(e, -1) for e in ends], key=lambda e: (e[0], e[1]))
    peak = max(sum(d for _, d in events[: i + 1]) for i in range(len(events)))
    assert mix["peak_concurrency"] == peak <= raw["max_concurrent_requests"]  # vLLM's: per whole second
    (client,) = doc["client_summary"]  # vLLM's own figures, as it printed them
    assert client["achieved_rate_per_s"] == raw["request_throughput"] and client["duration_s"] == raw["duration"]
    assert client["ttft_s"]["median"] * 1e3 == pytest.approx(raw["median_ttft_ms"], rel=1e-12)
    assert client["ttft_s"]["p99"] * 1e3 == pytest.approx(raw["p99_ttft_ms"], rel=1e-12)
    assert client["e2e_s"] is None  # percentile_metrics left e2el out of its summary
    assert req["ttft_s"]["p50"] * 1e3 == pytest.approx(raw["median_ttft_ms"], rel=1e-9)  # the same median


def _guidellm_request(i: int, start: float, *, ttft_ms: float) -> dict[str, Any]:
    """A ``GenerativeRequestStats`` as guidellm >= 0.4 dumps it (computed fields included)."""
    return {
        "request_id": f"g{i}",
        "request_start_time": start,
        "request_end_time": start + 1.0,
        "request_latency": 1.0,
        "prompt_tokens": 64,
        "output_tokens": 16,
        "time_to_first_token_ms": ttft_ms,
    }


def test_guidellm_counts_only_its_measurement_window(tmp_path: Path) -> None:
    """guidellm >= 0.4 keeps warm-up and cool-down requests in ``requests`` but its metrics are over those
    ending at or after measure_start_time and starting at or before measure_end_time
    (GenerativeRequestsAccumulator.get_within_range, GenerativeMetrics.compile)."""
    t0 = 1_760_000_000.0
    reqs = [_guidellm_request(i, t0 + i, ttft_ms=100.0 + 10 * i) for i in range(8)]
    # window 2.5 .. 6.5 after t0: g0 and g1 end before it (warm-up), g7 starts after it (cool-down)
    inside = [r for r in reqs if r["request_end_time"] >= t0 + 2.5 and r["request_start_time"] <= t0 + 6.5]
    mean = statistics.mean(r["time_to_first_token_ms"] for r in inside)
    bench = {
        "type_": "generative_benchmark",
        "scheduler_metrics": {
            "start_time": t0 - 0.1,
            "request_start_time": t0,
            "measure_start_time": t0 + 2.5,
            "measure_end_time": t0 + 6.5,
            "request_end_time": t0 + 8.0,
            "end_time": t0 + 8.1,
        },
        "metrics": {"time_to_first_token_ms": {"successful": {"mean": mean, "count": len(inside)}}},
        "requests": {"successful": reqs, "incomplete": [], "errored": [], "total": None},
    }
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps({"metadata": {"version": 2, "guidellm_version": "0.7.3"}, "benchmarks": [bench]}))
    doc = _doc([path], tmp_path / "store")
    assert doc["requests"]["count"] == 8 and doc["requests"]["counted"] == len(inside) == 5
    assert doc["requests"]["ttft_s"]["mean"] * 1e3 == pytest.approx(
        bench["metrics"]["time_to_first_token_ms"]["successful"]["mean"]
    )
    assert {e["outcome"]: e["requests"] for e in doc["requests"]["excluded"]} == {"warmup": 2, "cooldown": 1}
    assert doc["run"]["sources"][0]["version"] == "guidellm 0.7.3 (report schema 2)"
    (client,) = doc["client_summary"]
    assert client["tool"] == "guidellm-benchmarks" and client["ttft_s"]["mean"] * 1e3 == pytest.approx(mean)


def test_guidellm_0_3_report_figures(tmp_path: Path) -> None:
    """The real guidellm 0.3 file: its metrics block in client_summary, and lltrace's own TTFT over the one
    request the stripped file kept (the block covers the 46 the run had)."""
    path = data_file("serving", "guidellm", "guidellm-0.3dev_stripped_1req.benchmarks.json")
    bench = json.loads(path.read_text())["benchmarks"][0]
    doc = _doc([path], tmp_path)
    (client,) = doc["client_summary"]
    ttft = bench["metrics"]["time_to_first_token_ms"]["successful"]
    assert client["ttft_s"]["mean"] == pytest.approx(ttft["mean"] / 1e3, rel=1e-12)
    assert client["ttft_s"]["p99"] == pytest.approx(ttft["percentiles"]["p99"] / 1e3, rel=1e-12)
    assert client["completed"] == bench["request_totals"]["successful"] == 46
    assert client["e2e_s"]["median"] == bench["metrics"]["request_latency"]["successful"]["median"]
    (req,) = bench["requests"]["successful"]
    assert doc["requests"]["ttft_s"]["mean"] == pytest.approx(req["first_token_time"] - req["start_time"])


def test_a_guidellm_report_of_two_benchmarks_names_each_as_guidellm_does(tmp_path: Path) -> None:
    """lltrace's own real run M_guidellm_streams: guidellm 0.8.1, concurrent streams 1 then 4 in one report. Each
    benchmark is a stage named by its strategy and streams, with guidellm's own figures, and every record joins."""
    folder = SAMPLES / "vllm_cpu_limits" / "M_guidellm_streams"
    benches = json.loads((folder / "bench" / "benchmarks.json").read_text())["benchmarks"]
    doc = _doc([folder], tmp_path)
    clients = doc["client_summary"]
    assert [c["stage"] for c in clients] == [f"concurrent@{b['config']['strategy']['streams']}" for b in benches]
    assert [c["stage"] for c in clients] == ["concurrent@1", "concurrent@4"]
    for c, b in zip(clients, benches, strict=True):
        m = b["metrics"]
        assert c["achieved_rate_per_s"] == m["requests_per_second"]["successful"]["mean"]
        assert c["ttft_s"]["median"] == pytest.approx(m["time_to_first_token_ms"]["successful"]["median"] / 1e3)
        assert c["e2e_s"]["median"] == m["request_latency"]["successful"]["median"]
        assert c["completed"] == m["request_totals"]["successful"] == 30
    assert doc["requests"]["count"] == 60
    joins = doc["run"]["join"]["clients"]
    assert [(j["client_id"], j["matched"], j["unmatched"]) for j in joins] == [
        ("concurrent@1", 30, 0),
        ("concurrent@4", 30, 0),
    ]
    assert doc["run"]["join"]["unmatched_spans"] == 0
    # the attribution per client (each benchmark a client): its requests and its mean e2e, the client's latency
    by_client = doc["attribution"]["by_client"]
    assert [r["client_id"] for r in by_client] == ["concurrent@1", "concurrent@4"]
    for r, b in zip(by_client, benches, strict=True):
        latencies = [q["request_latency"] for q in b["requests"]["successful"]]
        assert r["requests"] == len(latencies) == 30
        assert r["e2e_s"] == pytest.approx(statistics.mean(latencies), rel=1e-9)
        parts = r["queue_s"] + r["prefill_s"] + r["decode_s"] + r["preempted_s"] + r["overhead_s"]
        assert parts == pytest.approx(r["e2e_s"], rel=1e-9)


SWEEPS = sorted((DATA / "serving" / "inference_perf").iterdir())


@pytest.mark.parametrize("folder", SWEEPS, ids=[p.name for p in SWEEPS])
def test_inference_perf_sweep_is_one_run_with_a_summary_per_stage(folder: Path, tmp_path: Path) -> None:
    """A folder of inference-perf reports: each stage's lifecycle report is a client_summary entry (stage
    order, the run's summary last) with the same stage's Prometheus report as its server side."""
    stages = sorted(folder.glob("stage_*_lifecycle_metrics.json"), key=lambda p: int(p.name.split("_")[1]))
    doc = _doc([folder], tmp_path)
    entries = doc["client_summary"]
    assert [e["stage"] for e in entries] == [*range(len(stages)), "summary"]
    for path, e in zip([*stages, folder / "summary_lifecycle_metrics.json"], entries, strict=True):
        raw = json.loads(path.read_text())
        ok, load = raw["successes"], raw["load_summary"]
        assert e["tool"] == "inference-perf-lifecycle" and e["source"] == str(path)
        assert e["completed"] == ok["count"] and e["failed"] == raw["failures"]["count"]
        assert e["requested_rate_per_s"] == load.get("requested_rate")
        assert e["achieved_rate_per_s"] == load.get("achieved_rate")
        for key, name in (("ttft", "time_to_first_token"), ("e2e", "request_latency")):
            want = ok["latency"][name]
            assert e[f"{key}_s"] == {s: want[s] for s in ("mean", "median", "p90", "p99")}
        assert e["output_tokens_per_s"] == ok["throughput"]["output_tokens_per_sec"]
        server = json.loads(path.with_name(path.name.replace("lifecycle", "prometheus")).read_text())["successes"]
        assert e["server"]["requests"] == server["count"] and e["server"]["rate_per_s"] == server["rate"]
        assert e["server"]["queue_len_mean"] == server["queue_len"]["mean"]
        assert e["server"]["ttft_s"]["p90"] == server["time_to_first_token"]["p90"]
        if "schedule_delay" in load:
            assert e["send_delay_s"] == {s: load["schedule_delay"][s] for s in ("mean", "median", "p90", "p99")}
    assert doc["requests"] is None  # summaries only: no per-request rows


@pytest.mark.parametrize("folder", SWEEPS, ids=[p.name for p in SWEEPS])
def test_a_client_that_sent_slower_than_asked_is_named(folder: Path, tmp_path: Path) -> None:
    """``sent_behind`` (the send rate short of the asked one beyond a Poisson schedule's own spread) marks the same
    stages as the client's other record of it: requests leaving over a second after their scheduled time (median
    ``schedule_delay``). Both kubecon sweeps: the stages asked beyond what the server completed (about 106 and 117
    req/s); the terminal says so under the table."""
    doc = _doc([folder], tmp_path)
    stages = [e for e in doc["client_summary"] if e["stage"] != "summary"]
    late = set()
    for e in stages:
        load = json.loads(Path(e["source"]).read_text())["load_summary"]
        if load["schedule_delay"]["median"] > 1.0:
            late.add(e["stage"])
    assert {e["stage"] for e in stages if e["sent_behind"]} == late == {4, 5, 6}
    from typer.testing import CliRunner

    from lltrace.cli import app

    r = CliRunner().invoke(app, ["analyze", str(folder), "--store", str(tmp_path / "cli")], env={"COLUMNS": "200"})
    assert "stage 4, 5, 6: the client sent" in r.stdout


def test_inference_perf_server_stages_are_stage_rows_of_engine_stats(tmp_path: Path) -> None:
    """Each server report is one ``engine_stats`` row of source ``stage``: the stage's window means as the report
    wrote them, no time, KV usage NULL where it was written as 0 while the server counted requests (no
    reading). Readers of samples leave them out: beside a /metrics scrape, the run's samples are the scrape's."""
    folder = DATA / "serving" / "inference_perf" / "kubecon-na-2025_vllm"
    scrape = DATA / "vllm_cpu" / "A_baseline" / "metrics_final.prom"
    run = lltrace.ingest([folder, scrape], store=tmp_path)
    stats = run.sql("SELECT * FROM engine_stats WHERE source = 'stage'").to_dicts()
    by_stage = {r["stage"]: r for r in stats}
    assert sorted(by_stage) == sorted([str(i) for i in range(7)] + ["summary"])
    for name, row in by_stage.items():
        prefix = "summary" if name == "summary" else f"stage_{name}"
        raw = json.loads((folder / f"{prefix}_prometheus_metrics.json").read_text())["successes"]
        assert row["ts_s"] is None and row["waiting"] == raw["queue_len"]["mean"]
        assert row["prompt_throughput"] == raw["prompt_len"]["rate"]
        assert row["generation_throughput"] == raw["output_len"]["rate"]
        assert raw["kv_cache_usage_percentage"]["mean"] == 0 < raw["count"] and row["kv_usage"] is None
    samples = run.sql("SELECT samples, mean_waiting FROM engine_windows(NULL, NULL, NULL)").to_dicts()
    assert samples == [{"samples": 1, "mean_waiting": _prom_value(scrape, "vllm:num_requests_waiting")}]
    doc = lltrace.analyze(run).to_dict()
    assert doc["kv"]["peak_usage"] == _prom_value(scrape, "vllm:kv_cache_usage_perc")
    (stage4,) = [e for e in doc["client_summary"] if e["stage"] == 4]
    assert stage4["server"]["queue_len_mean"] == by_stage["4"]["waiting"] == 210
    assert stage4["server"]["kv_usage_mean"] is None  # one answer: NULL in both places


def test_inference_perf_per_request_records(tmp_path: Path) -> None:
    """``per_request_lifecycle_metrics.json`` as reportgen writes it: start / end perf_counter seconds,
    ``info`` (InferenceInfo.model_dump: request_metrics.text.input_tokens, the input_tokens mirror,
    response_metrics.output_tokens and output_token_times) and ``error``."""

    def record(i: int, error: dict | None = None) -> dict[str, Any]:
        start = 1000.0 + i
        times = [start + 0.05 + 0.01 * k for k in range(8)]
        return {
            "start_time": start,
            "end_time": start + 0.2,
            "request": "{}",
            "response": "",
            "info": {
                "request_metrics": {"text": {"input_tokens": 100 + i}},
                "response_metrics": {"output_tokens": 8, "server_usage": None, "output_token_times": times},
                "extra_info": {},
                "lora_adapter": None,
                "labels": {},
                "input_tokens": 100 + i,
            },
            "error": error,
        }

    records = [record(i) for i in range(3)] + [record(3, {"error_type": "Timeout", "error_msg": "timed out"})]
    path = tmp_path / "per_request_lifecycle_metrics.json"
    path.write_text(json.dumps(records))
    run = lltrace.ingest([path], store=tmp_path / "store")
    rows = sorted(run.table("requests").to_dicts(), key=lambda r: r["client_index"])
    assert [r["input_tokens"] for r in rows] == [100, 101, 102, 103]
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "error"]
    assert rows[0]["ttft_s"] == pytest.approx(0.05) and rows[0]["e2e_s"] == pytest.approx(0.2)
    assert rows[3]["e2e_s"] is None and rows[3]["output_tokens"] is None
    doc = lltrace.analyze(run).to_dict()
    assert doc["requests"]["counted"] == 3 and doc["workload"]["window_s"] == pytest.approx(2.2)


def test_a_guidellm_file_puts_a_vllm_logs_stats_on_the_run_clock(tmp_path: Path) -> None:
    """A vLLM server log's stamps have no year or zone; a guidellm file of the same run (epoch send times)
    dates them: every stats row gets a run-clock time, on the year of the send times."""
    from datetime import datetime, timezone

    log = DATA / "vllm_cpu" / "A_baseline" / "server.log"
    stamps = [ln.split(" INFO ")[1][:14] for ln in log.read_text().splitlines() if "Avg prompt throughput" in ln]
    year = 2026
    first = datetime.strptime(f"{year}-{stamps[0]}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    reqs = [_guidellm_request(i, first - 5.0 + i, ttft_ms=20.0) for i in range(3)]
    bench = {"requests": {"successful": reqs, "incomplete": [], "errored": []}, "metrics": {}}
    client = tmp_path / "run" / "benchmarks.json"
    client.parent.mkdir()
    client.write_text(json.dumps({"benchmarks": [bench]}))
    (tmp_path / "run" / "server.log").write_text(log.read_text())
    run = lltrace.ingest([client.parent], store=tmp_path / "store")
    rows = [r for r in run.table("engine_stats").to_dicts() if r["source"] == "log"]
    assert len(rows) == len(stamps) and all(r["ts_s"] is not None for r in rows)
    assert min(r["ts_s"] for r in rows) == first
    (placed,) = [a for a in run.metadata["clock"]["alignment"] if a.get("source") == "server log"]
    assert (
        placed["method"] == f"year {year} from the client's send time (epoch); zone UTC unless the spans say otherwise"
    )
    assert placed["zone"] == "UTC (checked: the first stats line is +5.00 s from the first client send time)"


def _prom_value(path: Path, name: str) -> float:
    """Sum of one metric's samples in a text scrape, read with a regex: independent of lltrace's parser."""
    import re

    return sum(float(m.group(1)) for m in re.finditer(rf"^{re.escape(name)}{{[^}}]*}} (\S+)$", path.read_text(), re.M))


def test_the_engines_histogram_means_between_scrapes_and_from_one(tmp_path: Path) -> None:
    """A /metrics scrape's latency histograms are shown: between the first and last scrape of run A's rate-4
    bench they give the mean over its 200 requests (the same as the engine's spans of those requests, within
    a microsecond: both come from the engine's request stats); one scrape alone gives the mean since start."""
    folder = DATA / "vllm_cpu" / "A_baseline" / "metrics_rate4"
    scrapes = sorted(folder.glob("*.prom"))
    doc = _doc([folder], tmp_path)
    hist = doc["engine_latency"]
    n = _prom_value(scrapes[-1], "vllm:e2e_request_latency_seconds_count") - _prom_value(
        scrapes[0], "vllm:e2e_request_latency_seconds_count"
    )
    total = _prom_value(scrapes[-1], "vllm:e2e_request_latency_seconds_sum") - _prom_value(
        scrapes[0], "vllm:e2e_request_latency_seconds_sum"
    )
    assert hist["basis"] == "between scrapes" and hist["e2e_requests"] == n == 200
    assert hist["e2e_mean_s"] == pytest.approx(total / n, rel=1e-12)
    spans = lltrace.ingest([DATA / "vllm_cpu" / "A_baseline"], store=tmp_path / "a").table("requests").to_dicts()
    rate4 = [r["server_e2e_s"] for r in spans if (r["client_id"] or "").startswith("bench_random_200req_rate4")]
    assert len(rate4) == 200 and hist["e2e_mean_s"] == pytest.approx(statistics.mean(rate4), abs=1e-6)
    one = DATA / "vllm_cpu" / "A_baseline" / "metrics_final.prom"
    single = _doc([one], tmp_path / "one")["engine_latency"]
    assert single["basis"] == "since server start, one scrape"
    assert single["ttft_mean_s"] == pytest.approx(
        _prom_value(one, "vllm:time_to_first_token_seconds_sum")
        / _prom_value(one, "vllm:time_to_first_token_seconds_count")
    )


def test_the_report_draws_an_inference_perf_sweep(tmp_path: Path) -> None:
    """The report's sweep chart: one point per stage (the run's summary is no point), at the requested rate."""
    from lltrace.analysis.report import report_inputs
    from lltrace.reports.charts import build_charts

    folder = DATA / "serving" / "inference_perf" / "kubecon-na-2025_vllm"
    analysis = lltrace.analyze([str(folder)], store=tmp_path)
    replayed, tables = report_inputs(analysis)
    charts = build_charts(analysis.document, replayed, tables)
    assert list(charts) == ["sweep"]
    spec = charts["sweep"].to_dict()
    latency, achieved = (c["data"]["values"] for c in spec["hconcat"])
    stages = sorted(folder.glob("stage_*_lifecycle_metrics.json"))
    rates = sorted(json.loads(p.read_text())["load_summary"]["requested_rate"] for p in stages)
    assert sorted(r["rate"] for r in achieved) == rates
    assert {r["latency"] for r in latency} == {"TTFT median", "TTFT p99", "e2e median", "e2e p99"}


REAL = Path(__file__).parent / "data" / "real"


def test_aiperf_records_and_its_own_aggregate_agree(tmp_path: Path) -> None:
    """The 2025-10 run handed over with AIPerf's own aggregate (tests/data/real, from the same commit): the
    aggregate is the client's summary, and lltrace's figures from the records are the aggregate's, every
    percentile AIPerf printed (its percentiles are numpy's linear ones, as quantile_cont)."""
    import shutil

    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(data_file("serving", "aiperf", AIPERF_OLD), run)
    agg_path = REAL / "aiperf" / "aiperf-2025-10_gpt-oss-20b_c100_cancel10.profile_export_aiperf.json"
    shutil.copy(agg_path, run)
    agg = json.loads(agg_path.read_text())["records"]
    doc = _doc([run], tmp_path / "store")
    req, mix = doc["requests"], doc["workload"]
    for key, tag in (("ttft_s", "ttft"), ("e2e_s", "request_latency"), ("tpot_s", "inter_token_latency")):
        want = agg[tag]
        assert want["unit"] == "ms"
        for mine, theirs in (("mean", "avg"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99")):
            assert req[key][mine] * 1e3 == pytest.approx(want[theirs], rel=1e-9), (key, mine)
    assert req["counted"] == agg["request_count"]["avg"]
    assert [(e["outcome"], e["requests"]) for e in req["excluded"]] == [
        ("cancelled", agg["error_request_count"]["avg"])
    ]
    assert mix["throughput_per_s"] == pytest.approx(agg["request_throughput"]["avg"], rel=1e-7)
    assert mix["output_mean"] == pytest.approx(agg["output_sequence_length"]["avg"], rel=1e-12)
    (client,) = doc["client_summary"]
    assert client["tool"] == "aiperf-summary" and client["max_concurrency"] == 100
    assert client["ttft_s"]["p99"] == pytest.approx(agg["ttft"]["p99"] / 1e3, rel=1e-12)
    assert client["achieved_rate_per_s"] == agg["request_throughput"]["avg"]


def test_the_genai_perf_shaped_aggregate(tmp_path: Path) -> None:
    """aiperf #343 on (and GenAI-Perf's profile_export_genai_perf.json): one {unit, avg, p50…} per metric at
    the top level (JsonExportData / JsonMetricResult)."""
    doc = {
        "request_throughput": {"unit": "requests/sec", "avg": 2.5},
        "request_latency": {"unit": "ms", "avg": 900.0, "p50": 850.0, "p90": 1200.0, "p99": 1500.0},
        "time_to_first_token": {"unit": "ms", "avg": 50.0, "p50": 45.0, "p90": 80.0, "p99": 120.0},
        "request_count": {"unit": "requests", "avg": 40},
        "input_config": {"loadgen": {"concurrency": 8}},
        "was_cancelled": False,
    }
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text(json.dumps(doc))
    (client,) = _doc([path], tmp_path / "store")["client_summary"]
    assert client["ttft_s"] == {"mean": 0.05, "median": 0.045, "p90": 0.08, "p99": 0.12}
    assert (client["completed"], client["achieved_rate_per_s"], client["max_concurrency"]) == (40, 2.5, 8)


def test_guidellm_0_1_guidance_report(tmp_path: Path) -> None:
    """guidellm 0.1's GuidanceReport (core/report.py, core/result.py at v0.1.0): nested benchmarks with
    ``results`` (epoch start / first-token / end times, token counts) and ``errors``."""
    t0 = 1_720_000_000.0
    result = {
        "request": {"id": "q1", "prompt": "p", "prompt_token_count": 32, "output_token_count": 8, "params": {}},
        "prompt": "p",
        "prompt_word_count": 1,
        "prompt_token_count": 32,
        "output": "o",
        "output_word_count": 1,
        "output_token_count": 8,
        "last_time": t0 + 0.5,
        "first_token_set": True,
        "start_time": t0,
        "end_time": t0 + 0.5,
        "first_token_time": t0 + 0.1,
        "decode_times": {"data": []},
    }
    bench = {
        "mode": "synchronous",
        "rate": None,
        "results": [result],
        "errors": [{"request": {"id": "q2", "prompt": "p", "params": {}}, "message": "timeout"}],
        "concurrencies": [{"time": t0, "completed": 0, "errored": 0, "processing": 1}],
    }
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"benchmarks": [{"benchmarks": [bench], "args": {}}]}))
    run = lltrace.ingest([path], store=tmp_path / "store")
    assert run.metadata["sources"][0]["version"] == "0.1 (GuidanceReport: results, errors)"
    rows = {r["request_id"]: r for r in run.table("requests").to_dicts()}
    assert (rows["q1"]["ttft_s"], rows["q1"]["e2e_s"], rows["q1"]["output_tokens"]) == (
        pytest.approx(0.1),
        pytest.approx(0.5),
        8,
    )
    assert rows["q2"]["status"] == "error"


def _llmperf_first_release(folder: Path) -> tuple[Path, Path, dict[str, Any]]:
    """What ``llmperf.py``'s ``results_analysis`` wrote before V2 (ray-project/llmperf at 1eac866^, Oct-Dec
    2023): ``df.to_json(fn)`` of the ``validate`` tuples (pandas' column-wise JSON, compact, keyed by row
    index; a failed request is ``("Exception", -1, -1, -1, -1, cause, "")``) and ``json.dumps(results_dict)``:
    the command's arguments with the means over the requests that did not raise (mismatches included)."""
    rows = [
        ("OK", 0.412, 2.5, 310, 120, "", "cmpl-a"),
        ("Exception", -1.0, -1.0, -1, -1, "429 Too Many Requests", ""),
        ("Mismatch", 0.388, 2.1, 290, 101, "Input = 7 output = 8", "cmpl-c"),
        ("OK", 0.5, 3.0, 305, 130, "", "cmpl-d"),
    ]
    cols = ("valid", "ttft", "total_time", "tokens_in", "tokens_out", "cause", "id")
    raw = {c: {str(i): r[j] for i, r in enumerate(rows)} for j, c in enumerate(cols)}
    done = [r for r in rows if r[0] != "Exception"]
    mean_ttft = statistics.fmean(r[1] for r in done)
    results = {
        "framework": "anyscale",
        "model": "meta-llama/Llama-2-70b-chat-hf",
        "total_requests": 4,
        "concur_requests": 2,
        "sleep": 0,
        "max_tokens": 384,
        "num_valid": 2,
        "num_exceptions": 1,
        "num_mismatch": 1,
        "valid_rate": 0.5,
        "mismatch_rate": 0.25,
        "exception_rate": 0.25,
        "end_timestamp": "2023-11-02T10:00:00",
        "total_time": statistics.fmean(r[2] for r in done),
        "mean_ttft": int(f"{mean_ttft * 1000:.0f}"),
        "mean_tokens_in": statistics.fmean(r[3] for r in done),
        "mean_tokens_out": statistics.fmean(r[4] for r in done),
        "out_tokens_per_s": statistics.fmean(r[4] / r[2] for r in done),
        "inter_token_delay": statistics.fmean(r[2] / r[4] for r in done) * 1000,
        "raw_output": "anyscale-1698919200_raw.json",
    }
    raw_path, summary_path = folder / "anyscale-1698919200_raw.json", folder / "anyscale-1698919200.json"
    raw_path.write_text(json.dumps(raw, separators=(",", ":")))
    summary_path.write_text(json.dumps(results))
    return raw_path, summary_path, results


def test_llmperf_first_release_files_give_its_own_means(tmp_path: Path) -> None:
    folder = tmp_path / "llmperf_v1"
    folder.mkdir()
    raw_path, summary_path, results = _llmperf_first_release(folder)
    run = lltrace.ingest([raw_path, summary_path], store=tmp_path / "store")
    versions = {s["format"]: s["version"] for s in run.metadata["sources"]}
    assert versions["llmperf"].startswith("llmperf.py first release")
    assert versions["llmperf-summary"].startswith("llmperf.py first release")
    req = run.table("requests").sort("client_index").to_dicts()
    assert [r["status"] for r in req] == ["ok", "error", "ok", "ok"]  # a mismatched reply completed
    assert req[1]["ttft_s"] is None and req[1]["input_tokens"] is None  # -1 is no value
    doc = _doc([raw_path, summary_path], tmp_path / "store2")
    assert doc["requests"]["ttft_s"]["mean"] * 1e3 == pytest.approx(results["mean_ttft"], abs=0.5)  # its rounding
    assert doc["requests"]["e2e_s"]["mean"] == pytest.approx(results["total_time"], rel=1e-12)
    (client,) = doc["client_summary"]
    assert client["completed"] == 3 and client["failed"] == 1 and client["max_concurrency"] == 2
    assert client["ttft_s"]["mean"] == results["mean_ttft"] / 1e3 and client["e2e_s"]["mean"] == results["total_time"]
    assert client["mean_output_tokens"] == results["mean_tokens_out"] and client["output_tokens_per_s"] is None


def test_an_inference_perf_server_report_alone_is_an_entry_of_its_own(tmp_path: Path) -> None:
    """A ``summarize_prometheus_metrics`` report with no client report of its stage: one client_summary entry,
    the client's figures NULL (not given), its ``server`` the report's figures (read from the raw file)."""
    path = DATA / "serving" / "inference_perf" / "kubecon-na-2025_vllm_batch_size" / "stage_6_prometheus_metrics.json"
    (e,) = _doc([path], tmp_path)["client_summary"]
    raw = json.loads(path.read_text())["successes"]
    assert e["tool"] == "inference-perf-prometheus" and e["source"] == str(path) and e["stage"] == 6
    assert e["completed"] is None and e["ttft_s"] is None and e["requested_rate_per_s"] is None
    srv = e["server"]
    assert srv["requests"] == raw["count"] and srv["rate_per_s"] == raw["rate"]
    assert srv["queue_len_mean"] == raw["queue_len"]["mean"]
    assert srv["ttft_s"] == {s: raw["time_to_first_token"][s] for s in ("mean", "median", "p90", "p99")}
    assert srv["e2e_s"]["p99"] == raw["request_latency"]["p99"]
    assert srv["kv_usage_mean"] is None  # written as 0 while it counted requests: no reading


def test_aiperf_0_13_against_vllm_joins_by_the_id_it_sent_and_reads_its_own_figures(tmp_path: Path) -> None:
    """lltrace's own real run L_aiperf (sample_traces/vllm_cpu_limits): AIPerf 0.13.0 against vLLM 0.32 with its
    spans. AIPerf sends each record's x_request_id as X-Request-Id, which vLLM takes as the request's id
    (cmpl-<id>-0). Its output counts are its tokeniser's count of the returned text (output_sequence_length),
    which here differs from the engine's (usage_completion_tokens) in every record: the joined rows keep the
    engine's and the join says so. Its aggregate has no loadgen section (the rate is the profiling phase's) and
    no error_request_count (an error-only metric: absent when nothing failed; error_summary is [])."""
    folder = SAMPLES / "vllm_cpu_limits" / "L_aiperf"
    records = [json.loads(line) for line in (folder / "bench" / "profile_export.jsonl").read_text().splitlines()]
    summary = json.loads((folder / "bench" / "profile_export_aiperf.json").read_text())
    doc = _doc([folder], tmp_path)
    run = lltrace.Store(tmp_path).run(doc["run"]["id"])
    rows = run.sql("SELECT request_id, output_tokens, matched_by FROM requests").to_dicts()
    assert {r["request_id"] for r in rows} == {f"cmpl-{r['metadata']['x_request_id']}-0" for r in records}
    assert {r["matched_by"] for r in rows} == {"request_id"}
    engine = {
        f"cmpl-{r['metadata']['x_request_id']}-0": r["metrics"]["usage_completion_tokens"]["value"] for r in records
    }
    assert all(r["output_tokens"] == engine[r["request_id"]] for r in rows)
    differ = sum(
        r["metrics"]["output_sequence_length"]["value"] != r["metrics"]["usage_completion_tokens"]["value"]
        for r in records
    )
    (client,) = doc["run"]["join"]["clients"]
    assert (client["matched"], client["output_token_mismatches"]) == (len(records), differ)
    (own,) = [c for c in doc["client_summary"] if c["source"].endswith("profile_export_aiperf.json")]
    assert own["requested_rate_per_s"] == summary["input_config"]["phases"][0]["rate"] == 4.0
    assert (own["completed"], own["failed"]) == (summary["request_count"]["avg"], 0) and summary["error_summary"] == []
    assert own["ttft_s"]["median"] == pytest.approx(summary["time_to_first_token"]["p50"] / 1e3)
    # every other file AIPerf wrote is skipped with what it is, none as an unknown or damaged file
    skipped = {Path(s["path"]).name: s["reason"] for s in doc["run"]["skipped"]}
    assert set(skipped) == {
        ".aiperf_results_ready.json",
        "inputs.json",
        "aiperf.log",
        "profile_export_console.txt",
        "server_metrics_export.csv",
        "server_metrics_export.json",
    }
    assert all(r.startswith("AIPerf's") for r in skipped.values())


def test_vllm_bench_with_its_percentile_and_goodput_options(tmp_path: Path) -> None:
    """lltrace's own real run N_bench_pcts: vllm bench serve with --metric-percentiles 25,50,90,99.9 and --goodput.
    The summary keeps the file's p90s, has no p99 (none was asked for), and carries the goodput as written."""
    folder = SAMPLES / "vllm_cpu_limits" / "N_bench_pcts"
    raw = json.loads((folder / "bench" / "bench.json").read_text())
    doc = _doc([folder], tmp_path)
    (client,) = doc["client_summary"]
    assert client["goodput_per_s"] == raw["request_goodput"] < client["achieved_rate_per_s"]
    # its SLOs are in the client's stdout only (the Namespace line): ms, as --goodput took them
    assert "goodput=['ttft:50', 'e2el:1000']" in (folder / "bench" / "bench.client.log").read_text()
    assert client["goodput_slos"] == {"ttft": 50.0, "e2el": 1000.0}
    for lat, key in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2e", "e2el")):
        assert "p99_" + key + "_ms" not in raw and client[f"{lat}_s"]["p99"] is None
        assert client[f"{lat}_s"]["p90"] == pytest.approx(raw[f"p90_{key}_ms"] / 1e3, rel=1e-12)
        assert client[f"{lat}_s"]["median"] == pytest.approx(raw[f"median_{key}_ms"] / 1e3, rel=1e-12)
    assert doc["requests"]["count"] == raw["completed"] == 80


def test_aiperf_goodput_and_its_slos(tmp_path: Path) -> None:
    """lltrace's own real run O_aiperf_goodput: AIPerf 0.13 with --goodput request_latency:170. The summary carries
    AIPerf's goodput and the SLO it was given; the goodput's good requests are the records at or under the SLO."""
    folder = SAMPLES / "vllm_cpu_limits" / "O_aiperf_goodput"
    raw = json.loads((folder / "bench" / "profile_export_aiperf.json").read_text())
    records = [json.loads(line) for line in (folder / "bench" / "profile_export.jsonl").read_text().splitlines()]
    good = sum(r["metrics"]["request_latency"]["value"] <= 170 for r in records)
    doc = _doc([folder], tmp_path)
    (client,) = [c for c in doc["client_summary"] if c["tool"] == "aiperf-summary"]
    assert client["goodput_slos"] == raw["input_config"]["slos"] == {"request_latency": 170.0}
    assert client["goodput_per_s"] == raw["goodput"]["avg"]
    assert good == raw["good_request_count"]["avg"] == 23 < client["completed"] == 40
    assert client["goodput_per_s"] < client["achieved_rate_per_s"]


def test_genai_perf_against_vllm_gives_its_own_figures(tmp_path: Path) -> None:
    """lltrace's own real run P_genai_perf: GenAI-Perf 0.0.16 (perf_analyzer 2.51) against vLLM 0.32 with its
    spans, 80 requests at 4 req/s. Its per-request export joins the spans on what both saw (GenAI-Perf sends no
    id); every request's TTFT and latency give GenAI-Perf's own statistics (numpy's percentiles, as its
    statistics.py computes them); its JSON aggregate is read, not taken for a vllm bench result for the
    "backend" in its config; the CSV copy is read once; its payloads and console log are named when skipped."""
    import numpy as np

    folder = SAMPLES / "vllm_cpu_limits" / "P_genai_perf"
    (art,) = (folder / "bench").glob("*request_rate4.0")
    own = json.loads((art / "profile_export_genai_perf.json").read_text())
    doc = _doc([folder], tmp_path)
    (client,) = doc["run"]["join"]["clients"]
    assert (client["requests"], client["matched"]) == (own["request_count"]["avg"], 80)
    run = lltrace.Store(tmp_path).run(doc["run"]["id"])
    rows = run.sql("SELECT ttft_s, e2e_s FROM requests ORDER BY request_id")
    for col, key in (("ttft_s", "time_to_first_token"), ("e2e_s", "request_latency")):
        ms = rows[col].to_numpy() * 1e3
        assert ms.mean() == pytest.approx(own[key]["avg"], rel=1e-12)
        for p in (50, 90, 99):
            assert np.percentile(ms, p) == pytest.approx(own[key][f"p{p}"], rel=1e-12)
    (summary,) = doc["client_summary"]
    assert summary["source"].endswith("profile_export_genai_perf.json")
    assert summary["requested_rate_per_s"] == own["input_config"]["perf_analyzer"]["stimulus"]["request_rate"] == 4.0
    assert summary["achieved_rate_per_s"] == pytest.approx(own["request_throughput"]["avg"])
    assert summary["completed"] == own["request_count"]["avg"]
    assert summary["ttft_s"]["p99"] == pytest.approx(own["time_to_first_token"]["p99"] / 1e3)
    sources = lltrace.Store(tmp_path).run(doc["run"]["id"]).metadata["sources"]
    (csv_src,) = [s for s in sources if s["path"].endswith(".csv")]
    assert csv_src["version"] == "GenAI-Perf csv_exporter" and csv_src["copy_of"].endswith("genai_perf.json")
    skipped = {Path(s["path"]).name: s["reason"] for s in doc["run"]["skipped"]}
    assert set(skipped) == {"inputs.json", "genai-perf.client.log"}
    assert all(r.startswith("GenAI-Perf's") for r in skipped.values())

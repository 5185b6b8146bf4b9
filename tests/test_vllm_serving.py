"""vLLM serving runs (bench JSON + client log + OTLP spans + Prometheus) joined into one requests table.

Expected values come straight from the raw span JSON and the raw bench JSON of the real vLLM CPU runs.
"""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import DATA, raw_llm_spans

import lltrace

RUNS = ["A_baseline", "B_kvpressure", "B2_kv2x"]


def _raw_spans(run_dir):
    return raw_llm_spans(run_dir)


def _raw_bench_rows(run_dir):
    n = 0
    for f in (DATA / "vllm_cpu" / run_dir / "bench").glob("*.json"):
        n += len(json.loads(f.read_text())["input_lens"])
    return n


@pytest.mark.parametrize("run_dir", RUNS)
def test_every_request_joins_its_span_and_keeps_the_engine_split(run_dir, store):
    run = lltrace.ingest([DATA / "vllm_cpu" / run_dir], store=store)
    req = {r["request_id"]: r for r in run.table("requests").to_dicts()}
    spans = _raw_spans(run_dir)
    assert len(req) == len(spans) == run.table("requests").height  # one row per request, no duplicates
    assert sum(r["client_id"] is not None for r in req.values()) == _raw_bench_rows(run_dir)
    for rid, (sp, a) in spans.items():
        r = req[rid]
        assert r["queue_s"] == pytest.approx(a["gen_ai.latency.time_in_queue"], abs=1e-6)
        assert r["prefill_s"] == pytest.approx(a["gen_ai.latency.time_in_model_prefill"], abs=1e-6)
        assert r["decode_s"] == pytest.approx(a["gen_ai.latency.time_in_model_decode"], abs=1e-6)
        assert r["arrival_ns"] == int(sp["startTimeUnixNano"])
        assert (r["input_tokens"], r["output_tokens"]) == (
            int(a["gen_ai.usage.prompt_tokens"]),
            int(a["gen_ai.usage.completion_tokens"]),
        )
        # The client measures from before the request leaves to after the last chunk arrives.
        assert 0 < r["e2e_s"] - r["server_e2e_s"] < 0.1
    clock = run.metadata["join"]["clock"]
    assert clock["residual_p90_s"] < 0.05 and clock["matched_events"] == len(spans)


def test_run_b_kv_pressure_from_the_metrics(store):
    run = lltrace.ingest([DATA / "vllm_cpu" / "B_kvpressure"], store=store)
    stats = run.sql(
        "SELECT max(preemptions_total) AS p, max(kv_usage) AS kv, max(waiting_capacity) AS wc FROM engine_stats"
    ).to_dicts()[0]
    assert stats["p"] == 55 and stats["kv"] == 1.0 and stats["wc"] == 51
    # Scrapes without a time stamp keep ts_s NULL (and say so), rather than taking the file's mtime.
    final = [s for s in run.metadata["sources"] if s["path"].endswith("metrics_final.prom")][0]
    assert final["scrape_unix_ts"] is None and final["warnings"]


def test_prefix_inferred_from_spans_without_the_client_log(store, tmp_path):
    src = DATA / "vllm_cpu" / "B2_kv2x"
    folder = tmp_path / "b2"
    folder.mkdir()
    shutil.copy(src / "bench" / "bench_kvpressure_64req.json", folder)
    shutil.copy(src / "otlp" / "traces.otlp.jsonl", folder)
    run = lltrace.ingest([folder], store=store)
    clients = run.metadata["join"]["clients"]
    assert clients == [
        {
            "client_id": "bench_kvpressure_64req.json",
            "requests": 64,
            "matched": 64,
            "method": "request_id",
            "prefix": "bench-9e5fd91b-",
            "prefix_from": "inferred from span ids and token counts",
            "token_mismatches": 0,
            "unmatched": 0,
        }
    ]


def test_bench_file_quirks(store, tmp_path):
    """Fixture built from the documented schema: appended objects, "inf" rate, legacy goodput key, a failure."""
    one = {
        "backend": "vllm",
        "request_rate": "inf",
        "request_goodput:": 1.5,
        "completed": 1,
        "failed": 1,
        "request_throughput": 2.0,
        "input_lens": [10, 20],
        "output_lens": [5, 0],
        "ttfts": [0.1, 0.0],
        "latencies": [0.5, 0.0],
        "start_times": [100.0, 100.1],
        "itls": [[0.1] * 4, []],
        "errors": ["", "Bad Request"],
    }
    two = {"backend": "vllm", "request_rate": 4.0, "request_throughput": 1.0, "completed": 3, "mean_ttft_ms": 12.0}
    path = tmp_path / "appended.json"
    path.write_text(json.dumps(one) + "\n" + json.dumps(two).replace("4.0", "Infinity", 1) + "\n")
    run = lltrace.ingest([path], store=store)
    rows = run.table("requests").sort("client_index").to_dicts()
    assert [(r["status"], r["output_tokens"], r["ttft_s"]) for r in rows] == [("ok", 5, 0.1), ("error", None, None)]
    bench = run.metadata["sources"][0]["bench"]
    assert [b["request_rate"] for b in bench] == ["inf", "inf"]
    assert bench[0]["request_goodput"] == 1.5 and "request_goodput:" not in bench[0]
    # one object with per-request latencies (serve.py) and one with only the summary's request_throughput
    src = run.metadata["sources"][0]
    assert [s.split(" (")[0] for s in src["schemas"]] == ["benchmark_serving.py", "vllm bench serve"]
    assert src["version"].endswith("; detailed (per-request lists)")


def test_otlp_kind_as_enum_name_and_single_document(store, tmp_path):
    span = {
        "traceId": "ab",
        "spanId": "cd",
        "name": "llm_request",
        "kind": "SPAN_KIND_SERVER",
        "startTimeUnixNano": "1795961962087570432",
        "endTimeUnixNano": "1795961963712544664",
        "attributes": [
            {"key": "gen_ai.request.id", "value": {"stringValue": "cmpl-x-0"}},
            {"key": "gen_ai.latency.time_in_queue", "value": {"doubleValue": 0.5}},
            {"key": "gen_ai.usage.prompt_tokens", "value": {"intValue": "832"}},
        ],
        "events": [{"name": "journey.PREEMPTED", "attributes": []}, {"name": "journey.PREEMPTED"}],
    }
    doc = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [span]}]}]}
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(doc, indent=2))
    run = lltrace.ingest([path], store=store)
    r = run.table("requests").to_dicts()[0]
    assert (r["request_id"], r["queue_s"], r["input_tokens"], r["num_preemptions"]) == ("cmpl-x-0", 0.5, 832, 2)
    assert r["prefill_s"] is None  # not in the span: NULL, not 0


def test_analyze_reports_request_percentiles_from_the_spans(store):
    import statistics

    doc = lltrace.analyze([DATA / "vllm_cpu" / "B_kvpressure"], store=store).to_dict()
    queues = [a["gen_ai.latency.time_in_queue"] for _, a in _raw_spans("B_kvpressure").values()]
    assert doc["requests"]["count"] == len(queues) == 96
    assert doc["requests"]["queue_s"]["p50"] == pytest.approx(statistics.median(queues), abs=1e-6)
    assert doc["requests"]["basis"] == "client"
    assert doc["steps"]["count_by_kind"]["decode"] == 60


def test_without_spans_the_queue_prefill_split_is_estimated_within_20_percent(store, tmp_path):
    import statistics

    src = DATA / "vllm_cpu" / "B_kvpressure"
    folder = tmp_path / "no_spans"
    for sub in ("bench", "metrics"):
        shutil.copytree(src / sub, folder / sub)
    shutil.copy(src / "server.log", folder)
    run = lltrace.ingest([folder], store=store)
    rows = run.table("requests").to_dicts()
    assert all(r["queue_s"] is None and r["prefill_s"] is None for r in rows)  # nothing measured server-side
    est = [r["queue_s_est"] for r in rows if r["queue_s_est"] is not None]
    assert len(est) == len(rows) == 96
    truth = statistics.median(a["gen_ai.latency.time_in_queue"] for _, a in _raw_spans("B_kvpressure").values())
    assert abs(statistics.median(est) - truth) / truth < 0.20
    assert all(r["split_basis"].startswith("estimated:") for r in rows)
    assert run.metadata["ttft_split"]["requests_split"] == 96


def test_request_events_follow_each_spans_timeline(store):
    run = lltrace.ingest([DATA / "vllm_cpu" / "B2_kv2x"], store=store)
    counts = dict(run.sql("SELECT event, count(*) FROM request_events GROUP BY 1").rows())
    assert counts == {"queued": 96, "scheduled": 96, "first_token": 96, "finished": 96}
    bad = run.sql("""
        SELECT count(*) FROM (SELECT request_id, list(event ORDER BY ts_s) AS seq FROM request_events GROUP BY 1)
        WHERE seq <> ['queued', 'scheduled', 'first_token', 'finished']""").rows()[0][0]
    assert bad == 0  # in time order for every request


def test_prometheus_histogram_sums_match_the_spans(store):
    """The final scrape's cumulative queue-time histogram equals the spans' summed time_in_queue."""
    run = lltrace.ingest([DATA / "vllm_cpu" / "B2_kv2x" / "metrics_final.prom"], store=store)
    row = run.table("engine_stats").to_dicts()[0]
    queues = [a["gen_ai.latency.time_in_queue"] for _, a in _raw_spans("B2_kv2x").values()]
    assert row["queue_time_count"] >= len(queues)  # the bench's warm-up request is counted too
    assert row["queue_time_sum_s"] == pytest.approx(sum(queues), rel=0.01)


def test_vllm_family_bad_input(store, tmp_path):
    from lltrace.errors import TraceFormatError

    src = (DATA / "vllm_cpu" / "B2_kv2x" / "otlp" / "traces.otlp.jsonl").read_text().splitlines()
    cut = tmp_path / "cut.otlp.jsonl"
    cut.write_text("\n".join(src[:3]) + "\n" + src[3][: len(src[3]) // 2] + "\n")  # a truncated JSON line
    with pytest.warns(lltrace.errors.InputWarning, match="line 4: 1 damaged line"):  # only that line lost
        read = lltrace.ingest([cut], store=tmp_path / "lenient")
    assert read.metadata["sources"][0]["dropped"]["damaged_lines"] == 1
    with pytest.raises(TraceFormatError, match="damaged line 4"):
        lltrace.ingest([cut], store=store, strict=True)
    bench = json.loads((DATA / "vllm_cpu" / "B2_kv2x" / "bench" / "bench_kvpressure_64req.json").read_text())
    bench["ttfts"] = bench["ttfts"][:-1]  # per-request lists of different lengths
    bad = tmp_path / "bench.json"
    bad.write_text(json.dumps(bench))
    with pytest.raises(TraceFormatError, match="per-request list 'ttfts' has 63 entries, input_lens has 64"):
        lltrace.ingest([bad], store=store)
    assert lltrace.Store(store).run_ids() == []

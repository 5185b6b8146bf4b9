"""Benchmark clients other than vLLM's, SGLang's and LLMPerf's (``parsers/llmperf.py``): GenAI-Perf / Perf
Analyzer, AIPerf and guidellm per-request exports and summaries. What each file holds: docs/formats.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import (
    check_ids,
    check_row_clocks,
    clean_statistics,
    drop_reversed,
    error_code,
    error_line,
    json_objects,
    load_json,
    stamp_ns,
    write_rows,
)
from lltrace.source_info import SourceInfo

# -- shared helpers ------------------------------------------------------------------------------------


GENAI_PERF = "genai-perf-export"
AIPERF = "aiperf-export"


def sniff_genai_perf(head: bytes) -> bool:
    """Perf Analyzer / GenAI-Perf ``profile_export.json``."""
    text = head.lstrip()
    return (
        text.startswith(b"{")
        and b'"experiments"' in text
        and (b'"response_timestamps"' in text or b'"service_kind"' in text or b'"requests"' in text)
    )


def _openai_body(text: Any) -> dict[str, Any] | None:
    """One OpenAI response body or SSE chunk as GenAI-Perf saved it (``data: {...}``), or None."""
    if not isinstance(text, str):
        return None
    body = text.strip()
    if body.startswith("data:"):
        body = body[5:].strip()
    if not body.startswith("{"):
        return None  # "[DONE]" and keep-alives
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def _has_content(obj: dict[str, Any]) -> bool:
    """Whether a chunk carries generated text: GenAI-Perf's LLMProfileDataParser skips the role-only first
    chunk and the empty last ones when it times first and last tokens."""
    for choice in obj.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        if delta.get("content") or choice.get("text") or message.get("content"):
            return True
    return False


def _genai_perf_request(r: dict[str, Any], service: Any) -> dict[str, Any]:
    """Send time, TTFT, e2e, tokens and streaming of one GenAI-Perf request record.

    First and last token are the first and last responses with content (triton: every ``text_output``;
    OpenAI: chunks whose choices carry text), as GenAI-Perf's parser times them; token counts are the
    ``usage`` an OpenAI server sent (the last chunk or the body), else NULL (GenAI-Perf re-tokenizes the
    text, which lltrace does not). A request sent without ``"stream": true`` has one response: its first
    token time is its e2e, so TTFT is NULL, not a figure.
    """
    t0 = r.get("timestamp")
    stamps = r.get("response_timestamps") or []
    outputs = r.get("response_outputs")
    payload = (r.get("request_inputs") or {}).get("payload")
    try:
        sent = json.loads(payload) if isinstance(payload, str) else None
    except json.JSONDecodeError:
        sent = None
    usage: dict[str, Any] = {}
    content = list(stamps)
    if isinstance(outputs, list) and len(outputs) == len(stamps):
        content = []
        for ts, out in zip(stamps, outputs, strict=True):
            if isinstance(out, str):  # the 2024-02 export: each response's output bytes as one string
                if out.strip():
                    content.append(ts)
                continue
            if not isinstance(out, dict):
                continue
            if "text_output" in out:
                if out.get("text_output"):
                    content.append(ts)
                continue
            obj = _openai_body(out.get("response"))
            if obj is None:
                continue
            if isinstance(obj.get("usage"), dict):
                usage = obj["usage"]
            if _has_content(obj):
                content.append(ts)
    if isinstance(sent, dict) and "stream" in sent:
        streamed = sent.get("stream") is True
    else:
        streamed = len(stamps) > 1 or service == "triton"
    ok = bool(content) and t0 is not None
    return {
        "arrival_ns": t0,
        "arrival_s": t0 / 1e9 if t0 is not None else None,
        "ttft_s": (content[0] - t0) / 1e9 if ok and streamed else None,
        "e2e_s": (content[-1] - t0) / 1e9 if ok else None,
        "input_tokens": usage.get("prompt_tokens"),
        "output_tokens": usage.get("completion_tokens"),
        "status": "ok" if ok else "error",
        "_streamed": streamed,
    }


def _genai_perf_schema(data: dict[str, Any]) -> str:
    """Which of Perf Analyzer's profile-export schemas a file is, by the keys its exporter wrote
    (``profile_data_exporter.cc`` in triton-inference-server/perf_analyzer, by commit): timestamps only
    (2023-08, d7dfe0a7); response outputs as plain strings (2024-02, e1314582); outputs as named tensors
    and ``request_inputs`` (2024-03, 79b5e266); ``service_kind`` and ``endpoint`` (2024-05 on, ba8b829d)."""
    requests = [r for e in data.get("experiments") or [] for r in (e.get("requests") or []) if isinstance(r, dict)]
    if "service_kind" in data:
        return "2024-05 on (service_kind, endpoint)"
    if any("request_inputs" in r for r in requests):
        return "2024-03 (named outputs, request_inputs)"
    outputs = [o for r in requests for o in (r.get("response_outputs") or [])]
    if outputs:
        return "2024-02 (outputs as text)" if all(isinstance(o, str) for o in outputs) else "2024-03 (named outputs)"
    return "2023-08 (response timestamps only)"


def ingest_genai_perf(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per request: send time (epoch ns), TTFT and e2e from the responses with content, tokens from the
    server's ``usage`` where the responses carry it (``_genai_perf_request``)."""
    info = SourceInfo(path=path, format=GENAI_PERF)
    data = load_json(path)
    schema = _genai_perf_schema(data)
    info.version = (f"perf_analyzer {data['version']} · " if data.get("version") else "") + schema
    info.details["export_schema"] = schema
    service = data.get("service_kind")
    rows = []
    unstreamed = 0
    for exp in data.get("experiments", []):
        e = exp.get("experiment", {})
        client = f"{e.get('mode')}={e.get('value')}"
        for i, r in enumerate(exp.get("requests", [])):
            for stamp in [r.get("timestamp"), *(r.get("response_timestamps") or [])]:
                stamp_ns(path, f"request {i + 1}", stamp)  # ns since the epoch: beyond int64 no clock
            row = _genai_perf_request(r, service)
            unstreamed += not row.pop("_streamed")
            rows.append({"client_id": client, "client_index": i, **row})
    if unstreamed:
        info.warnings.append(
            f"{path}: {unstreamed} of {len(rows)} requests were not streamed: the first token arrives with the "
            "whole answer, so TTFT equals e2e and is left NULL (not a first-token time)"
        )
        info.details["not_streamed"] = unstreamed
    check_row_clocks(path, rows, "arrival_s", "the send time (epoch ns)")
    info.records = write_rows(stage, "requests", part, rows)
    info.details["service_kind"] = service
    return info


def sniff_aiperf(head: bytes) -> bool:
    """AIPerf ``profile_export.jsonl``: one record per line with metadata and {value, unit} metrics.

    Both record schemas AIPerf has published: ``metadata.request_start_ns`` (with ``benchmark_phase``) since
    its per-record export was merged (ai-dynamo/aiperf #325, 2025-10-09), ``metadata.timestamp_ns`` (with
    ``credit_phase``) in the pre-release exports before it (``examples/artifacts`` of 2025-10-03).
    """
    line = head.lstrip().split(b"\n", 1)[0]
    if not (line.startswith(b"{") and b'"metadata"' in line and b'"metrics"' in line):
        return False
    return b'"request_start_ns"' in line or (b'"timestamp_ns"' in line and b'"credit_phase"' in line)


def _metric(metrics: dict, name: str) -> float | None:
    m = metrics.get(name)
    if not isinstance(m, dict) or m.get("value") is None or isinstance(m.get("value"), list):
        return None
    scale = {"ms": 1e-3, "s": 1.0, "ns": 1e-9, "us": 1e-6}.get(m.get("unit", ""), 1.0)
    return float(m["value"]) * scale


def _count(metrics: dict, name: str) -> Any:
    """A token count metric's value as written (``checks`` holds it to whole numbers)."""
    m = metrics.get(name)
    return m.get("value") if isinstance(m, dict) and not isinstance(m.get("value"), list) else None


AIPERF_SCHEMAS = {
    "request_start_ns": "record schema 2025-10 (metadata.request_start_ns, benchmark_phase)",
    "timestamp_ns": "record schema 2025-10 pre-release (metadata.timestamp_ns, credit_phase)",
}
"""AIPerf's per-record export schemas, by the metadata field that holds the send time (aiperf
``common/models/record_models.py`` ``MetricRecordMetadata`` at 7c31f579 and from 5e0b1e17 on)."""


def _aiperf_status(r: dict, md: dict) -> str:
    """AIPerf's own reading of a record: warm-up records are skipped by its records manager
    (``records_manager.py``: ``benchmark_phase != PROFILING``); a cancelled request is one the worker ended
    with ``RequestCancellationError`` (code 499, ``workers/worker.py``), flagged ``was_cancelled`` since #325;
    any other error record failed."""
    phase = md.get("benchmark_phase", md.get("credit_phase"))
    if isinstance(phase, str) and phase.lower() == "warmup":
        return "warmup"
    err = r.get("error")
    if md.get("was_cancelled") or (
        isinstance(err, dict) and (err.get("type") == "RequestCancellationError" or err.get("code") == 499)
    ):
        return "cancelled"
    return "error" if err else "ok"


def _aiperf_error(err: Any) -> dict[str, Any]:
    """A failed record's ``error`` (AIPerf's ``ErrorDetails``: the HTTP status as ``code``, the exception's
    ``type``, the ``message``) as the requests' ``error_code`` and ``error``."""
    if not isinstance(err, dict):
        return {"error_code": None, "error": error_line(err) if err else None}
    text = ": ".join(str(err[k]) for k in ("type", "message") if err.get(k))
    return {"error_code": error_code(err.get("code")), "error": error_line(text)}


def ingest_aiperf(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per request: ids, send time, sizes, TTFT and e2e (units read from each metric), in either schema.

    TTFT is ``time_to_first_token`` (``ttft`` before aiperf #343, 2025-10-10); output tokens are
    ``output_sequence_length`` (generated plus reasoning tokens, what AIPerf's OSL statistics read).
    """
    info = SourceInfo(path=path, format=AIPERF)
    rows = []
    reversed_at: list[int] = []
    schemas: set[str] = set()
    for i, r in enumerate(json_objects(path, info)):
        md, mt = r.get("metadata") or {}, r.get("metrics") or {}
        key = "request_start_ns" if "request_start_ns" in md else "timestamp_ns"
        schemas.add(key)
        start = md.get(key)
        end = md.get("request_end_ns")
        if isinstance(start, (int, float)) and isinstance(end, (int, float)) and end < start:
            reversed_at.append(i)
        isl = _count(mt, "input_sequence_length")
        ttft = _metric(mt, "time_to_first_token")
        rows.append(
            {
                "request_id": md.get("x_request_id"),
                "client_id": Path(path).name,
                "client_index": i,
                "arrival_ns": start,
                "arrival_s": start / 1e9 if start is not None else None,
                "input_tokens": isl if isl is not None else _count(mt, "error_isl"),
                "output_tokens": _count(mt, "output_sequence_length"),
                "ttft_s": ttft if ttft is not None else _metric(mt, "ttft"),
                "e2e_s": _metric(mt, "request_latency"),
                "status": _aiperf_status(r, md),
                **_aiperf_error(r.get("error")),
            }
        )
    info.version = "profile_export.jsonl · " + " and ".join(AIPERF_SCHEMAS[k] for k in sorted(schemas))
    drop_reversed(path, info, rows, reversed_at, "metadata.request_end_ns before request_start_ns")
    check_ids(path, rows)
    check_row_clocks(path, rows, "arrival_s", "the request's start (metadata.request_start_ns / timestamp_ns)")
    info.records = write_rows(stage, "requests", part, rows)
    return info


# -- AIPerf / GenAI-Perf aggregates ---------------------------------------------------------------------------

AIPERF_SUMMARY = "aiperf-summary"


def sniff_aiperf_summary(head: bytes) -> bool:
    """AIPerf ``profile_export_aiperf.json`` (``records`` of {tag, unit, header, avg, p50…}, before aiperf #343)
    or the GenAI-Perf-shaped summary AIPerf writes since #343 and GenAI-Perf writes as
    ``profile_export_genai_perf.json`` (one {unit, avg, p50…} object per metric at the top level)."""
    text = head.lstrip()
    if not text.startswith(b"{") or b'"experiments"' in text:
        return False
    if re.match(rb'\{\s*"records"\s*:\s*\{', text) and b'"tag"' in text and b'"avg"' in text:
        return True
    return re.search(rb'"(request_latency|time_to_first_token|request_throughput)"\s*:\s*\{\s*"unit"', text) is not None


_TO_S = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "ns": 1e-9, "us": 1e-6}


def ingest_aiperf_summary(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """The tool's own statistics per metric, kept in the metadata (``client_summary``), latencies in seconds."""
    info = SourceInfo(path=path, format=AIPERF_SUMMARY)
    data = load_json(path)
    if not isinstance(data, dict):
        raise TraceFormatError(path, "line 1", "expected one JSON object")
    if "records" in data and not isinstance(data["records"], dict):
        raise TraceFormatError(path, "key 'records'", f"expected an object, found {type(data['records']).__name__}")
    if isinstance(data.get("records"), dict):
        metrics, info.version = data["records"], "aggregate, records schema (before aiperf #343)"
    else:
        metrics = {k: v for k, v in data.items() if isinstance(v, dict) and "unit" in v}
        info.version = "aggregate, GenAI-Perf-shaped schema (aiperf #343 on, GenAI-Perf)"
    clean_statistics(path, metrics, info)
    kept: dict[str, Any] = {}
    for tag, m in metrics.items():
        if not isinstance(m, dict):
            continue
        scale = _TO_S.get(str(m.get("unit")), 1.0)
        kept[tag] = {
            "unit": "s" if str(m.get("unit")) in _TO_S else m.get("unit"),
            **{k: (m[k] * scale if isinstance(m.get(k), (int, float)) else None) for k in ("avg", "p50", "p90", "p99")},
        }
    cfg = data.get("input_config") if isinstance(data.get("input_config"), dict) else {}
    load = cfg.get("loadgen") if isinstance(cfg.get("loadgen"), dict) else {}
    # AIPerf 0.13 on: no loadgen; the load is the profiling phase's (phases[]: type, requests, rate, concurrency)
    phases = [p for p in cfg.get("phases") or [] if isinstance(p, dict) and p.get("kind", "profiling") == "profiling"]
    phase = phases[0] if len(phases) == 1 else {}
    # error_request_count is an error-only metric (aiperf metrics/types/error_request_count.py: ERROR_ONLY), absent
    # when nothing failed; error_summary lists each kind of error with its count ([] when none)
    errors = data.get("error_summary")
    listed = (
        sum(int(e["count"]) for e in errors if isinstance(e, dict) and isinstance(e.get("count"), (int, float)))
        if isinstance(errors, list)
        else None
    )
    slos = cfg.get("slos") if isinstance(cfg.get("slos"), dict) else None  # its --goodput: metric tag -> value
    # GenAI-Perf: the load it asked perf_analyzer for (config_perf_analyzer.py's stimulus: {"request_rate": r},
    # {"concurrency": n}, {"session_concurrency": n} or {"fixed_schedule": None})
    pa = cfg.get("perf_analyzer") if isinstance(cfg.get("perf_analyzer"), dict) else {}
    stimulus = pa.get("stimulus") if isinstance(pa.get("stimulus"), dict) else {}
    info.details["aiperf_summary"] = {
        "metrics": kept,
        "slos": slos or None,
        "concurrency": load.get("concurrency", phase.get("concurrency", stimulus.get("concurrency"))),
        "request_rate": load.get("request_rate", phase.get("rate", stimulus.get("request_rate"))),
        "errors_listed": listed,
    }
    info.records = 1
    return info


# -- guidellm ----------------------------------------------------------------------------------------------

GUIDELLM = "guidellm-benchmarks"


def sniff_guidellm(head: bytes) -> bool:
    """guidellm ``benchmarks.json`` (0.1's GuidanceReport, 0.2-0.3 and >= 0.4 schemas)."""
    text = head.lstrip()
    return (
        text.startswith(b"{")
        and b'"benchmarks"' in text
        and (
            b'"requests"' in text
            or b'"metrics"' in text
            or b'"guidellm' in text
            or b'"run_id"' in text
            or (b'"results"' in text and b'"concurrencies"' in text)  # 0.1
        )
    )


def _guidellm_phase(start: Any, end: Any, measure_start: Any, measure_end: Any) -> str | None:
    """``warmup`` / ``cooldown`` for a request outside guidellm's measurement window, else None.

    guidellm >= 0.4 keeps every request in ``requests`` but computes its metrics over those that end at or
    after ``scheduler_metrics.measure_start_time`` and start at or before ``measure_end_time`` (a request with
    no start: ends by then): ``GenerativeRequestsAccumulator.get_within_range``, called by
    ``GenerativeMetrics.compile``. guidellm <= 0.3 never wrote warm-up or cool-down requests to the file.
    """
    if not isinstance(end, (int, float)) or not isinstance(measure_start, (int, float)):
        return None
    if end < measure_start:
        return "warmup"
    if isinstance(measure_end, (int, float)):
        if (start > measure_end) if isinstance(start, (int, float)) else (end > measure_end):
            return "cooldown"
    return None


_GUIDELLM_METRICS = (
    "requests_per_second",
    "request_latency",
    "time_to_first_token_ms",
    "time_per_output_token_ms",
    "inter_token_latency_ms",
    "output_tokens_per_second",
    "tokens_per_second",
    "prompt_token_count",
    "output_token_count",
)


def _guidellm_summary(bench: dict[str, Any]) -> dict[str, Any]:
    """What guidellm itself reports for one benchmark: its strategy and rate, request totals, duration and the
    successful requests' distributions (mean, median, p90, p99) of each metric ``client_summary`` shows."""
    settings = bench.get("config") or bench.get("args")
    settings = settings if isinstance(settings, dict) else {}
    strategy = settings.get("strategy") if isinstance(settings.get("strategy"), dict) else {}
    raw = bench.get("metrics") if isinstance(bench.get("metrics"), dict) else {}
    metrics: dict[str, Any] = {}
    for name in _GUIDELLM_METRICS:
        d = raw.get(name)
        ok = d.get("successful") if isinstance(d, dict) else None
        if isinstance(ok, dict):
            pct = ok.get("percentiles") if isinstance(ok.get("percentiles"), dict) else {}
            metrics[name] = {
                "successful": {
                    "mean": ok.get("mean"),
                    "median": ok.get("median"),
                    "percentiles": {"p90": pct.get("p90"), "p99": pct.get("p99")},
                }
            }
    kind, rate, streams = strategy.get("type_"), strategy.get("rate"), strategy.get("streams")
    at = rate if isinstance(rate, (int, float)) else streams if isinstance(streams, (int, float)) else None
    return {
        "benchmark_id": settings.get("id_"),  # (>= 0.4; its CSV report names each benchmark by it)
        "strategy": kind,
        "rate": rate,
        "streams": streams,  # concurrent: requests kept in flight
        # as guidellm names a benchmark: its strategy at its rate or its streams (poisson@4, concurrent@16;
        # synchronous and throughput have neither)
        "label": f"{kind}@{at:g}" if kind and at is not None else kind,
        "duration": bench.get("duration"),
        "request_totals": bench.get("request_totals") or raw.get("request_totals"),
        "metrics": metrics,
    }


# the HTTP status in the text of the exception a request failed with: httpx's HTTPStatusError (guidellm 0.2 on;
# "Client error '429 Too Many Requests' for url '...'" then a line of help) and the OpenAI SDK's APIStatusError
# (guidellm 0.1: "Error code: 429 - {...}")
_STATUS_IN_TEXT = re.compile(
    r"^(?:(?:Informational response|Redirect response|Client error|Server error|Invalid status code) '|Error code: )"
    r"([0-9]{3})\b"
)


def _guidellm_error(text: Any) -> dict[str, Any]:
    """A guidellm request's error text (``str`` of the exception it failed with) as ``error`` and, where the text
    is an HTTP client's status error, ``error_code``."""
    if not isinstance(text, str) or not text.strip():
        return {"error_code": None, "error": None}
    found = _STATUS_IN_TEXT.match(text.strip())
    line = text.strip().splitlines()[0] if found else text  # httpx's second line is a link to the status's page
    return {"error_code": int(found.group(1)) if found else None, "error": error_line(line)}


def _guidellm_v01(data: dict[str, Any]) -> list[dict[str, Any]]:
    """guidellm 0.1 (``GuidanceReport``, core/report.py at v0.1.0): ``benchmarks[]`` of
    ``TextGenerationBenchmarkReport``, each with ``benchmarks[]`` of ``TextGenerationBenchmark`` (``mode``,
    ``rate``, ``results[]`` of ``TextGenerationResult`` with epoch ``start_time``, ``first_token_time``,
    ``end_time`` and token counts, ``errors[]`` with the request only)."""
    rows = []
    for r_i, report in enumerate(data.get("benchmarks") or []):
        for b_i, bench in enumerate((report or {}).get("benchmarks") or []):
            client = f"benchmark-{r_i}.{b_i}"
            for r in bench.get("results") or []:
                start, first, end = r.get("start_time"), r.get("first_token_time"), r.get("end_time")
                rows.append(
                    {
                        "request_id": (r.get("request") or {}).get("id"),
                        "client_id": client,
                        "arrival_s": start,
                        "input_tokens": r.get("prompt_token_count"),
                        "output_tokens": r.get("output_token_count"),
                        "ttft_s": first - start if first is not None and start is not None else None,
                        "e2e_s": end - start if end is not None and start is not None else None,
                        "status": "ok",
                    }
                )
            for e in bench.get("errors") or []:
                req = e.get("request") or {}
                failure = _guidellm_error(e.get("message"))
                rows.append({"request_id": req.get("id"), "client_id": client, "status": "error", **failure})
    return rows


def ingest_guidellm(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per request from ``requests.{successful,incomplete,errored}`` (0.2 on, both timing schemas) or 0.1's
    ``results`` / ``errors``."""
    info = SourceInfo(path=path, format=GUIDELLM)
    data = load_json(path)
    first = (data.get("benchmarks") or [None])[0]
    if isinstance(first, dict) and "benchmarks" in first and "requests" not in first:
        rows = _guidellm_v01(data)
        info.version = "0.1 (GuidanceReport: results, errors)"
        check_ids(path, rows)
        check_row_clocks(path, rows, "arrival_s", "the request's start time (epoch s)")
        info.records = write_rows(stage, "requests", part, rows)
        return info
    rows = []
    reversed_at: list[int] = []
    old = 0
    excluded = {"warmup": 0, "cooldown": 0}
    summaries = [_guidellm_summary(b) for b in data.get("benchmarks", [])]
    labels = [s["label"] for s in summaries]
    for b_i, bench in enumerate(data.get("benchmarks", [])):
        # each benchmark a client, named as guidellm names it where that tells it from the others
        client = labels[b_i] if labels[b_i] and labels.count(labels[b_i]) == 1 else f"benchmark-{b_i}"
        groups = bench.get("requests") or {}
        timing = bench.get("scheduler_metrics") or {}
        measure = (timing.get("measure_start_time"), timing.get("measure_end_time"))
        for status, items in (
            ("ok", groups.get("successful")),
            ("incomplete", groups.get("incomplete")),
            ("error", groups.get("errored")),
        ):
            for r in items or []:
                # the current schema: request_start_time, time_to_first_token_ms, request_latency; <= 0.3:
                # start_time, first_token_time, end_time (unix s), some builds with the _ms figures beside them
                current = "request_start_time" in r
                old += not current
                start = r.get("request_start_time") if current else r.get("start_time")
                first, end = r.get("first_token_time"), r.get("end_time")
                ttft_ms = r.get("time_to_first_token_ms")
                if ttft_ms is not None:
                    ttft = ttft_ms / 1e3
                else:
                    ttft = first - start if first is not None and start is not None else None
                e2e = r.get("request_latency")
                if e2e is None and end is not None and start is not None:
                    e2e = end - start
                ends = r.get("request_end_time") if current else end
                if isinstance(start, (int, float)) and isinstance(ends, (int, float)) and ends < start:
                    reversed_at.append(len(rows))
                phase = _guidellm_phase(r.get("request_start_time"), r.get("request_end_time"), *measure)
                if phase:
                    excluded[phase] += 1
                rows.append(
                    {
                        "request_id": r.get("request_id"),
                        # >= 0.8: the response's id, which vLLM gives its request (cmpl-<x>; the engine's own id
                        # for the first prompt is cmpl-<x>-0): the join by id, guidellm's own id never sent
                        "engine_request_id": r.get("response_id"),
                        "client_id": client,
                        "arrival_s": start,
                        "input_tokens": r.get("prompt_tokens"),
                        "output_tokens": r.get("output_tokens"),
                        "cached_tokens": r.get("cached_tokens"),
                        "ttft_s": ttft,
                        "e2e_s": e2e,
                        "status": phase or status,
                        # the error: 0.2-0.3 on the errored request itself, 0.4 on in its scheduler info
                        **_guidellm_error(r.get("error") or (r.get("info") or {}).get("error")),
                    }
                )
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    if old and old == len(rows):
        info.version = "<= 0.3 schema (start_time, end_time)"
    elif meta.get("guidellm_version"):
        info.version = f"guidellm {meta['guidellm_version']} (report schema {meta.get('version', '?')})"
    else:
        info.version = ">= 0.4 schema (request_start_time, scheduler_metrics)"
    if any(excluded.values()):
        info.details["excluded_by_guidellm"] = excluded
    info.details["guidellm_metrics"] = summaries
    drop_reversed(
        path, info, rows, reversed_at, "request_end_time before request_start_time, or end_time before start_time"
    )
    check_ids(path, rows)  # one id twice is two requests that cannot be told apart: the error, never one
    check_row_clocks(path, rows, "arrival_s", "the request's start time (epoch s)")
    info.records = write_rows(stage, "requests", part, rows)
    return info

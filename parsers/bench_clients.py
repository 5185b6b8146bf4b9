"""Benchmark clients other than vLLM's and SGLang's: Ray LLMPerf, GenAI-Perf / Perf Analyzer, AIPerf and
guidellm per-request exports (and LLMPerf's summary).

LLMPerf rows carry no ids and no timestamps, only durations in completion order, so they become ``requests``
rows with ``request_id`` and ``arrival_s`` NULL. Field facts: docs/SERVING_FORMATS.md §D.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import check_ids, check_row_clocks, json_objects, load_json, write_rows
from lltrace.tables import SourceInfo

LLMPERF = "llmperf"
LLMPERF_SUMMARY = "llmperf-summary"


def sniff_llmperf(head: bytes) -> bool:
    """LLMPerf ``*_individual_responses.json``: a JSON array of per-request result objects."""
    text = head.lstrip()
    return text.startswith(b"[") and b'"end_to_end_latency_s"' in text and b'"ttft_s"' in text


def sniff_llmperf_summary(head: bytes) -> bool:
    """LLMPerf ``*_summary.json``: one flat object of ``results_*`` statistics."""
    text = head.lstrip()
    return text.startswith(b"{") and b'"results_' in text and b'"num_concurrent_requests"' in text


def ingest_llmperf(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per-request rows in completion order; errored rows kept with status ``error``.

    LLMPerf's ``inter_token_latency_s`` is a mean for successes but the sum of gaps for errored rows; it is
    not a requests column, so the quirk only matters for the summary kept in the metadata.
    """
    info = SourceInfo(path=path, format=LLMPERF, version="individual responses")
    data = load_json(path)
    if not isinstance(data, list):
        raise TraceFormatError(path, "line 1", "expected a JSON array of per-request objects")
    rows = []
    errors = 0
    name = Path(path).name
    for i, r in enumerate(data):
        if not isinstance(r, dict):
            raise TraceFormatError(path, f"element {i}", "expected an object")
        failed = r.get("error_code") not in (None, 0) or bool(r.get("error_msg"))
        errors += failed
        rows.append(
            {
                "client_id": name,
                "client_index": i,
                "input_tokens": r.get("number_input_tokens"),
                "output_tokens": r.get("number_output_tokens"),
                "status": "error" if failed else "ok",
                "ttft_s": r.get("ttft_s"),
                "e2e_s": r.get("end_to_end_latency_s"),
            }
        )
    info.records = write_rows(stage, "requests", part, rows)
    info.details["errored_requests"] = errors
    return info


def ingest_llmperf_summary(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """The summary statistics, kept in the run metadata (no per-request rows)."""
    info = SourceInfo(path=path, format=LLMPERF_SUMMARY, version="summary")
    data = load_json(path)
    if not isinstance(data, dict):
        raise TraceFormatError(path, "line 1", "expected one JSON object")
    info.details["summary"] = {k: v for k, v in data.items() if not re.match(r".*_quantiles_p(25|75|95)$", k)}
    info.records = 1
    return info


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


def ingest_genai_perf(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per request: send time (epoch ns), TTFT and e2e from the response timestamps.

    Token counts need re-tokenizing the streamed text, which lltrace does not do: they stay NULL.
    """
    info = SourceInfo(path=path, format=GENAI_PERF)
    data = load_json(path)
    info.version = str(data.get("version")) if data.get("version") else "profile export"
    rows = []
    for exp in data.get("experiments", []):
        e = exp.get("experiment", {})
        client = f"{e.get('mode')}={e.get('value')}"
        for i, r in enumerate(exp.get("requests", [])):
            t0 = r.get("timestamp")
            resp = r.get("response_timestamps") or []
            rows.append(
                {
                    "client_id": client,
                    "client_index": i,
                    "arrival_ns": t0,
                    "arrival_s": t0 / 1e9 if t0 is not None else None,
                    "ttft_s": (resp[0] - t0) / 1e9 if resp and t0 is not None else None,
                    "e2e_s": (resp[-1] - t0) / 1e9 if resp and t0 is not None else None,
                    "status": "ok" if resp else "error",
                }
            )
    check_row_clocks(path, rows, "arrival_s", "the send time (epoch ns)")
    info.records = write_rows(stage, "requests", part, rows)
    info.details["service_kind"] = data.get("service_kind")
    return info


def sniff_aiperf(head: bytes) -> bool:
    """AIPerf ``profile_export.jsonl``: one record per line with metadata and {value, unit} metrics."""
    line = head.lstrip().split(b"\n", 1)[0]
    return line.startswith(b"{") and b'"metadata"' in line and b'"metrics"' in line and b'"request_start_ns"' in line


def _metric(metrics: dict, name: str) -> float | None:
    m = metrics.get(name)
    if not isinstance(m, dict) or m.get("value") is None or isinstance(m.get("value"), list):
        return None
    scale = {"ms": 1e-3, "s": 1.0, "ns": 1e-9, "us": 1e-6}.get(m.get("unit", ""), 1.0)
    return float(m["value"]) * scale


def ingest_aiperf(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per request: ids, send time, sizes, TTFT and e2e (units read from each metric)."""
    info = SourceInfo(path=path, format=AIPERF, version="profile_export.jsonl")
    rows = []
    for i, r in enumerate(json_objects(path, info)):
        md, mt = r.get("metadata") or {}, r.get("metrics") or {}
        isl = (
            mt.get("input_sequence_length", {}).get("value")
            if isinstance(mt.get("input_sequence_length"), dict)
            else None
        )
        osl = (
            mt.get("output_sequence_length", {}).get("value")
            if isinstance(mt.get("output_sequence_length"), dict)
            else None
        )
        start = md.get("request_start_ns")
        rows.append(
            {
                "request_id": md.get("x_request_id"),
                "client_id": Path(path).name,
                "client_index": i,
                "arrival_ns": start,
                "arrival_s": start / 1e9 if start is not None else None,
                "input_tokens": isl if isl is not None else r.get("error_isl"),  # whole, or NULLed and counted
                "output_tokens": osl,
                "ttft_s": _metric(mt, "time_to_first_token"),
                "e2e_s": _metric(mt, "request_latency"),
                "status": "error" if r.get("error") else ("cancelled" if md.get("was_cancelled") else "ok"),
            }
        )
    check_ids(path, rows)
    check_row_clocks(path, rows, "arrival_s", "the request's start (request_start_ns)")
    info.records = write_rows(stage, "requests", part, rows)
    return info


# -- guidellm ----------------------------------------------------------------------------------------------

GUIDELLM = "guidellm-benchmarks"


def sniff_guidellm(head: bytes) -> bool:
    """guidellm ``benchmarks.json`` (new and <=0.3 schemas)."""
    text = head.lstrip()
    return (
        text.startswith(b"{")
        and b'"benchmarks"' in text
        and (b'"requests"' in text or b'"metrics"' in text or b'"guidellm' in text or b'"run_id"' in text)
    )


def ingest_guidellm(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per request from ``requests.{successful,incomplete,errored}``; both timing schemas."""
    info = SourceInfo(path=path, format=GUIDELLM)
    data = load_json(path)
    rows = []
    old = 0
    for b_i, bench in enumerate(data.get("benchmarks", [])):
        groups = bench.get("requests") or {}
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
                rows.append(
                    {
                        "request_id": r.get("request_id"),
                        "client_id": f"benchmark-{b_i}",
                        "arrival_s": start,
                        "input_tokens": r.get("prompt_tokens"),
                        "output_tokens": r.get("output_tokens"),
                        "cached_tokens": r.get("cached_tokens"),
                        "ttft_s": ttft,
                        "e2e_s": e2e,
                        "status": status,
                    }
                )
    info.version = "<= 0.3 schema" if old and old == len(rows) else "current schema"
    check_row_clocks(path, rows, "arrival_s", "the request's start time (epoch s)")
    info.records = write_rows(stage, "requests", part, rows)
    return info

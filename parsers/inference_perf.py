"""inference-perf (kubernetes-sigs/inference-perf, the wg-serving benchmark used with llm-d and GKE) reports.

A run is a folder of JSON reports written by ``inference_perf/reportgen/base.py``:

- ``stage_N_lifecycle_metrics.json`` / ``summary_lifecycle_metrics.json``: the client's ``summarize_requests``
  of one stage of a rate sweep (or the whole run): ``load_summary`` (``requested_rate``, ``achieved_rate`` =
  requests / send duration), ``successes`` (``latency.{request_latency, time_to_first_token,
  time_per_output_token, inter_token_latency, ...}`` distributions in seconds, ``throughput``, ``prompt_len``,
  ``output_len``) and ``failures``;
- ``stage_N_prometheus_metrics.json`` / ``summary_prometheus_metrics.json``: ``summarize_prometheus_metrics``,
  the model server's Prometheus metrics summarised over the stage (request and token rates, queue length,
  server TTFT / TPOT / e2e, KV-cache usage, preemptions, prefix-cache hit share);
- ``per_request_lifecycle_metrics.json`` (``report.request_lifecycle.per_request``): one object per request,
  ``start_time`` / ``end_time`` (``time.perf_counter()`` of the client: an arbitrary origin), ``info``
  (``input_tokens``, ``response_metrics.output_tokens`` and, streamed, ``output_token_times``) and ``error``.

The summaries go to the run metadata (the document's ``client_summary``, one entry per stage); per-request
records go to ``requests``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import clean_statistics, error_line, error_message, load_json, write_rows
from lltrace.source_info import SourceInfo

LIFECYCLE = "inference-perf-lifecycle"
SERVER = "inference-perf-prometheus"
PER_REQUEST = "inference-perf-requests"

_STAGE = re.compile(r"stage_(\d+)_")


def _stage(path: str) -> int | str:
    """The stage a report covers, from its name as reportgen writes it: N, or ``summary`` for the run."""
    m = _STAGE.match(Path(path).name)
    return int(m.group(1)) if m else "summary"


def _opens_report(text: bytes) -> bool:
    """A report's first key, as reportgen writes it (compact, or re-saved with indentation)."""
    return re.match(rb'\{\s*"load_summary"\s*:', text) is not None


def sniff_lifecycle(head: bytes) -> bool:
    """A ``*_lifecycle_metrics.json`` summary: ``load_summary``, ``successes`` with client ``latency``."""
    text = head.lstrip()
    return _opens_report(text) and b'"successes"' in text and b'"latency"' in text


def sniff_server(head: bytes) -> bool:
    """A ``*_prometheus_metrics.json`` summary: ``successes`` with the server's queue and KV figures."""
    text = head.lstrip()
    return (
        _opens_report(text)
        and b'"successes"' in text
        and b'"queue_len"' in text
        and b'"kv_cache_usage_percentage"' in text
    )


def sniff_per_request(head: bytes) -> bool:
    """``per_request_lifecycle_metrics.json``: a list of {start_time, end_time, request, response, info, error}."""
    text = head.lstrip()
    return (
        text.startswith(b"[")
        and b'"start_time"' in text
        and b'"end_time"' in text
        and b'"info"' in text
        and (b'"request_metrics"' in text or b'"input_tokens"' in text)
        and b'"response"' in text
    )


def _object(path: str) -> dict[str, Any]:
    """A report: one object whose ``load_summary``, ``successes`` and ``failures`` are objects (or absent)."""
    data = load_json(path)
    if not isinstance(data, dict):
        raise TraceFormatError(path, "line 1", "expected one JSON object")
    for key in ("load_summary", "successes", "failures"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise TraceFormatError(path, f"key {key!r}", f"expected an object, found {type(data[key]).__name__}")
    for key in ("latency", "throughput", "prompt_len", "output_len"):
        v = (data.get("successes") or {}).get(key)
        if v is not None and not isinstance(v, dict):
            raise TraceFormatError(path, f"key 'successes.{key}'", f"expected an object, found {type(v).__name__}")
    return data


def _report(path: str, fmt: str, side: str, version: str) -> SourceInfo:
    """One stage's (or the run's) report, kept in the metadata as the tool wrote it."""
    info = SourceInfo(path=path, format=fmt, version=version)
    summary = _object(path)
    clean_statistics(path, summary, info, signed=("schedule_delay",))
    info.details["inference_perf"] = {"stage": _stage(path), "side": side, "summary": summary}
    info.records = 1
    return info


def ingest_lifecycle(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """The client's summary of one stage (or of the run)."""
    return _report(path, LIFECYCLE, "client", "summarize_requests report")


def ingest_server(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """The server-side Prometheus summary of one stage (or of the run), kept in the metadata, and its window
    means as one ``engine_stats`` row of source ``stage`` (no time: the report carries none)."""
    info = _report(path, SERVER, "server", "summarize_prometheus_metrics report")
    ok = info.details["inference_perf"]["summary"].get("successes") or {}
    row = {
        "source": "stage",
        "stage": str(_stage(path)),
        "waiting": _mean(ok, "queue_len"),
        "running": _mean(ok, "num_requests_running"),
        "kv_usage": server_kv_usage(ok),
        "prompt_throughput": _num((ok.get("prompt_len") or {}).get("rate")),
        "generation_throughput": _num((ok.get("output_len") or {}).get("rate")),
    }
    write_rows(stage, "engine_stats", part, [row])
    return info


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _mean(successes: dict[str, Any], key: str) -> float | None:
    v = successes.get(key)
    return _num(v.get("mean")) if isinstance(v, dict) else None


def server_kv_usage(successes: dict[str, Any]) -> float | None:
    """A server report's mean KV-cache usage over its window (a fraction: ``avg_over_time`` of vLLM's
    ``kv_cache_usage_perc``), or None where it reads exactly 0 while the server counted requests.

    inference-perf answers 0.0 for a query that failed or matched no series (``execute_query`` in
    ``client/metricsclient/prometheus_client/base.py``) and a server running requests holds KV blocks, so that
    0 is no reading, not an empty cache. Every gauge's 0 is ambiguous the same way; only KV usage can be told.
    """
    return None if kv_unread(successes) else _mean(successes, "kv_cache_usage_percentage")


def kv_unread(successes: dict[str, Any]) -> bool:
    """Whether a server report's KV usage was written as exactly 0 while the server counted requests: no
    reading (``server_kv_usage``)."""
    return _mean(successes, "kv_cache_usage_percentage") == 0 and bool(_num(successes.get("count")))


def _failure(err: Any) -> dict[str, Any]:
    """A failed request's ``error`` (``ErrorResponseInfo``: ``error_type`` is "HTTP Error <status>" for a response
    that was not 200 (from 2026-07, #601; "<status> <reason>" before), else the exception's class; ``error_msg``
    the body, whose message is kept as inference-perf's own report reads it, or the exception's text), as the
    requests' ``error_code`` and ``error``."""
    if not isinstance(err, dict):
        return {"error_code": None, "error": None}
    kind, msg = err.get("error_type"), error_message(err.get("error_msg"))
    status = re.match(r"(?:HTTP Error )?([1-5][0-9]{2})\b", kind) if isinstance(kind, str) else None
    text = ": ".join(str(x) for x in (kind, msg) if x)
    return {"error_code": int(status.group(1)) if status else None, "error": error_line(text)}


def ingest_per_request(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per request: the client's perf_counter send time, e2e (end - start), sizes, TTFT where streamed."""
    info = SourceInfo(path=path, format=PER_REQUEST, version="per_request_lifecycle_metrics")
    data = load_json(path)
    if not isinstance(data, list):
        raise TraceFormatError(path, "line 1", "expected a JSON array of per-request objects")
    rows = []
    name = Path(path).name
    for i, r in enumerate(data):
        if not isinstance(r, dict):
            raise TraceFormatError(path, f"element {i}", "expected an object")
        start, end = _num(r.get("start_time")), _num(r.get("end_time"))
        meta = r.get("info") if isinstance(r.get("info"), dict) else {}
        text = ((meta.get("request_metrics") or {}).get("text") or {}) if isinstance(meta, dict) else {}
        resp = meta.get("response_metrics") if isinstance(meta.get("response_metrics"), dict) else {}
        times = resp.get("output_token_times") or []
        failed = r.get("error") is not None
        first = _num(times[0]) if times else None
        rows.append(
            {
                "client_id": name,
                "client_index": i,
                "client_start_s": start,
                "input_tokens": meta.get("input_tokens", text.get("input_tokens")),
                "output_tokens": None if failed else resp.get("output_tokens"),
                "ttft_s": first - start if first is not None and start is not None and not failed else None,
                "e2e_s": end - start if end is not None and start is not None and not failed else None,
                "status": "error" if failed else "ok",
                **_failure(r.get("error")),
            }
        )
    info.records = write_rows(stage, "requests", part, rows)
    info.details["clock"] = {"origin": "client time.perf_counter() seconds (arbitrary origin)"}
    return info

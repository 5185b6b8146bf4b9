"""TensorRT-LLM: ``trtllm-bench --request_json`` request records, its ``--report_json`` summary and the
per-iteration stats (``--iteration_log``, iteration perf stats). What each file holds: docs/formats.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import (
    check_ids,
    json_objects,
    load_json,
    not_a_figure,
    report_unread_figures,
    stamp_ns,
    write_rows,
)
from lltrace.parsers._lines import read_text
from lltrace.source_info import SourceInfo

TRTLLM_REQUESTS = "trtllm-bench-requests"
TRTLLM_ITERATIONS = "trtllm-iteration-log"
TRTLLM_REPORT = "trtllm-bench-report"


def sniff_trtllm_requests(head: bytes) -> bool:
    """``trtllm-bench --request_json``: a JSON array of RequestRecord dumps (ns timestamps)."""
    text = head.lstrip()
    return text.startswith(b"[") and b'"start_timestamp"' in text and b'"first_token_timestamp"' in text


def ingest_trtllm_requests(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per request: TTFT and e2e from the ns timestamps (monotonic; kept as the client clock)."""
    info = SourceInfo(path=path, format=TRTLLM_REQUESTS, version="RequestRecord list")
    data = load_json(path)
    if not isinstance(data, list):
        raise TraceFormatError(path, "line 1", "expected a JSON array of request records")
    rows = []
    for i, r in enumerate(data):
        where = f"record {i}"
        for key in ("num_input_tokens", "num_output_tokens", "num_generated_tokens", "id"):
            stamp_ns(path, where, r.get(key))
        # -1 is RequestRecord's default: the stamp was never set (statistics.py; its own TTFT is then 0)
        start, first, end = (
            None if (v := stamp_ns(path, where, r.get(k))) == -1 else v
            for k in ("start_timestamp", "first_token_timestamp", "end_timestamp")
        )
        failed = bool(r.get("error_tokens"))
        rows.append(
            {
                "request_id": str(r["id"]) if r.get("id") is not None else None,
                "client_id": Path(path).name,
                "client_index": i,
                "input_tokens": r.get("num_input_tokens"),
                "output_tokens": r.get("num_output_tokens", r.get("num_generated_tokens")),
                "status": "error" if failed else "ok",
                "ttft_s": (first - start) / 1e9 if first is not None and start is not None else None,
                "e2e_s": (end - start) / 1e9 if end is not None and start is not None else None,
                "client_start_s": start / 1e9 if start is not None else None,
            }
        )
    check_ids(path, rows)
    info.records = write_rows(stage, "requests", part, rows)
    info.details["clock"] = {"origin": "trtllm-bench monotonic ns (not aligned to wall clock)"}
    return info


def sniff_trtllm_iterations(head: bytes) -> bool:
    """TensorRT-LLM per-iteration stats (``--iteration_log`` / iteration perf stats): JSON lines or array."""
    return b'"iterLatencyMS"' in head and (b'"numActiveRequests"' in head or b'"kvCacheStats"' in head)


def ingest_trtllm_iterations(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Iterations → ``engine_steps`` (source log) and ``engine_stats`` (queued, active, KV blocks, paused)."""
    info = SourceInfo(path=path, format=TRTLLM_ITERATIONS, version="iteration stats")
    text = read_text(path).strip()
    records = load_json(path) if text.startswith("[") else json_objects(path, info)
    steps, stats = [], []
    for i, r in enumerate(records):
        ifb = r.get("inflightBatchingStats") or {}
        kv = r.get("kvCacheStats") or {}
        n_ctx, n_gen = ifb.get("numContextRequests"), ifb.get("numGenRequests")
        ctx_tokens = ifb.get("numCtxTokens")
        kind = None
        if n_ctx is not None and n_gen is not None:
            kind = "mixed" if n_ctx and n_gen else "prefill" if n_ctx else "decode" if n_gen else "idle"
        ts = r.get("timestamp")
        ts_s = float(ts) if isinstance(ts, (int, float)) else None
        steps.append(
            {
                "part": part,
                "step_id": r.get("iter", i),
                "engine": "0",
                "kind": kind,
                "kind_from": "log counts",
                "prefill_reqs": n_ctx,
                "prefill_tokens": ctx_tokens,
                "decode_reqs": n_gen,
                "decode_tokens": n_gen,  # one token per generation request per iteration (no speculation stats)
                "wall_s": r["iterLatencyMS"] / 1e3 if r.get("iterLatencyMS") is not None else None,
                "end_s": ts_s,
                "start_s": ts_s - r["iterLatencyMS"] / 1e3 if ts_s and r.get("iterLatencyMS") else None,
                "kv_usage": kv["usedNumBlocks"] / kv["maxNumBlocks"] if kv.get("maxNumBlocks") else None,
                "log_stamp": str(ts) if ts is not None and ts_s is None else None,
                "detection": "trtllm iteration log",
                "source": "log",
            }
        )
        # the block manager's cumulative reuse counts, in blocks: tokens are blocks x tokensPerBlock
        per_block = kv.get("tokensPerBlock")
        reused, missed = kv.get("reusedBlocks"), kv.get("missedBlocks")
        counted = per_block is not None and reused is not None and missed is not None
        stats.append(
            {
                "part": part,
                "ts_s": ts_s,
                "engine": "0",
                "source": "log",
                "running": r.get("numActiveRequests"),
                "waiting": r.get("numQueuedRequests"),
                "swapped": ifb.get("numPausedRequests"),
                "kv_usage": kv["usedNumBlocks"] / kv["maxNumBlocks"] if kv.get("maxNumBlocks") else None,
                "prefix_cache_hits_total": float(reused * per_block) if counted else None,
                "prefix_cache_queries_total": float((reused + missed) * per_block) if counted else None,
            }
        )
    for table, rows in (("engine_steps", steps), ("engine_stats", stats)):
        write_rows(stage, table, part, rows)
    info.records = len(records)
    info.details["paused_is_preempted"] = "numPausedRequests (requests paused for KV room) is kept in swapped"
    config, origin = _limits(records)
    if config:
        info.details["engine_config"] = {"engine": "trtllm", **config}
        info.details["engine_config_origin"] = origin
    return info


# setting <- (where in an iteration record, its key); the scheduler's runtime limits and the KV pool
_LIMITS = {
    "max_num_seqs": (None, "maxBatchSizeRuntime"),
    "max_num_batched_tokens": (None, "maxNumTokensRuntime"),
    "kv_blocks": ("kvCacheStats", "maxNumBlocks"),
    "block_size": ("kvCacheStats", "tokensPerBlock"),
}


def _limits(records: list[dict[str, Any]]) -> tuple[dict[str, int], dict[str, str]]:
    """The limits every iteration record states alike (a value the batch tuner changed, or the PyTorch backend's
    0 for "not tracked", states nothing)."""
    config, origin = {}, {}
    for setting, (section, key) in _LIMITS.items():
        seen = {(r.get(section) or {}).get(key) if section else r.get(key) for r in records}
        if len(seen) == 1 and isinstance(value := next(iter(seen)), int) and value > 0:
            config[setting] = value
            origin[setting] = f"TensorRT-LLM iteration stats ({f'{section}.' if section else ''}{key})"
    return config, origin


# -- trtllm-bench --report_json ---------------------------------------------------------------------------------
# ReportUtility.get_statistics_dict (tensorrt_llm/bench/dataclasses/reporting.py @0249976575): the figures read,
# section -> keys. Latencies in ms, rates per second; percentile objects are PercentileStats dumps
# ({p50, p90, p95, p99, minimum, maximum, average}, already in ms; p90 came later: statistics.py @3856265 has none).
_REPORT_FIGURES = {
    "request_info": ("num_requests", "avg_num_concurrent_requests", "avg_input_length", "avg_output_length"),
    "performance": (
        "total_latency_ms",
        "avg_request_latency_ms",
        "request_throughput_req_s",
        "system_output_throughput_tok_s",
        "system_total_throughput_tok_s",
        "request_latency_percentiles_ms",
    ),
    "streaming_metrics": ("avg_ttft_ms", "avg_tpot_ms", "ttft_percentiles", "tpot_percentiles"),
}
_PERCENTILES = ("p50", "p90", "p95", "p99", "minimum", "maximum", "average")
_REPORT_SETTINGS = {
    "engine": ("model", "version", "backend", "dtype", "quantization"),
    "world_info": ("tp_size", "pp_size", "max_batch_size", "max_num_tokens"),
    "machine": ("name",),
}


def sniff_trtllm_report(head: bytes) -> bool:
    """``trtllm-bench --report_json``: one object of sections (engine, world_info, request_info, performance)."""
    text = head.lstrip()
    return (
        text.startswith(b"{")
        and b'"request_info"' in text
        and b'"performance"' in text
        and (b'"world_info"' in text or b'"request_latency_percentiles_ms"' in text)
    )


def ingest_trtllm_report(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """The tool's own figures for its run, kept in the metadata (``client_summary``); no per-request rows (those
    are ``--request_json``'s). A figure that is not a finite non-negative number is left NULL with a warning."""
    info = SourceInfo(path=path, format=TRTLLM_REPORT)
    data = load_json(path)
    if not isinstance(data, dict):
        raise TraceFormatError(path, "line 1", "expected one JSON object")
    bad: list[str] = []
    report: dict[str, Any] = {}
    for section, keys in _REPORT_FIGURES.items():
        got = data.get(section)
        if got is None:
            continue
        if not isinstance(got, dict):
            raise TraceFormatError(path, f"key '{section}'", f"expected an object, found {type(got).__name__}")
        kept: dict[str, Any] = {}
        for key in keys:
            value = got.get(key)
            if isinstance(value, dict):
                kept[key] = {p: _figure(value.get(p), f"{section}.{key}.{p}", bad) for p in _PERCENTILES}
            else:
                kept[key] = _figure(value, f"{section}.{key}", bad)
        report[section] = kept
    report_unread_figures(path, info, bad)
    settings = {
        f"{section}.{key}": value
        for section, keys in _REPORT_SETTINGS.items()
        for key in keys
        if isinstance(data.get(section), dict) and isinstance(value := data[section].get(key), (str, int, float))
    }
    report["settings"] = settings
    info.details["trtllm_report"] = report
    streaming = "streaming_metrics" in report
    latency = (report.get("performance") or {}).get("request_latency_percentiles_ms") or {}
    info.version = (
        f"report_json (TensorRT-LLM {settings.get('engine.version', 'version not stated')}"
        + (f", {settings['engine.backend']} backend" if "engine.backend" in settings else "")
        + ("; streamed: TTFT and TPOT" if streaming else "; not streamed: no TTFT or TPOT")
        + ("" if latency.get("p90") is not None else "; percentiles without p90")
        + ")"
    )
    info.records = 1
    return info


def _figure(value: Any, where: str, bad: list[str]) -> float | int | None:
    """A figure of the report, or None (absent; or not a finite non-negative number: listed in ``bad``)."""
    if value is None:
        return None
    if not_a_figure(value):
        bad.append(f"{where}={value!r}")
        return None
    return value

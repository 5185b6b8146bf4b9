"""TensorRT-LLM: ``trtllm-bench --request_json`` request records and the per-iteration stats
(``--iteration_log``, iteration perf stats). Field facts: docs/SERVING_FORMATS.md §C.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import check_ids, json_objects, load_json, stamp_ns, write_rows
from lltrace.parsers._lines import read_text
from lltrace.tables import SourceInfo

TRTLLM_REQUESTS = "trtllm-bench-requests"
TRTLLM_ITERATIONS = "trtllm-iteration-log"


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
        start, first, end = (
            stamp_ns(path, where, r.get(k)) for k in ("start_timestamp", "first_token_timestamp", "end_timestamp")
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

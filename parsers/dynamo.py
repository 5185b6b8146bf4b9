"""NVIDIA Dynamo's forward-pass metrics trace (``dynamo.fpm.trace.v1``, ``DYN_FPM_TRACE=1``): gzip JSON lines, one
record per forward pass (``full``) or the newest changed one per worker and data-parallel rank every interval
(``sampled``, Dynamo's default: every 5 s), each a ``ForwardPassMetrics`` payload.

Read from Dynamo's reference (``docs/.../fpm-trace`` "Forward Pass Metrics Trace Reference") and source
(``dynamo.common.forward_pass_metrics``, ``dynamo.vllm.instrumented_scheduler``): ``wall_time`` is the iteration,
from ``schedule()`` to ``update_from_output()``, seconds (0 in the idle heartbeat sent when the engine runs dry);
``scheduled_requests`` the step's batch: prefill requests (new ones and those still in their prompt, chunked)
with the prompt tokens computed in the step, decode requests; ``queued_requests`` the waiting queue after
scheduling (a preempted request waits as a decode); ``counter_id`` the publisher's sequence per worker and rank,
whose gaps are passes not recorded (sampling, a full queue, a drop); ``observed_at_unix_ms`` when Dynamo received
the record, just after the step ended.

Into ``engine_steps`` (one row per forward pass: its end at the observation time, its start ``wall_time`` before;
a decode request computes one token: FPM counts requests, not tokens, so the draft tokens a speculative decoder
verifies are not counted) and ``engine_stats`` (per pass: requests scheduled as running, queued as waiting).
A full trace is every step of its engine, as vLLM's iteration log is: the engine's state timeline and the queue
split read it; a sampled one is a sample of steps (its rows say so: ``detection``), read as samples.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import (
    check_ids,
    check_wall_clock,
    duration_ms,
    json_objects,
    not_a_figure,
    whole_count,
    write_rows,
)
from lltrace.source_info import SourceInfo

FPM_TRACE = "dynamo-fpm-trace"
SCHEMA = "dynamo.fpm.trace.v1"
FPM_VERSION = 1
FULL = "dynamo fpm trace"
"""``engine_steps.detection`` of a full trace's steps (every forward pass of the engine)."""
SAMPLED = "dynamo fpm sample"
"""``engine_steps.detection`` of a sampled trace's steps (some forward passes)."""
_COUNTS = ("num_prefill_requests", "sum_prefill_tokens", "num_decode_requests")
_QUEUED = ("num_prefill_requests", "num_decode_requests")


def sniff(head: bytes) -> bool:
    """JSON lines naming the schema (the envelope's ``event.schema``, or a bare record's ``schema``)."""
    return head.lstrip()[:1] == b"{" and f'"{SCHEMA}"'.encode() in head


def _count(path: str, where: str, v: Any) -> int:
    """A payload count; one the producer left out is msgspec's default, 0."""
    return whole_count(path, where, v) or 0


def _record(path: str, n: int, line: dict[str, Any]) -> dict[str, Any] | None:
    """One line's FPM record in lltrace's terms, or None where the line is not this schema's."""
    event = line.get("event", line)
    if not isinstance(event, dict) or event.get("schema") != SCHEMA:
        return None
    fpm = event.get("fpm")
    where = f"record {n}"
    if not isinstance(fpm, dict):
        raise TraceFormatError(path, where, "no fpm object")
    if fpm.get("version", FPM_VERSION) != FPM_VERSION:
        raise TraceFormatError(
            path, where, f"ForwardPassMetrics version {str(fpm.get('version'))[:20]}: lltrace reads 1"
        )
    observed = event.get("observed_at_unix_ms")
    wall = fpm.get("wall_time", 0.0)
    if not_a_figure(observed) or not_a_figure(wall):
        raise TraceFormatError(path, where, "observed_at_unix_ms and wall_time must be non-negative numbers")
    end_s = float(observed) / 1e3
    check_wall_clock(path, where, end_s, "observed_at_unix_ms")
    sched = fpm.get("scheduled_requests") if isinstance(fpm.get("scheduled_requests"), dict) else {}
    queued = fpm.get("queued_requests") if isinstance(fpm.get("queued_requests"), dict) else {}
    rank = _count(path, f"{where} dp_rank", fpm.get("dp_rank"))
    source = event.get("source") if isinstance(event.get("source"), dict) else {}
    return {
        "worker": str(fpm.get("worker_id") or source.get("producer_id") or "")[:200],
        "rank": rank,
        "counter": _count(path, f"{where} counter_id", fpm.get("counter_id")),
        "mode": str(event.get("capture_mode") or "")[:20],
        "end_s": end_s,
        "wall_s": float(wall),
        **{k: _count(path, f"{where} scheduled_requests.{k}", sched.get(k)) for k in _COUNTS},
        **{f"queued_{k}": _count(path, f"{where} queued_requests.{k}", queued.get(k)) for k in _QUEUED},
    }


def ingest(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Each forward pass a step and a sample of the engine's load; idle heartbeats a sample only."""
    info = SourceInfo(path=path, format=FPM_TRACE)
    records = []
    other = 0
    for n, line in enumerate(json_objects(path, info), start=1):
        r = _record(path, n, line)
        if r is None:
            other += 1
        else:
            records.append(r)
    if not records:
        raise TraceFormatError(path, "line 1", f"no {SCHEMA} record")
    if other:
        info.dropped["other_records"] = other
        info.warnings.append(f"{path}: {other} line(s) of another schema than {SCHEMA}: skipped")
    modes = {r["mode"] for r in records}
    full = modes == {"full"}
    workers = {r["worker"] for r in records}

    def engine(r: dict[str, Any]) -> str:
        return str(r["rank"]) if len(workers) == 1 else f"{r['worker']}/{r['rank']}"

    steps, stats = [], []
    for r in sorted(records, key=lambda r: (r["worker"], r["rank"], r["counter"])):
        pf, dc = r["num_prefill_requests"], r["num_decode_requests"]
        stats.append(
            {
                "part": part,
                "ts_s": r["end_s"] - r["wall_s"],  # the queue as it stood once the step was scheduled
                "engine": engine(r),
                "running": pf + dc,
                "waiting": r["queued_num_prefill_requests"] + r["queued_num_decode_requests"],
                "source": "log",
            }
        )
        if r["wall_s"] == 0 and pf == 0 and dc == 0:
            continue  # the idle heartbeat: no forward pass
        steps.append(
            {
                "part": part,
                "step_id": r["counter"],
                "engine": engine(r),
                "kind": "mixed" if pf and dc else "prefill" if pf else "decode" if dc else "idle",
                "kind_from": "log counts",
                "prefill_reqs": pf,
                "prefill_tokens": r["sum_prefill_tokens"],
                "decode_reqs": dc,
                "decode_tokens": dc,
                "wall_s": r["wall_s"],
                "start_s": r["end_s"] - r["wall_s"],
                "end_s": r["end_s"],
                "detection": FULL if full else SAMPLED,
                "source": "log",
            }
        )
    gaps = _gaps(records)
    if gaps and full:
        info.dropped["forward_passes_missing"] = gaps
        info.warnings.append(
            f"{path}: {gaps:,} forward pass(es) missing from a full trace (counter_id gaps: a full queue, a drop, "
            "a restart): the engine's timeline has holes there"
        )
    write_rows(stage, "engine_steps", part, steps)
    write_rows(stage, "engine_stats", part, stats)
    info.records = len(records)
    mode = "full" if full else "sampled" if modes == {"sampled"} else "/".join(sorted(modes)) or "unknown"
    info.version = f"{SCHEMA} ({mode}): {len(steps):,} forward passes of {len(workers)} worker(s)" + (
        "" if full else "; a sample of the steps, not the engine's whole timeline"
    )
    return info


def _gaps(records: list[dict[str, Any]]) -> int:
    """Passes missing between the records of each worker and rank (counter_id steps of more than one)."""
    last: dict[tuple[str, int], int] = {}
    missing = 0
    for r in sorted(records, key=lambda r: (r["worker"], r["rank"], r["counter"])):
        key = (r["worker"], r["rank"])
        if key in last and r["counter"] > last[key] + 1:
            missing += r["counter"] - last[key] - 1
        last[key] = r["counter"]
    return missing


REQUEST_TRACE = "dynamo-request-trace"
REQUEST_SCHEMA = "dynamo.request.trace.v1"
_INT64 = 2**63


def sniff_requests(head: bytes) -> bool:
    """JSON lines naming the request-trace schema (a bare record, or one in a sink's ``event`` envelope)."""
    return head.lstrip()[:1] == b"{" and f'"{REQUEST_SCHEMA}"'.encode() in head


_STATUS = {"error": "error", "cancelled": "cancelled", "canceled": "cancelled", "abort": "cancelled"}
"""A finish reason that is not a completion (OpenAI's are stop, length, tool_calls, content_filter)."""


def _worker(worker: dict[str, Any], side: str) -> str | None:
    wid = worker.get(f"{side}_worker_id")
    if wid is None:
        return None
    rank = worker.get(f"{side}_dp_rank")
    return f"{str(wid)[:60]}" + (f"/{str(rank)[:20]}" if rank is not None else "")


def _hashes(v: Any) -> list[int] | None:
    """Dynamo's sequence hashes (unsigned 64-bit) as the signed 64-bit ids the store keeps (the same bits)."""
    if not isinstance(v, list) or not all(isinstance(h, int) and not isinstance(h, bool) and 0 <= h < 2**64 for h in v):
        return None
    return [h - 2**64 if h >= _INT64 else h for h in v]


def _request_row(path: str, n: int, part: int, req: dict[str, Any]) -> dict[str, Any]:
    """One ``request_end`` record as a request (``RequestTracker``: every time from the frontend's receipt)."""
    where = f"record {n}"
    received = req.get("request_received_ms")
    arrival = None
    if received is not None:
        if not_a_figure(received):
            raise TraceFormatError(path, where, "request_received_ms is not a time in ms")
        arrival = float(received) / 1e3
        check_wall_clock(path, where, arrival, "request_received_ms")
    wait, ttft, total = (
        duration_ms(path, f"{where} {k}", req.get(k)) for k in ("prefill_wait_time_ms", "ttft_ms", "total_time_ms")
    )
    worker = req.get("worker") if isinstance(req.get("worker"), dict) else {}
    replay = req.get("replay") if isinstance(req.get("replay"), dict) else {}
    caller = req.get("x_request_id")
    finish = (req.get("finish_reason_metadata") or {}) if isinstance(req.get("finish_reason_metadata"), dict) else {}

    def at(offset: float | None) -> float | None:
        return arrival + offset if arrival is not None and offset is not None else None

    return {
        "part": part,
        # the caller's id where it sent one (the key a client's records join on), the frontend's beside it
        "request_id": str(caller if caller is not None else req.get("request_id"))[:200],
        "engine_request_id": str(req.get("request_id"))[:200] if caller is not None else None,
        "client_id": Path(path).name,
        "client_index": n - 1,
        "arrival_s": arrival,
        "queued_s": at(wait),  # dispatched to a worker: its engine queue starts (routing and the router's wait before)
        "first_token_s": at(ttft),
        "last_token_s": at(total),
        "finished_s": at(total),
        "input_tokens": whole_count(path, f"{where} input_tokens", req.get("input_tokens", replay.get("input_length"))),
        "output_tokens": whole_count(path, f"{where} output_tokens", req.get("output_tokens")),
        "cached_tokens": whole_count(path, f"{where} cached_tokens", req.get("cached_tokens")),
        "prefix_block_ids": _hashes(replay.get("input_sequence_hashes")),
        "status": _STATUS.get(str(finish.get("finish_reason")), "ok"),
        "server_ttft_s": ttft,
        "server_e2e_s": total,
        "decode_s": total - ttft if total is not None and ttft is not None else None,
        "kv_transfer_s": duration_ms(
            path, f"{where} kv_transfer_estimated_latency_ms", req.get("kv_transfer_estimated_latency_ms")
        ),
        "prefill_worker": _worker(worker, "prefill"),
        "decode_worker": _worker(worker, "decode"),
        "error": "finish_reason error" if finish.get("finish_reason") == "error" else None,
    }


def ingest_requests(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Each ``request_end`` record a request; tool events (an agent harness's) are not requests: counted."""
    info = SourceInfo(path=path, format=REQUEST_TRACE)
    rows, tools, other = [], 0, 0
    for n, line in enumerate(json_objects(path, info), start=1):
        event = line.get("event", line)
        if not isinstance(event, dict) or event.get("schema") != REQUEST_SCHEMA:
            other += 1
        elif event.get("event_type") == "request_end" and isinstance(event.get("request"), dict):
            rows.append(_request_row(path, n, part, event["request"]))
        else:
            tools += 1
    if not rows:
        raise TraceFormatError(path, "line 1", f"no {REQUEST_SCHEMA} request_end record")
    if other:
        info.dropped["other_records"] = other
        info.warnings.append(f"{path}: {other} line(s) of another schema than {REQUEST_SCHEMA}: skipped")
    check_ids(path, rows)
    write_rows(stage, "requests", part, rows)
    info.records = len(rows)
    disagg = sum(r["kv_transfer_s"] is not None for r in rows)
    info.version = (
        f"{REQUEST_SCHEMA}: {len(rows):,} request_end records"
        + (f", {disagg:,} disaggregated (KV transfer timed)" if disagg else "")
        + (f"; {tools:,} tool events (an agent harness's, not requests) not read" if tools else "")
    )
    return info

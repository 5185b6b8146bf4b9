"""``export perfetto``: a run as a Chrome/Perfetto trace (request lanes, engine steps, KV usage counter).

All times are the run clock in microseconds (Chrome trace ``ts``), so a profiler trace of the same run
lines up with its requests. One lane per request (queue, prefill, decode and preempted slices), one lane per
step source, and counter tracks for KV usage, running and waiting requests.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from lltrace.api import Run
from lltrace.errors import AnalysisError
from lltrace.report import resolve
from lltrace.store import Store

_REQUEST_SLICES = (
    ("queue", "queued_s", "scheduled_s"),
    ("prefill", "scheduled_s", "first_token_s"),
    ("decode", "first_token_s", "last_token_s"),
)


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def export_perfetto(
    run: str | os.PathLike[str] | Run,
    output: str | os.PathLike[str],
    *,
    store: Store | str | os.PathLike[str] | None = None,
    max_requests: int = 20_000,
) -> dict[str, int]:
    """Write the trace; returns how many events of each kind were written."""
    st = store if isinstance(store, Store) else Store(store)
    target = run if isinstance(run, Run) else resolve([run], st)
    if not isinstance(target, Run):
        raise AnalysisError(f"{run}: not a stored run (ingest it first, or name its id)")
    con = st.connect([target.id])
    events: list[dict[str, Any]] = []
    counts = {"requests": 0, "steps": 0, "counters": 0}
    lane_ids: list[str] = []
    try:
        views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        if "requests" in views:
            cur = con.execute(
                "SELECT request_id, queued_s, scheduled_s, first_token_s, last_token_s FROM requests "
                f"WHERE first_token_s IS NOT NULL ORDER BY arrival_s LIMIT {int(max_requests)}"
            )
            for lane, (rid, *times) in enumerate(cur.fetchall()):
                lane_ids.append(rid)
                row = dict(zip(("queued_s", "scheduled_s", "first_token_s", "last_token_s"), times, strict=True))
                for name, a, b in _REQUEST_SLICES:
                    if row[a] is not None and row[b] is not None and row[b] >= row[a]:
                        events.append(
                            {
                                "ph": "X",
                                "pid": "requests",
                                "tid": lane,
                                "name": name,
                                "cat": "request",
                                "ts": _us(row[a]),
                                "dur": _us(row[b] - row[a]),
                                "args": {"request_id": rid},
                            }
                        )
                events.append(
                    {"ph": "M", "pid": "requests", "tid": lane, "name": "thread_name", "args": {"name": str(rid)}}
                )
                counts["requests"] += 1
        if "request_events" in views:
            # preempted slices: each preemption until the request is scheduled again
            lanes = {rid: lane for lane, rid in enumerate(lane_ids)}
            pending: dict[str, float] = {}
            for rid, ts, ev in con.execute(
                "SELECT request_id, ts_s, event FROM request_events WHERE event IN ('preempted', 'scheduled') "
                "ORDER BY request_id, ts_s"
            ).fetchall():
                if ev == "preempted":
                    pending[rid] = ts
                elif rid in pending and rid in lanes:
                    start = pending.pop(rid)
                    events.append(
                        {
                            "ph": "X",
                            "pid": "requests",
                            "tid": lanes[rid],
                            "name": "preempted",
                            "cat": "request",
                            "ts": _us(start),
                            "dur": _us(ts - start),
                            "args": {"request_id": rid},
                        }
                    )
        if "engine_steps" in views:
            for source, kind, start, end, p, d in con.execute(
                "SELECT source, kind, start_s, end_s, prefill_tokens, decode_tokens FROM engine_steps "
                "WHERE start_s IS NOT NULL AND end_s IS NOT NULL ORDER BY start_s"
            ).fetchall():
                events.append(
                    {
                        "ph": "X",
                        "pid": "engine",
                        "tid": f"steps ({source})",
                        "name": kind or "step",
                        "cat": "step",
                        "ts": _us(start),
                        "dur": _us(max(end - start, 0)),
                        "args": {"prefill_tokens": p, "decode_tokens": d},
                    }
                )
                counts["steps"] += 1
        if "engine_stats" in views:
            for ts, kv, running, waiting in con.execute(
                "SELECT ts_s, kv_usage, running, waiting FROM engine_stats WHERE ts_s IS NOT NULL ORDER BY ts_s"
            ).fetchall():
                args = {
                    k: v for k, v in (("kv_usage", kv), ("running", running), ("waiting", waiting)) if v is not None
                }
                if args:
                    events.append({"ph": "C", "pid": "engine", "name": "load", "ts": _us(ts), "args": args})
                    counts["counters"] += 1
    finally:
        con.close()
    doc = {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"lltrace_run": target.id, "clock": "run clock (epoch seconds) in microseconds"},
    }
    Path(output).write_text(json.dumps(doc))
    return counts

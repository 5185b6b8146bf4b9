"""A run's rows as a Chrome/Perfetto trace document: one lane per request (queue, prefill, decode and
preempted slices), one lane per step source, and counter tracks for KV usage, running and waiting requests.

All times are the run clock in microseconds (Chrome trace ``ts``), so a profiler trace of the same run lines
up with its requests. It draws what it is given; the rows come from ``lltrace.analysis.export``.
"""

from __future__ import annotations

from typing import Any

Rows = list[dict[str, Any]]

_REQUEST_SLICES = (
    ("queue", "queued_s", "scheduled_s"),
    ("prefill", "scheduled_s", "first_token_s"),
    ("decode", "first_token_s", "last_token_s"),
)


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def _slice(pid: str, tid: Any, name: str, cat: str, start: float, end: float, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "ph": "X",
        "pid": pid,
        "tid": tid,
        "name": name,
        "cat": cat,
        "ts": _us(start),
        "dur": _us(end - start),
        "args": args,
    }


def trace_document(
    run_id: str, requests: Rows, preemptions: Rows, steps: Rows, load: Rows
) -> tuple[dict[str, Any], dict[str, int]]:
    """The trace (``traceEvents``) and how many request lanes, steps and counter samples it holds."""
    events: list[dict[str, Any]] = []
    lanes: dict[str, int] = {}
    for lane, r in enumerate(requests):
        rid = r["request_id"]
        lanes[rid] = lane
        for name, a, b in _REQUEST_SLICES:
            if r[a] is not None and r[b] is not None and r[b] >= r[a]:
                events.append(_slice("requests", lane, name, "request", r[a], r[b], {"request_id": rid}))
        events.append({"ph": "M", "pid": "requests", "tid": lane, "name": "thread_name", "args": {"name": str(rid)}})
    for p in preemptions:
        if p["request_id"] in lanes:
            lane = lanes[p["request_id"]]
            events.append(
                _slice(
                    "requests",
                    lane,
                    "preempted",
                    "request",
                    p["preempted_at_s"],
                    p["resumed_at_s"],
                    {"request_id": p["request_id"]},
                )
            )
    for s in steps:
        events.append(
            _slice(
                "engine",
                f"steps ({s['source']})",
                s["kind"] or "step",
                "step",
                s["start_s"],
                max(s["end_s"], s["start_s"]),
                {"prefill_tokens": s["prefill_tokens"], "decode_tokens": s["decode_tokens"]},
            )
        )
    counters = 0
    for sample in load:
        args = {k: sample[k] for k in ("kv_usage", "running", "waiting") if sample[k] is not None}
        if args:
            events.append({"ph": "C", "pid": "engine", "name": "load", "ts": _us(sample["ts_s"]), "args": args})
            counters += 1
    doc = {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"lltrace_run": run_id, "clock": "run clock (epoch seconds) in microseconds"},
    }
    return doc, {"requests": len(requests), "steps": len(steps), "counters": counters}

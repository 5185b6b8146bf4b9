"""A joined run's request events: each request's state changes (the engine's journey events where its spans carry
them, else the span's own timeline) and the time each preempted request spent preempted."""

from __future__ import annotations

import json
from typing import Any

import duckdb

from lltrace.arrow_rows import table_from_rows
from lltrace.queries import install_views
from lltrace.tables import REQUEST_EVENTS


def request_events_of(spans_by_id: dict[str, dict], requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """State changes per request: the engine's journey events where the spans carry them (measured), else
    the span's timeline (derived: queued, scheduled, first_token, finished)."""
    events: list[dict[str, Any]] = []
    for r in requests:
        s = spans_by_id.get(r["request_id"])
        if s is None:
            continue
        journey = json.loads(s["journey"]) if s.get("journey") else []
        if journey:
            rid = r["request_id"]
            events.extend(
                {"request_id": rid, "ts_s": t_ns / 1e9, "event": name, "tokens": None, "basis": "measured"}
                for name, t_ns in journey
            )
            continue
        for name, col in (
            ("queued", "queued_s"),
            ("scheduled", "scheduled_s"),
            ("first_token", "first_token_s"),
            ("finished", "finished_s"),
        ):
            if r.get(col) is not None:
                events.append(
                    {
                        "request_id": r["request_id"],
                        "ts_s": r[col],
                        "event": name,
                        "tokens": r["output_tokens"] if name == "finished" else None,
                        "basis": "derived",
                    }
                )
    return events


def preempted_times(events: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per request with a preemption: time preempted until rescheduled, and the part before its first token,
    summed over the ``request_preemptions`` view (the one pairing of the two) over these events."""
    if not any(e["event"] == "preempted" for e in events):
        return {}
    con = duckdb.connect()
    try:
        con.register("_events", table_from_rows(events, REQUEST_EVENTS))
        con.execute("CREATE VIEW request_events AS SELECT *, 'staged' AS run_id FROM _events")
        install_views(con, ["request_preemptions"])
        rows = con.execute(
            "SELECT request_id, sum(coalesce(duration_s, 0)), "
            "coalesce(sum(duration_s) FILTER (WHERE before_first_token), 0) FROM request_preemptions GROUP BY 1"
        ).fetchall()
    finally:
        con.close()
    return {rid: {"preempted_s": total, "preempted_in_prefill_s": first} for rid, total, first in rows}

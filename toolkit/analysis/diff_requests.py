"""What one run has that the other lacks, and where in time the incident run left the baseline's level (``lltrace
diff``'s ``only_in_incident``, ``only_in_baseline`` and ``windows``; docs/incidents.md).

Clients are matched by name (the bench file or client id as the store keeps it, its folder left out: two runs'
``chat.json`` are one client). A client one side lacks is one entry (its requests, its commonest size class, its
arrival rate); a size class (prompt tokens rounded down to a power of two) that a shared client sends on one side
only, with at least a quarter of ``incident_window_requests`` requests, is another. The windows are the incident
run's incidents judged against twice the baseline's typical level (``--baseline``'s rule), or, where that finds the
incident run above it throughout (a slower host, a heavier mix), against its own level.
"""

from __future__ import annotations

import math
from pathlib import PurePath
from statistics import median
from typing import Any

import duckdb

from lltrace.analysis.incidents import incidents_section, typical_levels
from lltrace.analysis.sql import rows
from lltrace.queries import thresholds
from lltrace.store import Store


def _name(client: str | None) -> str | None:
    return None if client is None else PurePath(client).name


def _requests(con: duckdb.DuckDBPyConnection, window: list[float | None] | None) -> list[dict[str, Any]]:
    lo, hi = window or (None, None)
    return rows(
        con,
        "SELECT client_id, size_class, input_tokens, t_s, arrival_s FROM incident_arrivals "
        "WHERE ($1 IS NULL OR arrival_s >= $1) AND ($2 IS NULL OR arrival_s < $2)",
        [lo, hi],
    )


def _entry(client: str | None, group: list[dict[str, Any]]) -> dict[str, Any]:
    times = [r["t_s"] for r in group]
    span = max(times) - min(times)
    sizes = [r["size_class"] for r in group if r["size_class"] is not None]
    prompts = [r["input_tokens"] for r in group if r["input_tokens"] is not None]
    return {
        "client": client,
        "size_class": max(set(sizes), key=sizes.count) if sizes else None,
        "requests": len(group),
        "arrival_rate": (len(group) - 1) / span if len(group) > 1 and span > 0 else None,
        "prompt_tokens_p50": median(prompts) if prompts else None,
    }


def only_in(mine: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Requests of ``mine`` whose client ``theirs`` lacks (one entry a client), then those of a shared client in a
    size class ``theirs`` lacks for it; most requests first."""
    least = math.ceil(thresholds()["incident_window_requests"] / 4)
    their_clients = {_name(r["client_id"]) for r in theirs}
    their_sizes = {(_name(r["client_id"]), r["size_class"]) for r in theirs}
    by_client: dict[str | None, list[dict[str, Any]]] = {}
    for r in mine:
        by_client.setdefault(_name(r["client_id"]), []).append(r)
    out = [_entry(c, g) for c, g in by_client.items() if c not in their_clients]
    for c, g in by_client.items():
        if c not in their_clients:
            continue
        by_size: dict[int | None, list[dict[str, Any]]] = {}
        for r in g:
            if r["size_class"] is not None and (c, r["size_class"]) not in their_sizes:
                by_size.setdefault(r["size_class"], []).append(r)
        out += [_entry(c, sg) for sg in by_size.values() if len(sg) >= least]
    return sorted(out, key=lambda e: (-e["requests"], str(e["client"])))


def request_differences(st: Store, sides: dict[str, dict[str, Any]], engine: str | None) -> dict[str, Any]:
    """``only_in_incident``, ``only_in_baseline`` and ``windows`` of two sides (``{"baseline": {"run", "window"},
    "incident": ...}``), where both have requests (empty lists otherwise)."""
    got: dict[str, list[dict[str, Any]]] = {}
    levels: dict[str, float] = {}
    found: list[dict[str, Any]] = []
    judged_by = "baseline"
    whole = not (sides["baseline"]["window"] or sides["incident"]["window"])
    for side in ("baseline", "incident"):
        con = st.connect([sides[side]["run"]])
        try:
            got[side] = _requests(con, sides[side]["window"])
            if whole and side == "baseline":
                levels = typical_levels(con)
            elif whole and levels and got["baseline"] and got[side]:
                tl, found = incidents_section(con, engine, None, levels)
                if tl is not None and tl["degraded_throughout"]:
                    # above twice the baseline's level throughout (a slower host, a heavier mix): where it left its
                    # own level is where the two differ in time
                    found, judged_by = incidents_section(con, engine)[1], "run"
        finally:
            con.close()
    out: dict[str, Any] = {"only_in_incident": [], "only_in_baseline": [], "windows": []}
    if not (got["baseline"] and got["incident"]):
        return out
    out["only_in_incident"] = only_in(got["incident"], got["baseline"])
    out["only_in_baseline"] = only_in(got["baseline"], got["incident"])
    out["windows"] = [
        {
            "start_s": f["start_s"],
            "end_s": f["end_s"],
            "metric": f["metric"],
            "baseline": levels.get(f["metric"]),
            "incident": f["worst"],
            "threshold_from": judged_by,
        }
        for f in sorted(found, key=lambda f: f["start_s"])
    ]
    return out


def verdict_lead(diffs: dict[str, Any]) -> str:
    """The diff verdict's first words: what the incident run had that the baseline lacked, and where they differ."""
    said = []
    for e in diffs["only_in_incident"][:3]:
        size = f", prompts {e['size_class']:,}-{2 * e['size_class'] - 1:,} tokens" if e["size_class"] else ""
        rate = f", {e['arrival_rate']:.3g}/s" if e["arrival_rate"] else ""
        said.append(f"client {e['client']} ({e['requests']:,} requests{size}{rate})")
    lead = f"The incident run had requests the baseline lacked: {'; '.join(said)}" if said else ""
    if diffs["windows"]:
        w = diffs["windows"][0]
        level = "the baseline's level" if w["threshold_from"] == "baseline" else "its own level"
        where = (
            f"its latency left {level} from {w['start_s']:.0f} s to {w['end_s']:.0f} s "
            f"({w['metric']} p90 {w['incident']:.3g} s against the baseline's typical {w['baseline']:.3g} s)"
        )
        lead = f"{lead}; {where}" if lead else where[0].upper() + where[1:]
    return lead + ". " if lead else ""

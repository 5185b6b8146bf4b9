"""The ``attribution`` section of the analysis document: where the attributed requests' time went
(``attribution_run``), the parts of their queueing (``lltrace.analysis.queue``), the decode time other requests'
prefill took from them (``interference_run``), per client (``attribution_client``) and for the slowest tenth
(``attribution_tail``)."""

from __future__ import annotations

from typing import Any

import duckdb

from lltrace.analysis.queue import queue_split
from lltrace.analysis.sql import clean, rows
from lltrace.analysis.tail import E2E_PARTS, tail_section
from lltrace.documents.vocabulary import Basis, Component

INTERFERENCE_METHOD = (
    "mixed-step time minus a decode-only fit of step time on decode tokens, charged by time overlap "
    "(see queries/interference_*.sql)"
)


def attribution_section(con: duckdb.DuckDBPyConnection, a: dict[str, Any], steps: bool) -> dict[str, Any]:
    """The section from the run's ``attribution_run`` row ``a`` (its requests attributed); ``steps``: whether the
    run has engine steps (the interference needs them)."""
    out = _components(a) | queue_split(con, a["queue_s"])
    by_client = rows(con, "SELECT * EXCLUDE (run_id) FROM attribution_client ORDER BY first_arrival_s, client_id")
    out["by_client"] = by_client if len(by_client) > 1 else None
    basis = {p: out[p]["basis"] for p in E2E_PARTS}
    out["tail"] = tail_section(rows(con, "SELECT * EXCLUDE (run_id) FROM attribution_tail"), basis)
    if steps:
        out["interference"] = _interference(con, a["decode_s"]) or out["interference"]
    return out


def _components(a: dict[str, Any]) -> dict[str, Any]:
    """The additive components with their shares and bases, and the run's rates."""
    basis = {
        Component.OVERHEAD: Basis.DERIVED,
        Component.PREEMPTED: Basis.MEASURED if a["preempted_s"] else Basis.DERIVED,
        Component.QUEUE: a["queue_basis"],
        Component.PREFILL: a["prefill_basis"],
        Component.DECODE: a["decode_basis"],
    }
    out: dict[str, Any] = {c: {"total_s": a[f"{c}_s"], "share": a[f"{c}_share"], "basis": basis[c]} for c in E2E_PARTS}
    if not a["preempted_s"]:
        out[Component.PREEMPTED]["note"] = "no source timed preemptions: preempted time stays inside prefill/decode"
    out["interference"] = {"total_s": None, "share_of_parent": None, "basis": None}
    out["requests"] = a["requests"]
    out["requests_incomplete"] = a["requests_incomplete"]
    out["clock_errors"] = a["clock_errors"]
    out["e2e_s_total"] = a["e2e_s"]
    out["prefill_tokens_per_s"] = a["prefill_tokens_per_s"]
    out["prefill_cached_tokens"] = a["prefill_cached_tokens"]
    out["prefill_computed_tokens_per_s"] = a["prefill_computed_tokens_per_s"]
    out["decode_s_per_token"] = a["decode_s_per_token"]
    return out


def _interference(con: duckdb.DuckDBPyConnection, decode_s: float | None) -> dict[str, Any] | None:
    """The decode time lost to other requests' prefill in shared steps (estimated), where the run has mixed
    steps."""
    found = (rows(con, "SELECT * EXCLUDE (run_id) FROM interference_run") or [None])[0]
    if not found or not found["mixed_steps"]:
        return None
    suffered = found["suffered_s"]
    return {
        "total_s": clean(suffered),
        "share_of_parent": clean(suffered / decode_s) if suffered and decode_s else None,
        "basis": Basis.ESTIMATED,
        "caused_total_s": clean(found["caused_s"]),
        "mixed_steps": found["mixed_steps"],
        "method": INTERFERENCE_METHOD,
    }

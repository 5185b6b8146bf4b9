"""Why requests waited: the queue split of the analysis document (docs/latency-model.md: the parts of queue),
from ``attribution_queue_causes`` over ``engine_state``, with the evidence each part rests on.

Each part is the queue time of the attributed requests spent while the engine was out of that resource; a part
the run's sources cannot tell is null with a note saying what is missing, never a guess. The rest of the queue
is load: waiting behind other work with none of the limits binding.
"""

from __future__ import annotations

from typing import Any

import duckdb

from lltrace.analysis.sql import clean, rows
from lltrace.documents.vocabulary import LIMIT_PARTS

PARTS = tuple(p.value for p in LIMIT_PARTS)
_CAUSE = {"kv_wait": "kv", "slot_wait": "slot", "budget_wait": "budget"}
_LIMIT = {"slot_wait": "max_num_seqs", "budget_wait": "max_num_batched_tokens"}
_RULE = {
    "kv_wait": "the free KV tokens could not hold the blocks the queue head needed next (its prompt, capped by the "
    "step's budget with chunked prefill), or KV usage near full where the cache's size is unknown, or requests "
    "swapped out or paused for room",
    "slot_wait": "every sequence slot was taken (scheduled or running requests at max_num_seqs) with KV room to spare",
    "budget_wait": "the step used the whole token budget (max_num_batched_tokens) with a slot and KV room to spare",
}
_DRAFTING_BUDGET = (
    "; the step's tokens include each decoding request's draft tokens and, where draft_slots says so, the tokens "
    "the scheduler charged each scheduled request for its drafter's input"
)
_MISSING = {
    "kv_wait": "no KV usage, swap or preemption readings in the run's sources",
    "slot_wait": "no running or scheduled request counts in the run's sources",
    "budget_wait": "no per-step token counts (vLLM logs them with --enable-logging-iteration-details; TensorRT-LLM "
    "in its iteration stats)",
}
_UNKNOWN_LIMIT = "{limit} is not known (not in the sources; no documented engine default for its version and device)"


def _missing(part: str, limits: dict[str, Any]) -> str:
    """Why a part cannot be told: its limit unknown (or only inferred), else no state to hold it against."""
    limit = _LIMIT.get(part)
    if limit and (limit not in limits or limits[limit]["basis"] == "inferred"):
        return _UNKNOWN_LIMIT.format(limit=limit)
    return _MISSING[part]


def _limits(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    found = rows(con, "SELECT setting, value, basis, origin FROM engine_config")
    return {r.pop("setting"): r for r in found}


def queue_split(con: duckdb.DuckDBPyConnection, queue_total_s: float | None) -> dict[str, dict[str, Any]]:
    """The parts of queue (kv_wait, slot_wait, budget_wait, load_wait) over the attributed requests
    (``attribution_queue_split``), each with ``total_s``, ``share_of_parent`` (of the queue time), ``basis`` and
    ``evidence`` (or a ``note``)."""
    split = (rows(con, "SELECT * EXCLUDE (run_id) FROM attribution_queue_split") or [{}])[0]
    timed = split.get("requests_split") or 0
    by_cause = con.execute("SELECT cause, segments, basis FROM engine_state_causes").fetchall()
    counts = {cause: n for cause, n, _ in by_cause if cause is not None}
    basis = (next((b for _, _, b in by_cause if b), None), sum(n for _, n, _ in by_cause))
    limits = _limits(con)
    out: dict[str, dict[str, Any]] = {}
    for part in PARTS:
        total = clean(split.get(f"{part}_s"))
        if total is None or not timed:
            out[part] = {
                "total_s": None,
                "share_of_parent": None,
                "basis": None,
                "note": f"no source to tell: {_missing(part, limits)}"
                if timed
                else "no request with engine queue times",
            }
            continue
        out[part] = {
            "total_s": total,
            "share_of_parent": total / queue_total_s if queue_total_s else None,
            "basis": "derived",
            "evidence": _evidence(part, basis, counts.get(_CAUSE[part], 0), limits),
        }
    out["load_wait"] = _load(
        out, queue_total_s, timed, clean(split.get("unplaced_s")), clean(split.get("mixed_wait_s"))
    )
    return out


def _evidence(part: str, basis: tuple[str | None, int], segments: int, limits: dict[str, Any]) -> dict[str, Any]:
    """What a part rests on: its rule, the timeline it was read from, the segments it held, the limit's setting."""
    evidence: dict[str, Any] = {
        "rule": _RULE[part],
        "timeline": "the engine's iteration log" if basis[0] == "steps" else "the engine's metrics samples",
        "segments": segments,
        "of_segments": basis[1],
    }
    if part in _LIMIT and _LIMIT[part] in limits:
        evidence[_LIMIT[part]] = limits[_LIMIT[part]]
    if part == "budget_wait" and (limits.get("speculative_tokens") or {}).get("value"):
        # a drafting engine's steps count each decode's draft tokens, and (vLLM 0.32) its drafter's input slots
        evidence["rule"] += _DRAFTING_BUDGET
        evidence |= {k: limits[k] for k in ("speculative_tokens", "draft_slots") if k in limits}
    if part == "kv_wait" and "kv_cache_tokens" in limits:
        evidence["kv_cache_tokens"] = limits["kv_cache_tokens"]
    return evidence


def _load(
    out: dict[str, dict[str, Any]], queue_total_s: float | None, timed: int, unsplit: float | None, mixed: float | None
) -> dict[str, Any]:
    """Load, the rest of the queue: the split requests' time with no limit binding, plus the queue time of requests
    the engine's state cannot place (no measured queue interval: an estimated queue, no engine span)."""
    if queue_total_s is None or not timed:  # no request's queue placed on the engine's state: nothing to tell
        total = None
    else:
        total = max(0.0, queue_total_s - sum(out[p]["total_s"] or 0.0 for p in PARTS))
    note = "queue time with none of the limits binding: waiting behind other work"
    if not timed:
        note = "no request with engine queue times: the queue is not split (the engine's own record of its waiting "
        note += "requests, engine_queue_causes, says what it waited for where the run has one)"
    if timed and not all(out[p]["total_s"] is not None for p in PARTS):
        note += ", and the parts no source can tell"
    if unsplit:
        note += f"; {unsplit:,.3f} s of it is the queue of requests with no engine queue interval to place"
    if mixed:  # several engines' timelines (data parallel, replicas) that differed
        note += f"; {mixed:,.3f} s of it while the engines' states differed (no source says which held the request)"
    return {
        "total_s": total,
        "share_of_parent": total / queue_total_s if total is not None and queue_total_s else None,
        "basis": "derived" if total is not None else None,
        "note": note,
        "evidence": {"requests_split": timed, "unplaced_s": unsplit}
        | ({} if mixed is None else {"engines_differed_s": mixed}),
    }

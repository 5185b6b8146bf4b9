"""Each request once: the engine's request records are unique by request id before any join.

A request span exported twice (the same span id and times: a collector's file appended to) is dropped and
counted; a request span without an id is known by its span id; two different spans under one request id
are the one-line error, never one request made of two (which would halve a run's request count).
"""

from __future__ import annotations

import warnings
from typing import Any

from lltrace.errors import InputWarning, TraceFormatError


def unique_spans(spans: list[dict[str, Any]], sources: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Each request once: a span exported twice (same span id and times: a collector file appended to) is
    dropped and counted; a request span without an id is known by its span id (warned); two different spans
    with one request id are the one-line error, never one request made of two."""
    paths = {src["part"]: src["path"] for src in sources}
    seen: dict[str, dict[str, Any]] = {}
    out, duplicates, unnamed = [], 0, 0
    for s in spans:
        if not s.get("request_id"):
            unnamed += 1
            s = s | {"request_id": f"span:{s.get('span_id')}"}
        prior = seen.get(s["request_id"])
        if prior is not None:
            same = all(prior.get(k) == s.get(k) for k in ("span_id", "start_ns", "end_ns"))
            if same:
                duplicates += 1
                continue
            where = paths.get(s.get("part"), "the engine's spans")
            raise TraceFormatError(
                where,
                f"span {s.get('span_id')}",
                f"request id {s['request_id']!r} is also the id of span {prior.get('span_id')}: "
                "request ids must be unique (two requests cannot be one)",
            )
        seen[s["request_id"]] = s
        out.append(s)
    where = next((paths[p] for p in sorted({s.get("part") for s in spans} - {None}) if p in paths), "spans")
    if duplicates:
        why = f"{where}: {duplicates} request spans exported twice (same span id and times): kept once"
        warnings.warn(why, InputWarning, stacklevel=2)
    if unnamed:
        why = f"{where}: {unnamed} request spans without a request id: known by their span ids"
        warnings.warn(why, InputWarning, stacklevel=2)
    return out, duplicates

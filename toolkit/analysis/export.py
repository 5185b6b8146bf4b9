"""``export perfetto``: a run as a Chrome/Perfetto trace: its requests' lanes, engine steps and load counters
read from the views, drawn as trace events by ``lltrace.reports.perfetto``."""

from __future__ import annotations

import json
import os
from pathlib import Path

from lltrace.analysis.sql import rows
from lltrace.ingest.targets import Target, as_store, open_run
from lltrace.store import Store


def export_perfetto(
    run: Target,
    output: str | os.PathLike[str],
    *,
    store: Store | str | os.PathLike[str] | None = None,
    max_requests: int = 20_000,
) -> dict[str, int]:
    """Write the run's trace to ``output``; returns how many request lanes, steps and counter samples it has.

    The first ``max_requests`` requests by arrival get a lane each (queue, prefill, decode slices and the
    ``request_preemptions`` intervals); all times are the run clock.
    """
    from lltrace.reports.perfetto import trace_document

    st = as_store(store)
    target = open_run(run, st)
    con = st.connect([target.id])
    try:
        requests = rows(
            con,
            "SELECT request_id, queued_s, scheduled_s, first_token_s, last_token_s FROM requests "
            "WHERE first_token_s IS NOT NULL ORDER BY arrival_s LIMIT ?",
            [int(max_requests)],
        )
        preemptions = rows(
            con,
            "SELECT request_id, preempted_at_s, resumed_at_s FROM request_preemptions "
            "WHERE resumed_at_s IS NOT NULL ORDER BY request_id, preempted_at_s",
        )
        steps = rows(
            con,
            "SELECT source, kind, start_s, end_s, prefill_tokens, decode_tokens FROM engine_steps "
            "WHERE start_s IS NOT NULL AND end_s IS NOT NULL ORDER BY start_s",
        )
        load = rows(
            con, "SELECT ts_s, kv_usage, running, waiting FROM engine_stats WHERE ts_s IS NOT NULL ORDER BY ts_s"
        )
    finally:
        con.close()
    doc, counts = trace_document(target.id, requests, preemptions, steps, load)
    Path(output).write_text(json.dumps(doc))
    return counts

"""A server log's request lines into ``requests``, without counting a request twice.

vLLM logs each request it receives, adds, finishes (V0) or aborts when request logging is on (the default before
0.10). Where the run has no other record of its requests, the log's are its requests: arrivals, requested sizes,
the outcome. Where the engine's spans hold the requests, a span is the better record of the same request (its
times to the microsecond, its latencies measured): the log adds only the requests no span holds that it says
were aborted (vLLM exports no span for an aborted request). Where a client's records are the run's requests and
no span is there, the log's are not added (its ids cannot be told from the client's without a span between
them); what they say is reported. An end-to-end time is taken from two stamps only where both print the moment to
the millisecond or better (a collector's, a dated config's): vLLM's own stamps are to the second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from lltrace.arrow_rows import table_from_rows
from lltrace.ingest.join import staged_rows
from lltrace.tables import REQUESTS

LOG_CLIENT = "server log"
"""``requests.client_id`` of the rows a server log's request lines give."""
STAMP_RESOLUTION_S = 1.0
"""How finely vLLM's own line stamps write the moment (``%m-%d %H:%M:%S``: whole seconds)."""


def _request_row(r: dict[str, Any]) -> dict[str, Any]:
    arrival, end = r.get("arrival_s"), r.get("end_s")
    finished = r.get("outcome") == "finished"  # an aborted request's time to its abort is no latency
    e2e = end - arrival if finished and r.get("exact") and arrival is not None and end is not None else None
    return {
        "request_id": r["request_id"],
        "engine_request_id": r.get("engine_request_id"),
        "client_id": LOG_CLIENT,
        "arrival_s": arrival,
        "finished_s": end if finished else None,
        "input_tokens": r.get("input_tokens"),
        "status": r.get("outcome"),
        "server_e2e_s": e2e,
        "arrival_resolution_s": None if r.get("arrival_exact") else STAMP_RESOLUTION_S,
    }


def add_log_requests(stage: Path) -> dict[str, Any] | None:
    """Add the staged ``_log_requests`` rows (placed on the run clock by ``clocks.place_log_times``) to
    ``stage/requests`` as the module says; returns what was done (run metadata ``log_requests``), or None where
    no log listed requests."""
    logged = staged_rows(stage / "_log_requests")
    if not logged:
        return None
    parts = sorted((stage / "requests").glob("*.parquet"))
    known: set[str] = set()
    for f in parts:
        names = [c for c in ("request_id", "engine_request_id") if c in pq.read_schema(f).names]
        for column in pq.read_table(f, columns=names).columns:
            known.update(x for x in column.to_pylist() if x is not None)
    spans = bool(staged_rows(stage / "_spans"))
    aborted = [r for r in logged if r.get("outcome") == "aborted"]
    report: dict[str, Any] = {
        "requests": len(logged),
        "aborted": len(aborted),
        "finished": sum(r.get("outcome") == "finished" for r in logged),
        "exact_times": all(r.get("exact") for r in logged),
    }
    if not parts:
        add = logged
        report["used"] = "the run's requests: no other source lists them"
    elif spans:
        add = [r for r in aborted if r["request_id"] not in known and r.get("engine_request_id") not in known]
        seen = sum(r["request_id"] in known or r.get("engine_request_id") in known for r in logged)
        report["used"] = (
            "aborted requests no span holds (vLLM exports no span for an aborted request); the rest are the spans' "
            "requests"
        )
        report["in_spans"] = seen
        report["in_neither"] = len(logged) - seen - len(add)
    else:
        add = []
        report["used"] = "not added: the run's requests are a client's, and no span ties the log's ids to them"
    report["added"] = len(add)
    if add:
        rows = [_request_row(r) for r in add]
        (stage / "requests").mkdir(exist_ok=True)
        table = table_from_rows(rows, REQUESTS).sort_by([("arrival_s", "ascending")])
        pq.write_table(table, stage / "requests" / "part-log.parquet", compression="zstd")
    return report

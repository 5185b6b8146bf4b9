"""The ``requests`` section of the analysis document: how many requests the run holds, which its figures count,
their latency percentiles (``requests_summary``), and the ones left out by outcome with their causes as the sources
state them (``requests_outcomes``, ``requests_errors``)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import duckdb

from lltrace.analysis.sql import clean, rows
from lltrace.documents.vocabulary import Outcome

EXCLUDED_WHY: dict[Outcome, str] = {
    Outcome.FAILED: "the request failed (an error status: HTTP error, rejected, aborted)",
    Outcome.CANCELLED: "the client cancelled it before it finished",
    Outcome.ABORTED: "the engine aborted it before it finished (vLLM aborts a request whose client disconnected: a "
    "client timeout or a closed stream)",
    Outcome.INCOMPLETE: "it had not finished when its record ends (the benchmark stopped; a server log ends, or the "
    "server failed, before it finished)",
    Outcome.WARMUP: "it belongs to the benchmark's warm-up, which the tool's own statistics leave out",
    Outcome.COOLDOWN: "it belongs to the benchmark's cool-down, which the tool's own statistics leave out",
    Outcome.UNJOINED: "a client's record that no engine record joined and no send time places, in a run whose engine "
    "records include some no client record joined: it may be one of them, and no request is counted twice",
}
"""Why a request outside requests_latency.counted is left out of the run's figures, by outcome."""


MAX_CAUSES = 5
"""The most causes listed for one outcome (the commonest; the rest counted in ``other_causes``)."""


def cause_label(code: int | None, text: str | None) -> str:
    """One cause of failure as people name it: an HTTP status with its standard phrase (``HTTP 429 Too Many
    Requests``), a client's own code (``code -100``), else the source's error text."""
    if code is not None and 100 <= code <= 599:
        try:
            return f"HTTP {code} {HTTPStatus(code).phrase}"
        except ValueError:  # a status no standard names (nginx's 499, a server's own)
            return f"HTTP {code}"
    if code is not None:
        return f"code {code}"
    return text or "no cause given"


def _causes(groups: list[dict[str, Any]], requests: int) -> dict[str, Any]:
    """An outcome's causes as its sources state them (``requests_errors``), commonest first: what each was, how
    many requests, and when they arrived; the requests in causes past ``MAX_CAUSES`` and those no source gave a
    cause for, counted."""
    listed = [
        {"cause": cause_label(g["error_code"], g["error"]), **{k: clean(v) for k, v in g.items() if k != "outcome"}}
        for g in groups[:MAX_CAUSES]
    ]
    return {
        "causes": listed,
        "other_causes": sum(g["requests"] for g in groups[MAX_CAUSES:]),
        "no_cause_given": requests - sum(g["requests"] for g in groups),
    }


def requests_section(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The section, or None where the run holds no requests."""
    found = rows(con, "SELECT * EXCLUDE (run_id) FROM requests_summary")
    if not found:
        return None
    r = found[0]

    def dist(prefix: str) -> dict[str, Any] | None:
        d = {k: r[f"{prefix}_{k}"] for k in ("p50", "p90", "p99", "mean")}
        return None if all(v is None for v in d.values()) else d

    by_outcome = con.execute(
        "SELECT outcome, requests FROM requests_outcomes ORDER BY requests DESC, outcome"
    ).fetchall()
    causes = rows(
        con,
        "SELECT * EXCLUDE (run_id) FROM requests_errors ORDER BY outcome, requests DESC, error_code, error",
    )
    return {
        "count": r["requests"],
        "errors": r["errors"],
        "counted": r["counted"],
        "excluded": [
            {
                "outcome": o,
                "requests": n,
                "why": EXCLUDED_WHY[o],
                **_causes([c for c in causes if c["outcome"] == o], n),
            }
            for o, n in by_outcome
        ],
        "basis": r["basis"],
        "ttft_s": dist("ttft"),
        "tpot_s": dist("tpot"),
        "e2e_s": dist("e2e"),
        "queue_s": dist("queue"),
    }

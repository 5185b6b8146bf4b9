"""The engine's own figures window by window (``engine_windows`` and ``engine_histogram_windows``), one
definition for ``weekly`` and ``analyze``'s timeline of an engine-only run, and the window width a span gets."""

from __future__ import annotations

from typing import Any

# nice window widths, seconds: the timeline takes the smallest that cuts the span into at most TIMELINE_WINDOWS
NICE_WIDTHS = (10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
TIMELINE_WINDOWS = 24


def timeline_width(span_s: float, step_s: float | None) -> float:
    """The smallest nice width that cuts ``span_s`` into at most TIMELINE_WINDOWS windows, and holds at least
    two samples ``step_s`` apart (a window of one sample has no change of its own)."""
    need = max(span_s / TIMELINE_WINDOWS, 2 * (step_s or 0))
    return float(next((w for w in NICE_WIDTHS if w >= need), NICE_WIDTHS[-1]))


# the figures' name <- the histogram metric of engine_histogram_windows
_QUANTILES = {
    "input": "prompt_tokens",
    "output": "generation_tokens",
    "ttft": "ttft",
    "e2e": "e2e",
    "queue": "queue_time",
    "tpot": "tpot",
}


def engine_windows(
    con: Any,
    width: float | None = None,
    from_s: float | None = None,
    to_s: float | None = None,
    run_id: str | None = None,
) -> dict[float, dict[str, Any]]:
    """Per window of ``width`` seconds (start -> figures; None: one window), the engine's own figures over the
    samples in [``from_s``, ``to_s``) (None: unbounded), summed over the runs of the connection (or of
    ``run_id`` alone) and their replicas: load and KV from the gauges, requests, tokens, preemptions and the
    latency sums from the counters, p50/p90 from the histograms (estimates, each p90 with the bounds of the
    bucket it fell in)."""
    summed = "SELECT * FROM engine_windows_summed(?::DOUBLE, ?::DOUBLE, ?::DOUBLE, ?::VARCHAR)"
    cur = con.execute(summed, [width, from_s, to_s, run_id])
    cols = [d[0] for d in cur.description]
    out: dict[float, dict[str, Any]] = {}
    for r in cur.fetchall():
        w = dict(zip(cols, r, strict=True))
        for name in _QUANTILES:
            w |= {f"{name}_p50": None, f"{name}_p90": None, f"{name}_p90_bucket": None}
        out[w["window_start_s"]] = w
    # every run's buckets summed per window, as one fleet's (one run's alone with run_id)
    quantiles = con.execute(
        "SELECT window_start_s, metric, p50, p90, p90_lo, p90_hi "
        "FROM engine_histogram_windows(?::DOUBLE, ?, ?::DOUBLE, ?::DOUBLE) WHERE ?::VARCHAR IS NULL OR run_id = ?",
        [width, run_id is not None, from_s, to_s, run_id, run_id],
    ).fetchall()
    metric_name = {m: n for n, m in _QUANTILES.items()}
    for ws, metric, p50, p90, p90_lo, p90_hi in quantiles:
        name = metric_name.get(metric)
        if name is None or ws not in out:
            continue
        out[ws] |= {f"{name}_p50": p50, f"{name}_p90": p90, f"{name}_p90_bucket": [p90_lo, p90_hi]}
    return out

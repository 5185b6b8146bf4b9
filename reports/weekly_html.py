"""The weekly workload report: charts of the per-window figures ``lltrace.weekly`` computed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt

from lltrace.documents.base import given
from lltrace.documents.weekly import WeeklyDocument, WeeklyWindow
from lltrace.reports.numbers import window_label
from lltrace.reports.page import data, esc, offline_page


def write_weekly_html(doc: WeeklyDocument, output: Path) -> None:
    """Write the HTML (offline: Vega inlined): each window's figures as chart data, what changed as a list."""
    labels = [window_label(w.window_start_s) for w in doc.windows]
    rows = [{**w.to_builtins(), "window": label} for w, label in zip(doc.windows, labels, strict=True)]
    x = alt.X("window:N", sort=labels, title=f"window ({doc.window})")
    by_requests = doc.figures == "requests"
    share = "prefill_dominant_share" if by_requests else "prefill_time_share"
    share_title = "Share of prefill-dominant requests" if by_requests else "Prefill's share of prefill + decode time"
    estimated = "" if by_requests else " (engine histograms: estimates within a bucket)"
    charts = [
        alt.Chart(data(rows), title="Requests per window")
        .mark_bar()
        .encode(x=x, y="requests:Q")
        .properties(width=640, height=140),
        *(
            [
                alt.Chart(data(rows), title="Failed requests per window")
                .mark_bar(color="#c0392b")
                .encode(x=x, y="failed:Q")
                .properties(width=640, height=100)
            ]
            if any(given(w.failed) for w in doc.windows)
            else []
        ),
        alt.Chart(
            data([r for w, r in zip(doc.windows, rows, strict=True) if _share(w, by_requests) is not None]),
            title=f"{share_title} ({doc.classification_basis})",
        )
        .mark_line(point=True)
        .encode(x=x, y=alt.Y(f"{share}:Q", scale=alt.Scale(domain=[0, 1]), title="share"))
        .properties(width=640, height=140),
        alt.Chart(
            data(_long(doc, labels, "tokens", lambda w: (w.input_p50, w.input_p90, w.output_p50, w.output_p90))),
            title=f"Prompt and output lengths{estimated}",
        )
        .mark_line(point=True)
        .encode(x=x, y=alt.Y("tokens:Q", scale=alt.Scale(type="log")), color="series:N")
        .properties(width=640, height=160),
    ]
    lat = _long(doc, labels, "seconds", lambda w: (w.ttft_p50, w.ttft_p90, w.e2e_p50, w.e2e_p90))
    if lat:
        charts.append(
            alt.Chart(data(lat), title=f"Latency percentiles{estimated}")
            .mark_line(point=True)
            .encode(x=x, y="seconds:Q", color="series:N")
            .properties(width=640, height=160)
        )
    kv = [r for w, r in zip(doc.windows, rows, strict=True) if given(w.peak_kv_usage) is not None]
    if kv:
        charts.append(
            alt.Chart(data(kv), title="KV pressure: peak usage per window")
            .mark_bar()
            .encode(x=x, y=alt.Y("peak_kv_usage:Q", scale=alt.Scale(domain=[0, 1])))
            .properties(width=640, height=120)
        )
    changes = "".join(
        f"<li><b>{esc(label)}</b>: {esc('; '.join(w.changes))}</li>"
        for w, label in zip(doc.windows, labels, strict=True)
        if w.changes
    )
    incidents = "".join(
        f"<li><b>{esc(label)}</b> · run {esc(i.run)}: {esc(i.verdict)}</li>"
        for w, label in zip(doc.windows, labels, strict=True)
        for i in w.incidents
    )
    head = (
        f"<h1>lltrace weekly: {len(rows)} windows of one {doc.window}</h1>"
        + (f"<h2>Incidents</h2><ul>{incidents}</ul>" if incidents else "")
        + f"<h2>What changed</h2><ul>{changes or '<li>nothing beyond the thresholds</li>'}</ul>"
    )
    page = offline_page(
        {str(i): c for i, c in enumerate(charts)}, f"<div id='lltrace-weekly'>{head}</div>", "lltrace weekly"
    )
    output.write_text(page, encoding="utf-8")


def _share(w: WeeklyWindow, by_requests: bool) -> float | None:
    """A window's prefill share: of its requests on the prefill side, else of the engine's time in prefill."""
    return w.prefill_dominant_share if by_requests else given(w.prefill_time_share)


_SERIES = {
    "tokens": ("input_p50", "input_p90", "output_p50", "output_p90"),
    "seconds": ("ttft_p50", "ttft_p90", "e2e_p50", "e2e_p90"),
}
"""The names the length and latency charts give their series."""


def _long(
    doc: WeeklyDocument, labels: list[str], value: str, figures: Callable[[WeeklyWindow], tuple[Any, ...]]
) -> list[dict[str, Any]]:
    """Long-form chart rows (window, series, value) of four figures of each window, a figure no source gave left
    out."""
    return [
        {"window": label, "series": series, value: given(v)}
        for w, label in zip(doc.windows, labels, strict=True)
        for series, v in zip(_SERIES[value], figures(w), strict=True)
        if given(v) is not None
    ]

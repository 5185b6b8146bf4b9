"""The weekly workload report: charts of the per-window figures ``lltrace.weekly`` computed."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import altair as alt

from lltrace.reports.numbers import window_label
from lltrace.reports.page import data, melt, offline_page


def write_weekly_html(doc: dict[str, Any], output: Path) -> None:
    """Write the HTML (offline: Vega inlined)."""
    rows = [{**w, "window": window_label(w["window_start_s"])} for w in doc["windows"]]
    order = [r["window"] for r in rows]
    x = alt.X("window:N", sort=order, title=f"window ({doc['window']})")
    by_requests = doc.get("figures", "requests") == "requests"
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
            if any(r.get("failed") for r in rows)
            else []
        ),
        alt.Chart(
            data([r for r in rows if r.get(share) is not None]),
            title=f"{share_title} ({doc['classification_basis']})",
        )
        .mark_line(point=True)
        .encode(x=x, y=alt.Y(f"{share}:Q", scale=alt.Scale(domain=[0, 1]), title="share"))
        .properties(width=640, height=140),
        alt.Chart(
            data(melt(rows, ["window"], ["input_p50", "input_p90", "output_p50", "output_p90"], "series", "tokens")),
            title=f"Prompt and output lengths{estimated}",
        )
        .mark_line(point=True)
        .encode(x=x, y=alt.Y("tokens:Q", scale=alt.Scale(type="log")), color="series:N")
        .properties(width=640, height=160),
    ]
    lat = melt(rows, ["window"], ["ttft_p50", "ttft_p90", "e2e_p50", "e2e_p90"], "series", "seconds")
    if lat:
        charts.append(
            alt.Chart(data(lat), title=f"Latency percentiles{estimated}")
            .mark_line(point=True)
            .encode(x=x, y="seconds:Q", color="series:N")
            .properties(width=640, height=160)
        )
    kv = [r for r in rows if r.get("peak_kv_usage") is not None]
    if kv:
        charts.append(
            alt.Chart(data(kv), title="KV pressure: peak usage per window")
            .mark_bar()
            .encode(x=x, y=alt.Y("peak_kv_usage:Q", scale=alt.Scale(domain=[0, 1])))
            .properties(width=640, height=120)
        )
    changes = "".join(
        f"<li><b>{html.escape(r['window'])}</b>: {html.escape('; '.join(r['changes']))}</li>"
        for r in rows
        if r["changes"]
    )
    head = (
        f"<h1>lltrace weekly: {len(rows)} windows of one {doc['window']}</h1>"
        f"<h2>What changed</h2><ul>{changes or '<li>nothing beyond the thresholds</li>'}</ul>"
    )
    page = offline_page(
        {str(i): c for i, c in enumerate(charts)}, f"<div id='lltrace-weekly'>{head}</div>", "lltrace weekly"
    )
    output.write_text(page, encoding="utf-8")

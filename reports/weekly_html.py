"""The weekly workload report: charts of the per-window figures ``lltrace.weekly`` computed."""

from __future__ import annotations

import html
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import altair as alt
import pandas as pd


def _label(t: float, relative: bool) -> str:
    if relative:
        return f"+{t / 3600:,.1f} h"
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")


def write_weekly_html(doc: dict[str, Any], output: Path) -> None:
    """Write the HTML (offline: Vega inlined)."""
    df = pd.DataFrame(doc["windows"])
    df["window"] = [_label(t, doc["relative_clock"]) for t in df["window_start_s"]]
    order = list(df["window"])
    x = alt.X("window:N", sort=order, title=f"window ({doc['window']})")
    charts = [
        alt.Chart(df, title="Requests per window")
        .mark_bar()
        .encode(x=x, y="requests:Q")
        .properties(width=640, height=140),
        alt.Chart(
            df.dropna(subset=["prefill_dominant_share"]),
            title=f"Share of prefill-dominant requests ({doc['classification_basis']})",
        )
        .mark_line(point=True)
        .encode(x=x, y=alt.Y("prefill_dominant_share:Q", scale=alt.Scale(domain=[0, 1]), title="share"))
        .properties(width=640, height=140),
        alt.Chart(
            df.melt(
                id_vars=["window"],
                value_vars=["input_p50", "input_p90", "output_p50", "output_p90"],
                var_name="series",
                value_name="tokens",
            ).dropna(),
            title="Prompt and output lengths",
        )
        .mark_line(point=True)
        .encode(x=x, y=alt.Y("tokens:Q", scale=alt.Scale(type="log")), color="series:N")
        .properties(width=640, height=160),
    ]
    lat = df.melt(
        id_vars=["window"],
        value_vars=["ttft_p50", "ttft_p90", "e2e_p50", "e2e_p90"],
        var_name="series",
        value_name="seconds",
    ).dropna()
    if not lat.empty:
        charts.append(
            alt.Chart(lat, title="Latency percentiles")
            .mark_line(point=True)
            .encode(x=x, y="seconds:Q", color="series:N")
            .properties(width=640, height=160)
        )
    kv = df.dropna(subset=["peak_kv_usage"]) if "peak_kv_usage" in df else pd.DataFrame()
    if not kv.empty:
        charts.append(
            alt.Chart(kv, title="KV pressure: peak usage per window")
            .mark_bar()
            .encode(x=x, y=alt.Y("peak_kv_usage:Q", scale=alt.Scale(domain=[0, 1])))
            .properties(width=640, height=120)
        )
    from lltrace.reports.html import offline_page

    changes = "".join(
        f"<li><b>{html.escape(w['window'])}</b>: {html.escape('; '.join(w['changes']))}</li>"
        for _, w in df.iterrows()
        if w["changes"]
    )
    head = (
        f"<h1>lltrace weekly: {len(df)} windows of one {doc['window']}</h1>"
        f"<h2>What changed</h2><ul>{changes or '<li>nothing beyond the thresholds</li>'}</ul>"
    )
    page = offline_page(
        {str(i): c for i, c in enumerate(charts)}, f"<div id='lltrace-weekly'>{head}</div>", "lltrace weekly"
    )
    output.write_text(page, encoding="utf-8")

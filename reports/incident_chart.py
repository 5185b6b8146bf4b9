"""The incident on one time axis (the report's first chart): the latency of each window of arrival with the incident
shaded, the engine's step time, its requests running and waiting and its KV usage, and each client's arrivals,
the causing client's apart (``lltrace.documents.incidents``). It draws; it computes nothing."""

from __future__ import annotations

from typing import Any

import altair as alt

from lltrace.documents.analysis import AnalysisDocument
from lltrace.reports.page import WIDTH, data, melt

X_TITLE = "seconds since the first arrival (windows of arrival)"


def _x(domain: list[float]) -> alt.X:
    return alt.X("t_s:Q", title=X_TITLE, scale=alt.Scale(domain=domain, nice=False))


def _shade(spans: list[dict[str, Any]], domain: list[float]) -> alt.Chart:
    return (
        alt.Chart(data(spans))
        .mark_rect(color="#d62728", opacity=0.12)
        .encode(x=alt.X("start_s:Q", scale=alt.Scale(domain=domain, nice=False)), x2="end_s:Q")
    )


def incident_chart(doc: AnalysisDocument) -> alt.VConcatChart | None:
    """The incident timeline, or None for a run without an incident."""
    tl = doc.incident_timeline
    if tl is None or not doc.incidents:
        return None
    half = tl.width_s / 2
    rows = [{"t_s": w.start_s + half, **w.to_builtins()} for w in tl.windows]
    domain = [0.0, max(r["t_s"] for r in rows) + half]
    spans = [{"start_s": i.start_s, "end_s": i.end_s} for i in doc.incidents]
    latency = melt(rows, ["t_s"], ["ttft_p90_s", "tpot_p90_s", "e2e_p90_s"], "metric", "seconds")
    for r in latency:
        r["metric"] = r["metric"].removesuffix("_s").replace("_", " ")
    top = alt.layer(
        _shade(spans, domain),
        alt.Chart(data(latency))
        .mark_line(point=True)
        .encode(
            x=_x(domain),
            y=alt.Y("seconds:Q", title="p90 per window, s (log)", scale=alt.Scale(type="log")),
            color=alt.Color("metric:N", title=None),
        ),
    ).properties(width=WIDTH, height=170, title="Latency per window of arrival (the incident shaded)")
    steps = [{"t_s": r["t_s"], "ms": r["step_time_mean_s"] * 1e3} for r in rows if r["step_time_mean_s"] is not None]
    step = alt.layer(
        _shade(spans, domain),
        alt.Chart(data(steps))
        .mark_line(point=True, color="#ff7f0e")
        .encode(x=_x(domain), y=alt.Y("ms:Q", title="engine step, mean ms")),
    ).properties(width=WIDTH, height=90)
    load = melt(rows, ["t_s"], ["running_mean", "waiting_mean"], "series", "requests")
    kv = [{"t_s": r["t_s"], "kv": r["kv_peak"]} for r in rows if r["kv_peak"] is not None]
    engine = (
        alt.layer(
            _shade(spans, domain),
            alt.Chart(data(load))
            .mark_line()
            .encode(
                x=_x(domain), y=alt.Y("requests:Q", title="running / waiting"), color=alt.Color("series:N", title=None)
            ),
            alt.Chart(data(kv))
            .mark_line(strokeDash=[4, 2], color="#9467bd")
            .encode(x=_x(domain), y=alt.Y("kv:Q", title="KV peak (dashed)", scale=alt.Scale(domain=[0, 1]))),
        )
        .resolve_scale(y="independent")
        .properties(width=WIDTH, height=90)
    )
    cause = {c.client for c in doc.incidents[0].caused_by}
    arrivals = [
        {"t_s": r["t_s"], "client": (c or "(none)") + (" (caused it)" if c in cause else ""), "requests": n}
        for r in rows
        for c, n in r["arrivals"].items()
    ]
    arr = alt.layer(
        _shade(spans, domain),
        alt.Chart(data(arrivals))
        .mark_bar(width=max(2.0, WIDTH / max(len(rows), 1) * 0.6))
        .encode(
            x=_x(domain),
            y=alt.Y("requests:Q", title="arrivals per window", stack="zero"),
            color=alt.Color("client:N", title="client"),
        ),
    ).properties(width=WIDTH, height=90)
    return alt.vconcat(top, step, engine, arr).resolve_scale(color="independent")

"""The incident on one time axis (the report's first chart): the latency of each window of arrival with the incident
shaded, the engine's step time, its requests running and waiting and its KV usage, and each client's arrivals,
the causing client's apart (``lltrace.documents.incidents``). It draws; it computes nothing."""

from __future__ import annotations

from typing import Any

import altair as alt

from lltrace.documents.analysis import AnalysisDocument
from lltrace.reports.page import WIDTH, data

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
    mid = [(w.start_s + half, w) for w in tl.windows]
    domain = [0.0, max(t for t, _ in mid) + half]
    spans = [{"start_s": i.start_s, "end_s": i.end_s} for i in doc.incidents]
    latency = [
        {"t_s": t, "metric": name, "seconds": v}
        for t, w in mid
        for name, v in (("ttft p90", w.ttft_p90_s), ("tpot p90", w.tpot_p90_s), ("e2e p90", w.e2e_p90_s))
        if v is not None
    ]
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
    steps = [{"t_s": t, "ms": w.step_time_mean_s * 1e3} for t, w in mid if w.step_time_mean_s is not None]
    step = alt.layer(
        _shade(spans, domain),
        alt.Chart(data(steps))
        .mark_line(point=alt.OverlayMarkDef(color="#ff7f0e"), color="#ff7f0e")
        .encode(x=_x(domain), y=alt.Y("ms:Q", title="engine step, mean ms")),
    ).properties(width=WIDTH, height=90)
    load = [
        {"t_s": t, "series": name, "requests": v}
        for t, w in mid
        for name, v in (("running", w.running_mean), ("waiting", w.waiting_mean))
        if v is not None
    ]
    kv = [{"t_s": t, "kv": w.kv_peak} for t, w in mid if w.kv_peak is not None]
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
        {"t_s": t, "client": (c or "(none)") + (" (caused it)" if c in cause else ""), "requests": n}
        for t, w in mid
        for c, n in w.arrivals.items()
    ]
    arr = alt.layer(
        _shade(spans, domain),
        alt.Chart(data(arrivals))
        .mark_bar(width=max(2.0, WIDTH / max(len(mid), 1) * 0.6))
        .encode(
            x=_x(domain),
            y=alt.Y("requests:Q", title="arrivals per window", stack="zero"),
            color=alt.Color("client:N", title="client"),
        ),
    ).properties(width=WIDTH, height=90)
    return alt.vconcat(top, step, engine, arr).resolve_scale(color="independent")

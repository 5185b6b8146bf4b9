"""The run report's charts: each a function of the rows it draws (report views, the analysis document's
steps, the replay document's cases), returning an Altair chart, or None where the run has no such data."""

from __future__ import annotations

from typing import Any

import altair as alt

from lltrace.documents.analysis import AnalysisDocument
from lltrace.documents.clients import ClientSummary
from lltrace.documents.replay import ReplayDocument
from lltrace.documents.steps import StepsSection
from lltrace.reports.incident_chart import incident_chart
from lltrace.reports.page import WIDTH, Rows, data, melt, thin
from lltrace.reports.replay_rows import Case, replay_cases, sweep_rows

COMPONENT_COLORS = {
    "queue": "#d62728",
    "prefill": "#1f77b4",
    "decode": "#2ca02c",
    "preempted": "#9467bd",
    "overhead": "#7f7f7f",
}


def request_chart(bins: list[dict[str, Any]]) -> alt.Chart | None:
    """Per-request latency stacked by component, requests ordered by e2e (binned)."""
    if not bins:
        return None
    renamed = [{**r, **{c: r.get(f"{c}_s") for c in COMPONENT_COLORS}} for r in bins]
    long = data(melt(renamed, ["bin", "requests", "e2e_s"], list(COMPONENT_COLORS), "component", "seconds"))
    return (
        alt.Chart(long, title="Where each request's time went (requests ordered by end-to-end latency)")
        .mark_bar()
        .encode(
            x=alt.X("bin:O", title="requests, fastest to slowest (bins)", axis=alt.Axis(labels=False, ticks=False)),
            y=alt.Y("seconds:Q", stack="zero", title="mean seconds per request"),
            color=alt.Color(
                "component:N", scale=alt.Scale(domain=list(COMPONENT_COLORS), range=list(COMPONENT_COLORS.values()))
            ),
            tooltip=["bin:O", "requests:Q", "component:N", alt.Tooltip("seconds:Q", format=".3f")],
        )
        .properties(width=WIDTH, height=260)
    )


def latency_chart(hist: Rows) -> alt.FacetChart | None:
    """TTFT, TPOT and e2e distributions."""
    if not hist:
        return None
    return (
        alt.Chart(data(hist))
        .mark_bar()
        .encode(
            x=alt.X("bin_lo:Q", title="seconds"),
            x2="bin_hi:Q",
            y=alt.Y("requests:Q", title="requests"),
            tooltip=["metric:N", alt.Tooltip("bin_lo:Q", format=".4f"), "requests:Q"],
        )
        .properties(width=200, height=160)
        .facet(column=alt.Column("metric:N", title="latency distributions"))
        .resolve_scale(x="independent", y="independent")
    )


def size_chart(mix: Rows, crossover: float | None) -> alt.LayerChart | alt.Chart | None:
    """Prompt vs output tokens (log2 cells), with the run's crossover input length."""
    if not mix:
        return None
    rows = [{**r, "phase": "prefill" if crossover and r["mean_input"] > crossover else "decode"} for r in mix]
    points = (
        alt.Chart(data(rows), title="Request sizes (cells of log2 bins; colour: side of the crossover)")
        .mark_circle(opacity=0.7)
        .encode(
            x=alt.X("mean_input:Q", scale=alt.Scale(type="log"), title="prompt tokens"),
            y=alt.Y("mean_output:Q", scale=alt.Scale(type="log"), title="output tokens"),
            size=alt.Size("requests:Q", title="requests"),
            color=alt.Color(
                "phase:N",
                title="dominant phase",
                scale=alt.Scale(domain=["prefill", "decode"], range=["#1f77b4", "#2ca02c"]),
            ),
            tooltip=["input_bin:Q", "output_bin:Q", "requests:Q", alt.Tooltip("e2e_s:Q", format=".3f")],
        )
        .properties(width=WIDTH, height=260)
    )
    if not crossover:
        return points
    rule = (
        alt.Chart(data([{"crossover": crossover}])).mark_rule(strokeDash=[4, 4], color="black").encode(x="crossover:Q")
    )
    return points + rule


def timeline_chart(timeline: Rows) -> alt.VConcatChart | None:
    """Running, waiting and waiting-for-capacity requests, KV usage and preemptions over time."""
    if not timeline:
        return None
    load = melt(timeline, ["t_s"], ["running", "waiting", "waiting_capacity"], "series", "requests")
    top = (
        alt.Chart(data(load), title="Engine load over time")
        .mark_line()
        .encode(x=alt.X("t_s:Q", title="seconds since the first sample"), y="requests:Q", color="series:N")
        .properties(width=WIDTH, height=160)
    )
    kv = melt(timeline, ["t_s"], ["kv_usage"], "series", "value")
    pre = [r for r in timeline if r.get("preemptions_total") is not None]
    bottom = (
        alt.Chart(data(kv))
        .mark_area(opacity=0.4)
        .encode(
            x=alt.X("t_s:Q", title="seconds since the first sample"),
            y=alt.Y("value:Q", title="KV-cache usage", scale=alt.Scale(domain=[0, 1])),
        )
        .properties(width=WIDTH, height=120)
    )
    if pre:
        bottom = alt.layer(
            bottom,
            alt.Chart(data(pre))
            .mark_line(color="#9467bd")
            .encode(x="t_s:Q", y=alt.Y("preemptions_total:Q", title="preemptions (cumulative)")),
        ).resolve_scale(y="independent")
    return alt.vconcat(top, bottom)


def steps_chart(steps: StepsSection | None) -> alt.Chart | alt.VConcatChart | None:
    """Engine steps over time by kind, and GPU time per kernel class per step where a profiler gave it."""
    if steps is None or not steps.items:
        return None
    items = thin([it for it in steps.items if it.start_s is not None])
    if not items:
        return None
    t0 = min(it.start_s for it in items)
    rows = [
        {
            "kind": str(it.kind or "unknown"),
            "prefill_tokens": it.prefill_tokens,
            "decode_tokens": it.decode_tokens,
            "t_s": it.start_s - t0,
            "ms": (it.dur_s or 0.0) * 1e3,
        }
        for it in items
    ]
    timeline = (
        alt.Chart(data(rows), title=f"Engine steps ({steps.source}): duration by kind")
        .mark_circle(size=18)
        .encode(
            x=alt.X("t_s:Q", title="seconds since the first step"),
            y=alt.Y("ms:Q", title="step time, ms"),
            color=alt.Color("kind:N"),
            tooltip=["kind:N", "prefill_tokens:Q", "decode_tokens:Q", alt.Tooltip("ms:Q", format=".2f")],
        )
        .properties(width=WIDTH, height=200)
    )
    gpu = [
        {"step": f"{i:04d} {it.kind or 'unknown'}", "class": c, "ms": t * 1e3}
        for i, it in enumerate(items)
        for c, t in (
            ("gemm", it.t_gemm_s),
            ("attention", it.t_attention_s),
            ("communication", it.t_communication_s),
            ("memory", it.t_memory_s),
            ("elementwise", it.t_elementwise_s),
            ("other", it.t_other_s),
        )
        if t is not None
    ]
    if not gpu:
        return timeline
    per_class = (
        alt.Chart(data(gpu), title="GPU time per step by kernel class (profiler)")
        .mark_bar()
        .encode(
            x=alt.X("step:O", title="step", axis=alt.Axis(labels=len(items) <= 40)),
            y=alt.Y("ms:Q", stack="zero", title="GPU time, ms"),
            color=alt.Color("class:N", title="kernel class"),
            tooltip=["step:O", "class:N", alt.Tooltip("ms:Q", format=".3f")],
        )
        .properties(width=WIDTH, height=200)
    )
    return alt.vconcat(timeline, per_class).resolve_scale(color="independent")


def interference_chart(rows: Rows) -> alt.Chart | None:
    """Mixed steps: their time against the decode-only fit."""
    if not rows:
        return None
    points = [{**r, "wall_ms": r["wall_s"] * 1e3, "predicted_ms": r["predicted_decode_s"] * 1e3} for r in thin(rows)]
    return (
        alt.Chart(data(points), title="Interference: mixed steps vs the decode-only fit")
        .mark_circle()
        .encode(
            x=alt.X("predicted_ms:Q", title="decode-only step time for the same decode tokens, ms (fit)"),
            y=alt.Y("wall_ms:Q", title="mixed step time, ms"),
            size="prefill_tokens:Q",
            tooltip=["step_id:Q", "prefill_tokens:Q", "decode_reqs:Q", alt.Tooltip("extra_s:Q", format=".4f")],
        )
        .properties(width=WIDTH, height=220)
    )


def _case_figures(c: Case) -> tuple[tuple[str, float | None], ...]:
    """A case's four charted figures with their labels."""
    return (
        ("queue p50", c.queue_p50_s),
        ("TTFT mean", c.ttft_mean_s),
        ("e2e mean", c.e2e_mean_s),
        ("e2e p90", c.e2e_p90_s),
    )


_CASE_LABELS = ["queue p50", "TTFT mean", "e2e mean", "e2e p90"]


def replay_chart(rep: ReplayDocument | None) -> alt.Chart | None:
    """Measured, replayed and each what-if side by side: queue p50, TTFT mean, e2e mean and p90."""
    if rep is None:
        return None
    cases = replay_cases(rep)
    rows = [
        {"case": c.case, "basis": c.basis, "metric": label, "seconds": v}
        for c in cases
        for label, v in _case_figures(c)
        if v is not None
    ]
    order = [c.case for c in cases]
    return (
        alt.Chart(data(rows), title="Replay: measured, replayed and what-ifs (what-ifs are estimates)")
        .mark_bar()
        .encode(
            x=alt.X("metric:N", title=None, sort=_CASE_LABELS),
            xOffset=alt.XOffset("case:N", sort=order),
            y=alt.Y("seconds:Q", title="seconds"),
            color=alt.Color("case:N", sort=order, title="case"),
            tooltip=["case:N", "basis:N", "metric:N", alt.Tooltip("seconds:Q", format=".3f")],
        )
        .properties(width=WIDTH, height=240)
    )


def replay_sweep_chart(rep: ReplayDocument | None) -> alt.VConcatChart | None:
    """Each what-if sweep of the replay (``--what-if max_num_seqs=4..32``): queue p50, TTFT mean and e2e mean
    and p90 against the swept value (estimates), one panel per sweep."""
    rows = sweep_rows(rep) if rep is not None else []
    if not rows:
        return None
    panels = []
    for sweep in dict.fromkeys(r.sweep for r in rows):
        mine = [r for r in rows if r.sweep == sweep]
        numeric = all(isinstance(r.value, (int, float)) for r in mine)
        points = [
            {"value": r.value, "metric": label, "seconds": v}
            for r in mine
            for label, v in _case_figures(r.case)
            if v is not None
        ]
        x = (
            alt.X("value:Q", title=sweep.partition("=")[0], scale=alt.Scale(type="log", base=2))
            if numeric and all(r.value > 0 for r in mine)
            else alt.X("value:N", title=sweep, sort=[r.value for r in mine])
        )
        panels.append(
            alt.Chart(data(points), title=f"Replay sweep {sweep} (estimates)")
            .mark_line(point=True)
            .encode(
                x=x,
                y=alt.Y("seconds:Q", title="seconds"),
                color=alt.Color("metric:N", sort=_CASE_LABELS),
                tooltip=["value:Q" if numeric else "value:N", "metric:N", alt.Tooltip("seconds:Q", format=".3f")],
            )
            .properties(width=WIDTH, height=220)
        )
    return alt.vconcat(*panels)


def sweep_chart(summaries: list[ClientSummary]) -> alt.HConcatChart | None:
    """A rate sweep as the client summarised it (``client_summary`` entries with a numeric requested rate, at
    least two): median and p99 TTFT and e2e, and the achieved rate, against the requested rate."""
    pts = [
        c for c in summaries if isinstance(c.requested_rate_per_s, (int, float)) and c.stage not in (None, "summary")
    ]
    if len(pts) < 2:
        return None
    lat = []
    for c in pts:
        for d, label in ((c.ttft_s, "TTFT"), (c.e2e_s, "e2e")):
            for stat, v in (("median", d.median if d else None), ("p99", d.p99 if d else None)):
                if v is not None:
                    lat.append({"rate": c.requested_rate_per_s, "latency": f"{label} {stat}", "seconds": v})
    rates = [
        {"rate": c.requested_rate_per_s, "achieved": c.achieved_rate_per_s}
        for c in pts
        if c.achieved_rate_per_s is not None
    ]
    left = (
        alt.Chart(data(lat), title="Latency against the requested rate (the client's own figures)")
        .mark_line(point=True)
        .encode(
            x=alt.X("rate:Q", title="requested rate, requests/s"),
            y=alt.Y("seconds:Q", title="seconds", scale=alt.Scale(type="log")),
            color=alt.Color("latency:N"),
            tooltip=["rate:Q", "latency:N", alt.Tooltip("seconds:Q", format=".4f")],
        )
        .properties(width=WIDTH // 2, height=240)
    )
    right = (
        alt.Chart(data(rates), title="Achieved against requested rate")
        .mark_line(point=True)
        .encode(
            x=alt.X("rate:Q", title="requested rate, requests/s"),
            y=alt.Y("achieved:Q", title="achieved rate, requests/s"),
            tooltip=["rate:Q", alt.Tooltip("achieved:Q", format=".2f")],
        )
        .properties(width=WIDTH // 2, height=240)
    )
    return alt.hconcat(left, right)


def build_charts(
    doc: AnalysisDocument, replay: ReplayDocument | None, tables: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """The report's charts by name (None where the run has no data for one): from the analysis document, the run's
    latest replay document and the report views' rows."""
    crossover = doc.classification.crossover_input_tokens if doc.classification is not None else None
    charts = {
        "incident": incident_chart(doc),
        "requests": request_chart(tables.get("report_request_bins")),
        "latency": latency_chart(tables.get("report_latency_hist")),
        "sizes": size_chart(tables.get("report_size_mix"), crossover),
        "timeline": timeline_chart(tables.get("report_timeline")),
        "steps": steps_chart(doc.steps),
        "interference": interference_chart(tables.get("interference_steps")),
        "replay": replay_chart(replay),
        "replay_sweep": replay_sweep_chart(replay),
        "sweep": sweep_chart(doc.client_summary),
    }
    return {k: v for k, v in charts.items() if v is not None}

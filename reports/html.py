"""The run report: one self-contained HTML file (Vega bundles inlined, no network) and optional PNGs.

It draws what it is given: the analysis document (with the run's latest replay under ``replay``, when the
run was replayed) and the report views' rows (aggregated in SQL, so a
million requests arrive here as a few hundred rows). It computes nothing.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import altair as alt

COMPONENT_COLORS = {
    "queue": "#d62728",
    "prefill": "#1f77b4",
    "decode": "#2ca02c",
    "preempted": "#9467bd",
    "overhead": "#7f7f7f",
}
WIDTH = 640


Rows = list[dict[str, Any]]


def _data(rows: Rows) -> alt.Data:
    return alt.Data(values=rows)


def _melt(rows: Rows, ids: list[str], values: list[str], var: str, value: str) -> Rows:
    """Long form of ``rows`` (one row per id and value column), leaving out missing values."""
    return [
        {**{k: r.get(k) for k in ids}, var: v, value: r.get(v)} for r in rows for v in values if r.get(v) is not None
    ]


def _thin(rows: Rows, limit: int = 2000) -> Rows:
    """Every k-th row so that at most about ``limit`` reach the page."""
    return rows[:: max(1, len(rows) // limit)] if len(rows) > limit else rows


def request_chart(bins: list[dict[str, Any]]) -> alt.Chart | None:
    """Per-request latency stacked by component, requests ordered by e2e (binned)."""
    if not bins:
        return None
    renamed = [{**r, **{c: r.get(f"{c}_s") for c in COMPONENT_COLORS}} for r in bins]
    long = _data(_melt(renamed, ["bin", "requests", "e2e_s"], list(COMPONENT_COLORS), "component", "seconds"))
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
        alt.Chart(_data(hist))
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
        alt.Chart(_data(rows), title="Request sizes (cells of log2 bins; colour: side of the crossover)")
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
        alt.Chart(_data([{"crossover": crossover}])).mark_rule(strokeDash=[4, 4], color="black").encode(x="crossover:Q")
    )
    return points + rule


def timeline_chart(timeline: Rows) -> alt.VConcatChart | None:
    """Running / waiting (for KV room) requests, KV usage and preemptions over time."""
    if not timeline:
        return None
    load = _melt(timeline, ["t_s"], ["running", "waiting", "waiting_capacity"], "series", "requests")
    top = (
        alt.Chart(_data(load), title="Engine load over time")
        .mark_line()
        .encode(x=alt.X("t_s:Q", title="seconds since the first sample"), y="requests:Q", color="series:N")
        .properties(width=WIDTH, height=160)
    )
    kv = _melt(timeline, ["t_s"], ["kv_usage"], "series", "value")
    pre = [r for r in timeline if r.get("preemptions_total") is not None]
    bottom = (
        alt.Chart(_data(kv))
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
            alt.Chart(_data(pre))
            .mark_line(color="#9467bd")
            .encode(x="t_s:Q", y=alt.Y("preemptions_total:Q", title="preemptions (cumulative)")),
        ).resolve_scale(y="independent")
    return alt.vconcat(top, bottom)


def steps_chart(steps: dict[str, Any] | None) -> alt.Chart | alt.VConcatChart | None:
    """Engine steps over time by kind, and GPU time per kernel class per step where a profiler gave it."""
    if not steps or not steps.get("items"):
        return None
    items = _thin([it for it in steps["items"] if it.get("start_s") is not None])
    if not items:
        return None
    t0 = min(it["start_s"] for it in items)
    rows = [
        {
            "kind": it["kind"] or "unknown",
            "prefill_tokens": it.get("prefill_tokens"),
            "decode_tokens": it.get("decode_tokens"),
            "t_s": it["start_s"] - t0,
            "ms": (it["dur_s"] or 0.0) * 1e3,
        }
        for it in items
    ]
    timeline = (
        alt.Chart(_data(rows), title=f"Engine steps ({steps.get('source')}): duration by kind")
        .mark_circle(size=18)
        .encode(
            x=alt.X("t_s:Q", title="seconds since the first step"),
            y=alt.Y("ms:Q", title="step time, ms"),
            color=alt.Color("kind:N"),
            tooltip=["kind:N", "prefill_tokens:Q", "decode_tokens:Q", alt.Tooltip("ms:Q", format=".2f")],
        )
        .properties(width=WIDTH, height=200)
    )
    classes = ("gemm", "attention", "communication", "memory", "elementwise", "other")
    gpu = [
        {"step": f"{i:04d} {it['kind'] or 'unknown'}", "class": c, "ms": it[f"t_{c}_s"] * 1e3}
        for i, it in enumerate(items)
        for c in classes
        if it.get(f"t_{c}_s") is not None
    ]
    if not gpu:
        return timeline
    per_class = (
        alt.Chart(_data(gpu), title="GPU time per step by kernel class (profiler)")
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
    data = [{**r, "wall_ms": r["wall_s"] * 1e3, "predicted_ms": r["predicted_decode_s"] * 1e3} for r in _thin(rows)]
    return (
        alt.Chart(_data(data), title="Interference: mixed steps vs the decode-only fit")
        .mark_circle()
        .encode(
            x=alt.X("predicted_ms:Q", title="decode-only step time for the same decode tokens, ms (fit)"),
            y=alt.Y("wall_ms:Q", title="mixed step time, ms"),
            size="prefill_tokens:Q",
            tooltip=["step_id:Q", "prefill_tokens:Q", "decode_reqs:Q", alt.Tooltip("extra_s:Q", format=".4f")],
        )
        .properties(width=WIDTH, height=220)
    )


def replay_chart(rep: dict[str, Any] | None) -> alt.Chart | None:
    """Measured, replayed and each what-if side by side: queue p50, TTFT mean, e2e mean and p90."""
    if not rep:
        return None
    from lltrace.replay import replay_cases

    cases = replay_cases(rep)
    metrics = {"queue_p50_s": "queue p50", "ttft_mean_s": "TTFT mean", "e2e_mean_s": "e2e mean", "e2e_p90_s": "e2e p90"}
    rows = [
        {"case": c["case"], "basis": c["basis"], "metric": label, "seconds": c[key]}
        for c in cases
        for key, label in metrics.items()
        if c[key] is not None
    ]
    order = [c["case"] for c in cases]
    return (
        alt.Chart(_data(rows), title="Replay: measured, replayed and what-ifs (what-ifs are estimates)")
        .mark_bar()
        .encode(
            x=alt.X("metric:N", title=None, sort=list(metrics.values())),
            xOffset=alt.XOffset("case:N", sort=order),
            y=alt.Y("seconds:Q", title="seconds"),
            color=alt.Color("case:N", sort=order, title="case"),
            tooltip=["case:N", "basis:N", "metric:N", alt.Tooltip("seconds:Q", format=".3f")],
        )
        .properties(width=WIDTH, height=240)
    )


def _replay_html(rep: dict[str, Any] | None) -> str:
    """The replay section: calibration, validation (its own error first), then measured / replayed / what-ifs."""
    if not rep:
        return ""
    from lltrace.replay import replay_cases, replay_notes, validation_rows

    c = rep["calibration"]
    fit = "" if c["step_mape"] is None else f", fit MAPE {c['step_mape']:.0%}"
    parts = [
        "<h2>Replay</h2>",
        f"<p>Scheduler model calibrated from {html.escape(c['source'])}: step = {c['c0_s'] * 1e3:.2f} ms + "
        f"{c['overhead_s'] * 1e3:.2f} ms overhead + {c['c_prefill_s_per_token'] * 1e6:.1f} µs per prefill token + "
        f"{c['c_decode_s_per_token'] * 1e6:.1f} µs per decode token{fit}.</p>",
    ]
    val = validation_rows(rep)
    if val:

        def cell(v: float | None, metric: str, key: str = "") -> str:
            text = "-" if v is None else (f"{v * 1e3:.2f} ms" if metric == "tpot_s" else f"{v:.3f} s")
            return f"<td data-key='{key}'>{text}</td>" if key else f"<td>{text}</td>"

        def pct(v: float | None, key: str) -> str:
            return f"<td data-key='{key}'>{'-' if v is None else f'{v:.1%}'}</td>"

        body = "".join(
            f"<tr><td>{r['metric']}</td>{cell(r['replayed_mean'], r['metric'])}{cell(r['measured_mean'], r['metric'])}"
            f"{pct(r['mape_mean'], 'replay.validation.' + r['metric'].removesuffix('_s') + '_mean_mape')}"
            f"{cell(r['replayed_p90'], r['metric'])}{cell(r['measured_p90'], r['metric'])}"
            f"{pct(r['mape_p90'], 'replay.validation.' + r['metric'].removesuffix('_s') + '_p90_mape')}</tr>"
            for r in val
        )
        parts.append(
            f"<p>Validation, before any what-if: {html.escape(rep['validation']['method'])}.</p>"
            "<table><tr><th>metric</th><th>replayed mean</th><th>measured mean</th><th>MAPE mean</th>"
            f"<th>replayed p90</th><th>measured p90</th><th>MAPE p90</th></tr>{body}</table>"
        )
    else:
        parts.append("<p>Validation: none — the run has no measured latencies to score against.</p>")

    def case_row(r: dict[str, Any]) -> str:
        name = html.escape(r["case"])
        key = re.sub(r"\W", "_", r["case"])
        cells = [f"<td>{name}</td><td>{r['basis']}</td>"]
        for k in ("queue_p50_s", "ttft_mean_s", "e2e_mean_s", "e2e_p90_s", "preemptions"):
            v = r[k]
            text = "-" if v is None else (f"{v:,.0f}" if k == "preemptions" else f"{v:.3f}")
            cells.append(f"<td data-key='replay.{key}.{k}'>{text}</td>")
        return f"<tr>{''.join(cells)}</tr>"

    rows = "".join(case_row(r) for r in replay_cases(rep))
    notes = "".join(f"<li>{html.escape(case)}: {html.escape(note)}</li>" for case, note in replay_notes(rep))
    parts.append(
        "<p>Measured, replayed with the run's own settings, and each what-if (estimates):</p>"
        "<table><tr><th>case</th><th>basis</th><th>queue p50 s</th><th>TTFT mean s</th><th>e2e mean s</th>"
        f"<th>e2e p90 s</th><th>preemptions</th></tr>{rows}</table>"
    )
    if notes:
        parts.append(f"<ul class='notes'>{notes}</ul>")
    return "\n".join(parts)


def _headline(doc: dict[str, Any]) -> str:
    cls = doc.get("classification") or {}
    parts = [f"<h1>lltrace report: {html.escape(doc['run']['id'])}</h1>"]
    if cls:
        parts.append(f"<p class='verdict'><b>{html.escape(cls['label'])}</b>: {html.escape(cls['why'])}</p>")
        if cls.get("crossover_input_tokens"):
            parts.append(
                f"<p>Crossover input length L* = <span data-key='crossover_input_tokens'>"
                f"{cls['crossover_input_tokens']:,.0f}</span> tokens.</p>"
            )
    att = doc.get("attribution")
    if att:
        rows = "".join(
            f"<tr><td>{c}</td><td data-key='attribution.{c}.total_s'>{att[c]['total_s']:,.3f}</td>"
            f"<td data-key='attribution.{c}.share'>{att[c]['share']:.1%}</td><td>{att[c]['basis']}</td></tr>"
            for c in ("queue", "prefill", "decode", "preempted", "overhead")
        )
        parts.append(f"<table><tr><th>component</th><th>total s</th><th>share</th><th>basis</th></tr>{rows}</table>")
    kv = doc.get("kv")
    if kv and kv.get("preemptions") is not None:
        parts.append(
            f"<p>KV cache: peak usage <span data-key='kv.peak_usage'>{kv['peak_usage']:.1%}</span>, "
            f"<span data-key='kv.preemptions'>{kv['preemptions']:,.0f}</span> preemptions.</p>"
        )
    advice = doc.get("advice") or []
    if advice:
        items = "".join(
            f"<li><b>{html.escape(a['bottleneck'])}</b>: {html.escape(a['action'])} — "
            f"{html.escape(a['expected_gain']['metric'])} {a['expected_gain']['from']:,.3f} → "
            f"{a['expected_gain']['to']:,.3f} {a['expected_gain']['unit']} <i>({html.escape(a['formula'])})</i></li>"
            for a in advice
        )
        parts.append(f"<h2>Advice</h2><ol>{items}</ol>")
    return "\n".join(parts)


def offline_page(charts: dict[str, Any], header_html: str, title: str) -> str:
    """One HTML page with each chart in its own view (no scale shared across charts), the Vega, Vega-Lite
    and vega-embed bundle inlined once (vl-convert), so the page needs no network."""
    import json

    shell = alt.Chart(_data([{"x": 0}])).mark_point().encode(x="x:Q").to_html(inline=True)
    # the last </head>: the inlined bundle itself contains "<head>"/"<body>" strings
    head = shell[: shell.rindex("</head>") + len("</head>")]
    divs = "\n".join(f"<div class='chart' id='chart-{name}'></div>" for name in charts)
    specs = json.dumps({f"chart-{name}": chart.to_dict() for name, chart in charts.items()})
    style = (
        "<style>body{font-family:system-ui,sans-serif;max-width:1100px;margin:1em auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
        ".verdict{font-size:1.2em}.chart{margin:1.5em 0}</style>"
    )
    script = (
        "<script type='text/javascript'>\n"
        f"const specs = {specs};\n"
        "for (const [id, spec] of Object.entries(specs)) {\n"
        "  vegaEmbed('#' + id, spec, {mode: 'vega-lite', renderer: 'svg'}).catch(console.error);\n"
        "}\n</script>"
    )
    return (
        f"{head.replace('<head>', '<head><title>' + html.escape(title) + '</title>', 1)}<body>{style}\n"
        f"{header_html}\n{divs}\n{script}\n</body>\n</html>\n"
    )


def build_charts(doc: dict[str, Any], tables: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The report's charts by name (None where the run has no data for one)."""
    crossover = (doc.get("classification") or {}).get("crossover_input_tokens")
    charts = {
        "requests": request_chart(tables.get("report_request_bins")),
        "latency": latency_chart(tables.get("report_latency_hist")),
        "sizes": size_chart(tables.get("report_size_mix"), crossover),
        "timeline": timeline_chart(tables.get("report_timeline")),
        "steps": steps_chart(doc.get("steps")),
        "interference": interference_chart(tables.get("interference_steps")),
        "replay": replay_chart(doc.get("replay")),
    }
    return {k: v for k, v in charts.items() if v is not None}


def write_report(
    doc: dict[str, Any], tables: dict[str, list[dict[str, Any]]], output: Path, png_dir: Path | None = None
) -> list[str]:
    """Write the offline HTML report (and one PNG per chart into ``png_dir``); returns the chart names."""
    charts = build_charts(doc, tables)
    header = f"<div id='lltrace-summary'>{_headline(doc)}</div>"
    if doc.get("replay"):
        header += f"\n<div id='lltrace-replay'>{_replay_html(doc['replay'])}</div>"
    body = offline_page(charts, header, f"lltrace {doc['run']['id']}")
    output.write_text(body, encoding="utf-8")
    if png_dir is not None:
        import vl_convert as vlc

        png_dir.mkdir(parents=True, exist_ok=True)
        for name, chart in charts.items():
            (png_dir / f"{name}.png").write_bytes(vlc.vegalite_to_png(chart.to_json(), scale=2))
    return list(charts)

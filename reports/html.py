"""The run report: one self-contained HTML file (Vega bundles inlined, no network) and optional PNGs.

It draws what it is given: the analysis document (with the run's latest replay under ``replay``, when the
run was replayed) and the report views' rows (aggregated in SQL, so a million requests arrive here as a
few hundred rows). It computes nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lltrace.documents.analysis import Advice, AnalysisDocument, Classification, KvSection
from lltrace.documents.attribution import Attribution, RequestsSection
from lltrace.documents.base import given
from lltrace.documents.clients import ClientSummary
from lltrace.documents.replay import ReplayDocument
from lltrace.documents.rows import AttributionClientRow
from lltrace.documents.vocabulary import Component
from lltrace.reports.analysis_lines import cause_lines, engine_queue_note, speculative_line
from lltrace.reports.charts import build_charts
from lltrace.reports.labels import QUEUE_PARTS
from lltrace.reports.page import esc, offline_page
from lltrace.reports.replay_rows import (
    Case,
    hit_term,
    match_note,
    outside_change_note,
    replay_cases,
    replay_notes,
    scores,
    speed_change_note,
)
from lltrace.reports.terminal_clients import behind_note
from lltrace.reports.terminal_incidents import replayed_words


def _replay_html(rep: ReplayDocument) -> str:
    """The replay section: calibration, validation (its own error first), then measured / replayed / what-ifs."""
    c = rep.calibration
    fit = "" if c.step_mape is None else f", fit MAPE {c.step_mape:.0%}"
    parts = [
        "<h2>Replay</h2>",
        f"<p>Scheduler model calibrated from {esc(c.source)}: step = {c.c0_s * 1e3:.2f} ms + "
        f"{c.overhead_s * 1e3:.2f} ms overhead + {c.c_prefill_s_per_token * 1e6:.1f} µs per prefill token + "
        f"{c.c_decode_s_per_token * 1e6:.1f} µs per decode token{esc(hit_term(c))}{fit}.</p>",
    ]
    matched = match_note(c.decode_match, "The step cost (the terms above)")
    if matched:
        parts.append(f"<p>{esc(matched)}.</p>")
    parts += _validation_html(rep)
    rows = "".join(_case_row(r) for r in replay_cases(rep))
    notes = "".join(f"<li>{esc(case)}: {esc(note)}</li>" for case, note in replay_notes(rep))
    parts.append(
        "<p>Measured, replayed with the run's own settings, and each what-if (estimates):</p>"
        "<table><tr><th>case</th><th>basis</th><th>queue p50 s</th><th>TTFT mean s</th><th>e2e mean s</th>"
        f"<th>e2e p90 s</th><th>preemptions</th></tr>{rows}</table>"
    )
    if notes:
        parts.append(f"<ul class='notes'>{notes}</ul>")
    return "\n".join(parts)


def _validation_html(rep: ReplayDocument) -> list[str]:
    """The validation table (replayed against measured mean and p90, each MAPE) and its notes."""
    v = rep.validation
    if v is None:
        return ["<p>Validation: none — the run has no measured latencies to score against.</p>"]

    def cell(x: float | None, metric: str) -> str:
        text = "-" if x is None else (f"{x * 1e3:.2f} ms" if metric == "tpot_s" else f"{x:.3f} s")
        return f"<td>{text}</td>"

    def pct(x: Any, key: str) -> str:
        x = given(x)
        return f"<td data-key='{key}'>{'-' if x is None else f'{x:.1%}'}</td>"

    body = "".join(
        f"<tr><td>{s.metric}</td>{cell(s.replayed.mean, s.metric)}{cell(s.measured.mean, s.metric)}"
        f"{pct(s.mape.mean, 'replay.validation.' + s.metric.removesuffix('_s') + '_mean_mape')}"
        f"{cell(s.replayed.p90, s.metric)}{cell(s.measured.p90, s.metric)}"
        f"{pct(s.mape.p90, 'replay.validation.' + s.metric.removesuffix('_s') + '_p90_mape')}</tr>"
        for s in scores(v)
    )
    parts = [
        f"<p>Validation, before any what-if: {esc(v.method)}.</p>"
        "<table><tr><th>metric</th><th>replayed mean</th><th>measured mean</th><th>MAPE mean</th>"
        f"<th>replayed p90</th><th>measured p90</th><th>MAPE p90</th></tr>{body}</table>"
    ]
    if note := speed_change_note(rep):
        parts.append(f"<p data-key='replay.validation.speed_change'>{esc(note)}.</p>")
    if note := outside_change_note(rep):
        parts.append(f"<p data-key='replay.validation.outside_change'>{esc(note)}.</p>")
    if matched := match_note(given(v.decode_match), "The validation's step cost, fitted before the split,"):
        parts.append(f"<p>{esc(matched)}.</p>")
    return parts


def _case_row(r: Case) -> str:
    name = esc(r.case)
    key = re.sub(r"\W", "_", r.case)
    cells = [f"<td>{name}</td><td>{r.basis}</td>"]
    for k, v in (
        ("queue_p50_s", r.queue_p50_s),
        ("ttft_mean_s", r.ttft_mean_s),
        ("e2e_mean_s", r.e2e_mean_s),
        ("e2e_p90_s", r.e2e_p90_s),
        ("preemptions", r.preemptions),
    ):
        text = "-" if v is None else (f"{v:,.0f}" if k == "preemptions" else f"{v:.3f}")
        cells.append(f"<td data-key='replay.{key}.{k}'>{text}</td>")
    return f"<tr>{''.join(cells)}</tr>"


def _by_client(rows: list[AttributionClientRow]) -> str:
    """The attribution per client (load levels, clients run at once): means per request, ms."""

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v * 1e3:,.1f}"

    body = "".join(
        f"<tr><td>{esc(str(r.client_id))}</td><td>{r.requests:,}</td>"
        f"<td>{'-' if r.arrival_rate_per_s is None else format(r.arrival_rate_per_s, '.3g')}</td>"
        + "".join(f"<td>{ms(v)}</td>" for v in (r.e2e_s, r.e2e_p90_s, r.queue_s, r.prefill_s, r.decode_s, r.overhead_s))
        + "</tr>"
        for r in rows
    )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("client", "requests", "arrivals/s", "e2e", "e2e p90", "queue", "prefill", "decode", "overhead")
    )
    return f"<h3>By client (mean per request, ms)</h3><table><tr>{head}</tr>{body}</table>"


def _verdict(cls: Classification | None) -> list[str]:
    if cls is None:
        return []
    parts = [f"<p class='verdict'><b>{esc(cls.label)}</b>: {esc(cls.why)}</p>"]
    if cls.crossover_input_tokens:
        parts.append(
            f"<p>Crossover input length L* = <span data-key='crossover_input_tokens'>"
            f"{cls.crossover_input_tokens:,.0f}</span> tokens.</p>"
        )
    return parts


def _attribution(att: Attribution | None, kv: KvSection | None) -> list[str]:
    if att is None:
        return []
    rows = "".join(
        f"<tr><td>{c}</td><td data-key='attribution.{c}.total_s'>{att.component(c).total_s:,.3f}</td>"
        f"<td data-key='attribution.{c}.share'>{att.component(c).share:.1%}</td><td>{att.component(c).basis}</td></tr>"
        for c in Component
    )
    rows += "".join(
        f"<tr><td>&nbsp;&nbsp;of queue: {label}</td>"
        f"<td data-key='attribution.{key}.total_s'>{att.part(key).total_s:,.3f}</td>"
        f"<td data-key='attribution.{key}.share_of_parent'>{att.part(key).share_of_parent or 0:.1%}</td>"
        f"<td>{att.part(key).basis}</td></tr>"
        for key, label in QUEUE_PARTS
        if att.part(key).total_s is not None
    )
    parts = [f"<table><tr><th>component</th><th>total s</th><th>share</th><th>basis</th></tr>{rows}</table>"]
    unknown = [
        f"{label}: {given(att.part(key).note) or 'unknown'}"
        for key, label in QUEUE_PARTS
        if att.part(key).total_s is None
    ]
    if unknown and att.queue.total_s:
        parts.append(f"<p>Queue split, not known: {esc('; '.join(unknown))}.</p>")
    if att.by_client:
        parts.append(_by_client(att.by_client))
    if att.tail is not None:
        parts.append(f"<p data-key='attribution.tail.verdict'>{esc(att.tail.verdict)}</p>")
    preemptions = kv.preemptions if kv is not None else None
    if preemptions and not att.preempted.total_s and given(att.preempted.note):
        parts.append(f"<p>Preempted: {preemptions:,.0f} preemptions, {esc(att.preempted.note)}.</p>")
    return parts


def _excluded(req: RequestsSection | None) -> list[str]:
    parts = []
    for e in req.excluded if req is not None else []:  # the terminal's lines, word for word
        causes = "; ".join(cause_lines(e))
        said = f" ({esc(causes)})" if causes else ""
        parts.append(
            f"<p data-key='requests.excluded.{esc(e.outcome)}'>Left out of the figures: {e.requests:,} "
            f"{esc(e.outcome)}: {esc(e.why)}{said}.</p>"
        )
    return parts


def _kv(kv: KvSection | None) -> list[str]:
    if kv is None:
        return []
    parts = []
    if kv.preemptions is not None:
        parts.append(
            f"<p>KV cache: peak usage <span data-key='kv.peak_usage'>{kv.peak_usage:.1%}</span>, "
            f"<span data-key='kv.preemptions'>{kv.preemptions:,.0f}</span> preemptions.</p>"
        )
    if kv.prefix_cache_hit_rate is not None:
        parts.append(
            f"<p>Prefix cache: hit rate <span data-key='kv.prefix_cache_hit_rate'>"
            f"{kv.prefix_cache_hit_rate:.1%}</span> ({kv.prefix_cache_hit_tokens:,.0f} of "
            f"{kv.prefix_cache_queried_tokens:,.0f} queried tokens, "
            f"{esc(str(kv.prefix_cache_hit_basis))}).</p>"
        )
    if kv.prefix_cached_share is not None:
        parts.append(
            f"<p>Prompt tokens served from the prefix cache: <span data-key='kv.prefix_cached_share'>"
            f"{kv.prefix_cached_share:.1%}</span> ({esc(str(kv.prefix_cached_basis))}).</p>"
        )
    return parts


def _engine_notes(doc: AnalysisDocument) -> list[str]:
    parts = []
    if doc.speculative is not None:  # the terminal's line, word for word
        parts.append(f"<p data-key='speculative'>{esc(speculative_line(doc.speculative))}.</p>")
    if queue_note := engine_queue_note(doc):
        parts.append(f"<p data-key='engine_queue_causes'>{esc(queue_note)}.</p>")
    behind: dict[str, list[ClientSummary]] = {}
    for c in doc.client_summary:
        if c.sent_behind:
            behind.setdefault(str(Path(c.source).parent), []).append(c)
    parts += [f"<p>{esc(Path(k).name)}: {esc(behind_note(v))}.</p>" for k, v in behind.items()]
    return parts


def _advice(advice: list[Advice]) -> list[str]:
    if not advice:
        return []
    items = "".join(
        f"<li><b>{esc(a.bottleneck)}</b>"
        f"{' (' + esc(given(a.engine_setting) or a.setting) + ')' if a.setting else ''}: "
        f"{esc(a.action)} — "
        f"{esc(a.expected_gain.metric)} {a.expected_gain.from_:,.3f} → "
        f"{a.expected_gain.to:,.3f} {a.expected_gain.unit} <i>({esc(a.formula)})</i></li>"
        for a in advice
    )
    return [f"<h2>Advice</h2><ol>{items}</ol>"]


def _incident(doc: AnalysisDocument, charts: dict[str, Any]) -> list[str]:
    """The worst incident first: its sentence, its timeline chart (its div here, drawn by the page's script), and
    what to change for it."""
    if not doc.incidents:
        return []
    i = doc.incidents[0]
    parts = [f"<p class='verdict' id='lltrace-incident'><b>{esc(i.verdict)}</b></p>"]
    if "incident" in charts:
        parts.append("<div class='chart' id='chart-incident'></div>")
    items = "".join(
        f"<li><b>{esc(a.bottleneck)}</b> ({esc(a.engine_setting or a.setting or 'no engine setting')})"
        f": {esc(a.action)} — {esc(a.expected_gain.metric)} {a.expected_gain.from_:,.3f} → "
        f"{a.expected_gain.to:,.3f} {esc(a.expected_gain.unit)} (estimated; <i>{esc(a.formula)}</i>)"
        + ("" if a.replayed is None else f"<br>{esc(replayed_words(a.replayed))}: {esc(a.replayed.why)}")
        + "</li>"
        for a in i.advice
    )
    if items:
        parts.append(f"<h3>What to change for it</h3><ol>{items}</ol>")
    parts += [f"<p>Also: {esc(o.verdict)}</p>" for o in doc.incidents[1:]]
    return parts


def _headline(doc: AnalysisDocument, charts: dict[str, Any]) -> str:
    """The report's text: the incident first, then the verdict, where the time went, what was left out, the caches,
    and the advice."""
    parts = [f"<h1>lltrace report: {esc(doc.run.id)}</h1>"]
    parts += _incident(doc, charts)
    parts += _verdict(doc.classification)
    parts += _attribution(doc.attribution, doc.kv)
    parts += _excluded(doc.requests)
    parts += _kv(doc.kv)
    parts += _engine_notes(doc)
    parts += _advice(doc.advice)
    return "\n".join(parts)


def write_report(
    doc: AnalysisDocument,
    replay: ReplayDocument | None,
    tables: dict[str, list[dict[str, Any]]],
    output: Path,
    png_dir: Path | None = None,
) -> list[str]:
    """Write the offline HTML report of an analysis document, with the run's latest replay document where it was
    replayed (and one PNG per chart into ``png_dir``); returns the chart names."""
    charts = build_charts(doc, replay, tables)
    header = f"<div id='lltrace-summary'>{_headline(doc, charts)}</div>"
    if replay is not None:
        header += f"\n<div id='lltrace-replay'>{_replay_html(replay)}</div>"
    body = offline_page(charts, header, f"lltrace {doc.run.id}")
    output.write_text(body, encoding="utf-8")
    if png_dir is not None:
        import vl_convert as vlc

        png_dir.mkdir(parents=True, exist_ok=True)
        for name, chart in charts.items():
            (png_dir / f"{name}.png").write_bytes(vlc.vegalite_to_png(chart.to_json(), scale=2))
    return list(charts)

"""The other commands' terminal output: the diff table and verdict, the estimate line, an SQL result and the
formats list. They format what they are given; they compute nothing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from rich.console import Group
from rich.table import Table

from lltrace.documents.base import given
from lltrace.documents.diff import DiffDocument, Side
from lltrace.documents.estimate import EstimateDocument
from lltrace.documents.vocabulary import Component
from lltrace.documents.weekly import WeeklyDocument
from lltrace.reports.console import Text
from lltrace.reports.labels import QUEUE_PARTS
from lltrace.reports.numbers import pct, whole, window_label

_PART_LABEL = dict(QUEUE_PARTS)


def diff_table(doc: DiffDocument) -> Group:
    """The diff document: each component's mean per request in both runs, the change, and the verdict."""
    if doc.basis in ("profiler steps", "engine log steps"):
        return _profiler_diff_table(doc)
    t = Table(
        title=f"{_side(doc.baseline)} → {_side(doc.incident)} (mean per request"
        f"{', on the baseline mix' if doc.mix.normalised else ''}"
        f"{', from the engine histograms' if doc.basis == 'engine histograms' else ''})"
    )
    for col in ("component", "baseline s", "incident s", "delta s", "share of change"):
        t.add_column(col, justify="left" if col == "component" else "right")
    for c, v in doc.components.items():
        share = "-" if v.share_of_change is None else f"{v.share_of_change:.0%}"
        t.add_row(
            f"  of queue: {_PART_LABEL[c]}" if c in _PART_LABEL else c,
            *("-" if x is None else f"{x:.3f}" for x in (v.baseline_s, v.incident_s)),
            "-" if v.delta_s is None else f"{v.delta_s:+.3f}",
            share,
        )
    lines = [Text(doc.verdict)]
    preempted = doc.components.get(Component.PREEMPTED)
    if preempted is not None and given(preempted.note):
        counts = " → ".join(whole(side.preemptions) for side in (doc.baseline, doc.incident))
        lines.append(Text(f"preempted: {counts} preemptions, {preempted.note}"))
    return Group(t, *lines)


def _ms(v: float | None, f: str = ",.2f") -> str:
    return "-" if v is None else f"{v * 1e3:{f}}"


def _pair(before: Any, after: Any, fmt: Any) -> str:
    return f"{fmt(given(before))} → {fmt(given(after))}"


def _profiler_diff_table(doc: DiffDocument) -> Group:
    """The diff of two runs known from their steps alone (profiler traces, or server logs with every step): their
    steps kind by kind, and GPU time per step by kernel class."""
    whose = "the engine logs'" if doc.basis == "engine log steps" else "the profiler's"
    t = Table(title=f"{_side(doc.baseline)} → {_side(doc.incident)} ({whose} steps, kind by kind)")
    for col in (
        "kind",
        "steps",
        "baseline ms",
        "incident ms",
        "delta ms",
        "tokens / step",
        "ms / token",
        "GPU busy ms",
    ):
        t.add_column(col, justify="left" if col == "kind" else "right")
    for kind, v in doc.components.items():
        t.add_row(
            kind,
            _pair(v.baseline_steps, v.incident_steps, whole),
            _ms(v.baseline_s),
            _ms(v.incident_s),
            "-" if v.delta_s is None else f"{v.delta_s * 1e3:+,.2f}",
            _pair(v.baseline_tokens_per_step, v.incident_tokens_per_step, lambda x: "-" if x is None else f"{x:,.1f}"),
            _pair(v.baseline_s_per_token, v.incident_s_per_token, lambda x: _ms(x, ",.3f")),
            _pair(v.baseline_gpu_busy_s, v.incident_gpu_busy_s, _ms),
        )
    parts: list[Table | Text] = [t]
    classes = given(doc.kernel_classes)
    if classes:
        g = Table(title="GPU time per traced step, by kernel class")
        for col in ("kernel class", "baseline ms", "incident ms", "delta ms"):
            g.add_column(col, justify="left" if col == "kernel class" else "right")
        for c, v in classes.items():
            g.add_row(
                c, _ms(v.baseline_s_per_step, ",.3f"), _ms(v.incident_s_per_step, ",.3f"), _ms(v.delta_s, "+,.3f")
            )
        parts.append(g)
    parts.append(Text(doc.verdict))
    return Group(*parts)


def _side(side: Side) -> str:
    """A diff side: its run, and its window where it has one (UTC)."""
    if not side.window:
        return side.run

    def at(t: float | None) -> str:
        if t is None:
            return ""
        return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S") if t > 1e9 else f"{t:g} s"

    return f"{side.run} [{at(side.window[0])} – {at(side.window[1])})"


def estimate_line(doc: EstimateDocument) -> Text:
    """The estimate document in one line."""
    return Text(
        f"prefill {doc.prefill_s * 1e3:,.1f} ms ({doc.prefill_share:.0%}) at "
        f"{doc.prefill_tokens_per_s:,.0f} tok/s · decode {doc.decode_s * 1e3:,.1f} ms "
        f"({doc.decode_share:.0%}) at {doc.decode_s_per_token * 1e3:,.2f} ms/token · crossover "
        f"input length {doc.crossover_input_tokens:,.0f} tokens (estimates)"
    )


def sql_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    """An SQL result as a table (NULL shown as NULL)."""
    t = Table()
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*("NULL" if v is None else str(v) for v in r))
    return t


def formats_text(formats: Sequence[Any]) -> Group:
    """The formats lltrace reads (``lltrace.parsers.FORMATS`` entries), with what each can attribute."""
    parts: list[Text] = []
    for f in formats:
        head = Text()
        head.append(f.name, style="bold")
        head.append(f" ({f.family})")
        parts += [
            head,
            Text(f"  reads: {f.description}"),
            Text(f"  tables: {', '.join(f.tables)}"),
            Text(f"  can attribute: {f.attributes}"),
        ]
        parts += [Text(f"  version: {v}") for v in f.versions]
    return Group(*parts)


def weekly_table(doc: WeeklyDocument) -> Group:
    """The weekly document on the terminal, one row per window: its traffic (the verdict, request count and median
    lengths), tail latency and KV pressure, then what changed between windows. The HTML report draws these and the
    rest (prefill share, p50s) as charts."""
    by_requests = doc.figures == "requests"
    t = Table(
        title=f"{len(doc.windows)} windows of one {doc.window} (UTC; latencies in s; traffic classified by "
        f"{doc.classification_basis}{'' if by_requests else '; engine histograms: estimates within a bucket'})"
    )
    heads = ["window", "requests", "traffic", "in/out p50", "TTFT p90", "e2e p90", "queue", "KV peak", "preempted"]
    failures = any(given(w.failed) for w in doc.windows)
    if failures:  # a column only where some window had failures
        heads.insert(2, "failed")
    labels = max((len(w.label or "-") for w in doc.windows), default=7)
    for col in heads:
        t.add_column(
            col,
            justify="left" if col in ("window", "traffic") else "right",
            no_wrap=col == "window",
            min_width=labels if col == "traffic" else None,
        )

    def num(v: Any, fmt: str) -> str:
        v = given(v)
        return "-" if v is None else f"{v:{fmt}}"

    for w in doc.windows:
        t.add_row(
            window_label(w.window_start_s),
            whole(w.requests),
            *([whole(given(w.failed))] if failures else []),
            w.label or "-",
            f"{num(w.input_p50, ',.0f')}/{num(w.output_p50, ',.0f')}",
            num(w.ttft_p90, ",.3f"),
            num(w.e2e_p90, ",.3f"),
            pct(given(w.queue_share)),
            pct(given(w.peak_kv_usage)),
            whole(given(w.preemptions)),
        )
    changes = [(window_label(w.window_start_s), "; ".join(w.changes)) for w in doc.windows if w.changes]
    lines = [Text("What changed: " + ("" if changes else "nothing beyond the thresholds"))]
    lines += [Text(f"  {when}: {what}") for when, what in changes]
    found = [(window_label(w.window_start_s), i) for w in doc.windows for i in w.incidents]
    first = [Text(f"Incidents: {len(found)}", style="bold red")] if found else []
    first += [Text(f"  {when} · run {i.run}: {i.verdict}") for when, i in found]
    return Group(*first, t, *lines)

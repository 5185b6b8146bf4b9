"""The answer on the terminal: the verdict, where the time went (with the parts of queueing, by client and for the
slowest tenth), the advice with its expected gain, and the workload. One renderer per section of the analysis
document, each taking that section's type. It formats; it computes nothing."""

from __future__ import annotations

from typing import Any

from rich.panel import Panel
from rich.table import Table

from lltrace.documents.analysis import Advice, Classification, Gain, KvSection
from lltrace.documents.attribution import Attribution, Tail
from lltrace.documents.base import given
from lltrace.documents.rows import AttributionClientRow, WorkloadMixRow
from lltrace.documents.vocabulary import Component
from lltrace.reports.console import Text
from lltrace.reports.labels import QUEUE_PARTS
from lltrace.reports.numbers import count_noun, pct, per_s, whole


def verdict_panel(cls: Classification) -> Panel:
    """The run's label and why, with the crossover prompt length where the run measures it."""
    head = Text()
    head.append(f"{cls.label}", style="bold red" if cls.label.endswith("bound") else "bold")
    head.append(f": {cls.why}")
    if cls.crossover_input_tokens:
        head.append(
            f"\nCrossover input length L* = {cls.crossover_input_tokens:,.0f} tokens "
            "(prompts longer than this spend more time in prefill than in decode)"
        )
    return Panel(head, title="Verdict", expand=False)


def attribution_parts(att: Attribution, kv: KvSection | None) -> list[Any]:
    """Where the time went: the components and the parts of queueing, what is not known of them, the run's rates,
    and the tables by client and for the slowest tenth."""
    t = Table(title=f"Where the time went ({att.requests:,} requests, summed end-to-end {att.e2e_s_total:,.2f} s)")
    for col in ("component", "total s", "share", "basis"):
        t.add_column(col, justify="left" if col in ("component", "basis") else "right")
    for c in Component:
        row = att.component(c)
        t.add_row(c.value, f"{row.total_s:,.3f}", pct(row.share), row.basis or "-")
    unknown = []
    for part, label in QUEUE_PARTS:
        share = att.part(part)
        if share.total_s is None:
            unknown.append(f"{label}: {given(share.note) or 'unknown'}")
            continue
        t.add_row(f"  of queue: {label}", f"{share.total_s:,.3f}", pct(share.share_of_parent), share.basis)
    parts: list[Any] = [t]
    split = any(att.part(p).total_s is not None for p, _ in QUEUE_PARTS)
    if unknown and att.queue.total_s and not split:  # one reason for all: no request placed
        parts.append(Text(f"queue split, not known: {given(att.load_wait.note) or 'unknown'}"))
    elif unknown and att.queue.total_s:
        parts.append(Text("queue split, not known: " + "; ".join(unknown)))
    preemptions = kv.preemptions if kv is not None else None
    if preemptions and not att.preempted.total_s and given(att.preempted.note):
        parts.append(Text(f"preempted: {whole(preemptions)} preemptions, {att.preempted.note}"))
    if rates := _rates(att):
        parts.append(Text(rates))
    if att.by_client:
        parts.append(client_attribution_table(att.by_client))
    if att.tail is not None:
        parts.append(tail_table(att.tail))
    return parts


def _rates(att: Attribution) -> str:
    rates = []
    if att.prefill_tokens_per_s:
        basis = att.prefill.basis or "measured"  # an estimated prefill: an estimated rate
        rate = f"{basis} prefill rate {att.prefill_tokens_per_s:,.0f} tok/s"
        if att.prefill_cached_tokens and att.prefill_computed_tokens_per_s:
            rate += (
                f" of prompt tokens ({att.prefill_computed_tokens_per_s:,.0f} tok/s of those computed: "
                f"{att.prefill_cached_tokens:,.0f} came from the prefix cache)"
            )
        rates.append(rate)
    if att.decode_s_per_token:
        rates.append(f"decode {att.decode_s_per_token * 1e3:,.2f} ms/token")
    if att.clock_errors:
        rates.append(f"{att.clock_errors} requests with negative overhead (clock misalignment)")
    return " · ".join(rates)


def _ms1(v: float | None, f: str = ",.1f") -> str:
    return "-" if v is None else f"{v * 1e3:{f}}"


def client_attribution_table(rows: list[AttributionClientRow]) -> Table:
    """The run's attribution per client (a sweep's load levels, clients run at once), as means per request in ms, in
    the order the clients began."""
    t = Table(title="By client (mean per request, ms)")
    cols = ("client", "requests", "arrivals/s", "in/out tok", "e2e", "e2e p90", "queue", "prefill", "decode")
    for col in (*cols, "overhead"):
        t.add_column(col, justify="left" if col == "client" else "right", no_wrap=col in ("client", "in/out tok"))
    for r in rows:
        rate = r.arrival_rate_per_s
        t.add_row(
            str(r.client_id),
            whole(r.requests),
            "-" if rate is None else f"{rate:.3g}",
            f"{r.mean_input_tokens:,.0f} / {r.mean_output_tokens:,.0f}",
            *(_ms1(v) for v in (r.e2e_s, r.e2e_p90_s, r.queue_s, r.prefill_s, r.decode_s, r.overhead_s)),
        )
    return t


def tail_table(tail: Tail) -> Any:
    """The slowest tenth of the requests against the rest: means per request in ms, their sizes, and the sentence
    on what makes the gap."""
    from rich.console import Group

    t = Table(title="The slowest 10% against the rest (mean per request, ms)")
    cols = ("requests", "e2e", "queue", "prefill", "decode", "preempted", "overhead", "in/out tok", "ms/token")
    for col in ("", *cols):
        t.add_column(col, justify="left" if not col else "right", no_wrap=col in ("", "in/out tok"))
    for label, r in (("slowest 10%", tail.slowest), ("rest", tail.rest)):
        known = r.mean_input_tokens is not None and r.mean_output_tokens is not None
        sizes = f"{r.mean_input_tokens:,.0f} / {r.mean_output_tokens:,.0f}" if known else "-"
        t.add_row(
            label,
            whole(r.requests),
            *(_ms1(v) for v in (r.e2e_s, r.queue_s, r.prefill_s, r.decode_s, r.preempted_s, r.overhead_s)),
            sizes,
            _ms1(r.decode_s_per_token, ",.2f"),
        )
    return Group(t, Text(tail.verdict))


def advice_table(advice: list[Advice]) -> Table:
    """The advice, most valuable first (at most five), each with the setting it changes and its expected gain."""
    t = Table(title="Advice (most valuable first)")
    for col in ("bottleneck", "setting", "action", "expected gain"):
        t.add_column(col)
    for a in advice[:5]:
        g = a.expected_gain
        t.add_row(
            a.bottleneck.value,
            given(a.engine_setting) or a.setting or "-",
            a.action,
            f"{g.metric}: {gain_figures(g)}\n({a.formula})",
        )
    return t


def gain_figures(g: Gain) -> str:
    """An expected gain's from -> to, in milliseconds where both are times under a second (a decode step's 9.70 ms
    would read 0.010 s, and its best case 0.000 s)."""
    if g.unit == "s" and max(abs(g.from_), abs(g.to)) < 1:
        return f"{g.from_ * 1e3:,.2f} -> {g.to * 1e3:,.2f} ms"
    return f"{g.from_:,.3f} -> {g.to:,.3f} {g.unit}"


def workload_line(mix: WorkloadMixRow) -> Text:
    """The request mix in one line: sizes, arrival rate, throughput, prefix reuse and concurrency."""
    line = f"Workload: {count_noun(mix.requests, 'request')}"
    if mix.sized:
        some = "" if mix.sized == mix.requests else f" (of the {mix.sized:,} with sizes)"
        line += (
            f" · prompt p50 {whole(mix.input_p50)} / p90 {whole(mix.input_p90)} tokens · output p50 "
            f"{whole(mix.output_p50)} / p90 {whole(mix.output_p90)} tokens{some}"
        )
    line += "" if mix.sized else " (their sizes not given)"
    if mix.rate_per_s:
        line += f" · arriving {per_s(mix.rate_per_s)} req/s"
    elif mix.arrival_resolution_s and mix.span_s is not None:
        line += f" · arrivals over {mix.span_s:,g} s, stamped to {mix.arrival_resolution_s:g} s: no rate"
    if mix.throughput_per_s:
        line += f" · finished {per_s(mix.throughput_per_s)} req/s over {mix.window_s:,.1f} s"
    if mix.prefix_reuse is not None:
        line += f" · prefix blocks reused {pct(mix.prefix_reuse)}"
    if mix.mean_concurrency:
        line += f" · mean in flight {mix.mean_concurrency:,.2f}"
    if mix.peak_concurrency:
        line += f" · peak {whole(mix.peak_concurrency)}"
    return Text(line)

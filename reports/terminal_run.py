"""The run's inventory on the terminal (the ``run`` section): its files and what each gave, the files skipped, the
checks its values broke, how its clocks were aligned and its client records joined, and its GPU and model. It
formats; it computes nothing."""

from __future__ import annotations

from rich.panel import Panel

from lltrace.documents.base import UNSET, given
from lltrace.documents.run import Checks, ClockAlignment, Join, JoinedClient, RunSection, Skipped, Source
from lltrace.documents.vocabulary import SUSPECT_SKIPS, SkipReason
from lltrace.reports.console import Text
from lltrace.reports.numbers import count_noun, whole


def sources_panel(run: RunSection) -> Panel:
    """The run's inventory in short: one line per format (files, events, what was dropped, warnings), then what
    needs a look (warnings, files skipped, broken checks); each file, the clocks and the joins are ``--verbose``'s."""
    head = Text()
    head.append(f"run {run.id}\n", style="bold")
    by_format: dict[str, list[Source]] = {}
    for s in run.sources:
        by_format.setdefault(s.format, []).append(s)
    for fmt, group in by_format.items():
        events = sum(g.records or 0 for g in group)
        dropped = sum(sum((g.dropped or {}).values()) for g in group)
        warned = sum(len(g.warnings) for g in group)
        line = f"  {fmt}: {count_noun(len(group), 'file')}, {count_noun(events, 'event')}"
        if dropped:
            line += f", {dropped:,} dropped"
        if warned:
            line += f", {count_noun(warned, 'warning')}"
        head.append(line + "\n", style="yellow" if warned else None)
        for g in group:
            for w in g.warnings:
                head.append(f"    warning: {g.path}: {w}\n", style="yellow")
    _skipped(head, run.skipped)
    _checks(head, run.checks)
    head.append(_gpu_model(run) + "\n")
    head.append("  (each file, the clocks and the joins: --verbose)", style="dim")
    return Panel(head, title="Sources", expand=False)


def _gpu_model(run: RunSection) -> str:
    gpu, model, seen = run.gpu, run.model, run.gpu_not_in_catalog
    named = f" ({seen.origin or 'named'}: {seen.name}, not in lltrace's GPU catalog)" if seen else ""
    return (
        f"  GPU: {gpu.name + ' (' + str(gpu.origin) + ')' if gpu else 'unknown'}{named}"
        f" · model: {model.name if model else 'unknown'}"
    )


def run_panel(run: RunSection) -> Panel:
    """The run's inventory as one panel, file by file."""
    head = Text()
    head.append(f"run {run.id}\n", style="bold")
    _sources(head, run.sources)
    _skipped(head, run.skipped)
    _checks(head, run.checks)
    _clocks(head, run.clock_alignment)
    _joins(head, run.join)
    head.append(_gpu_model(run))
    return Panel(head, title="lltrace analyze", expand=False)


def _sources(head: Text, sources: list[Source]) -> None:
    for group in source_groups(sources):
        s = group[0]
        dropped = ", ".join(f"{k} {v:,}" for k, v in (s.dropped or {}).items()) or "none"
        last = str(group[-1].path).rpartition("/")[2]
        where = s.path if len(group) == 1 else f"{s.path} … {last} ({len(group):,} files)"
        records = sum(g.records or 0 for g in group) if any(g.records for g in group) else None
        head.append(
            f"  {where}\n    {s.format} · {s.version or 'version unknown'} · "
            f"{count_noun(records, 'event')} · dropped: {dropped}\n"
        )
        for w in s.warnings:
            head.append(f"    warning: {w}\n", style="yellow")


def _skipped(head: Text, skipped: list[Skipped]) -> None:
    """Files not read: a file that cannot be read, or that nearly sniffs as a format of the run, may be a damaged
    part of it (a warning); a file a tool writes beside the ones read says what it is; the rest are counted."""
    kinds = [SkipReason.UNKNOWN if k.kind is UNSET else k.kind for k in skipped]
    suspect = [k for k, kind in zip(skipped, kinds, strict=True) if kind in SUSPECT_SKIPS]
    known = [k for k, kind in zip(skipped, kinds, strict=True) if kind not in (*SUSPECT_SKIPS, SkipReason.UNKNOWN)]
    other = len(skipped) - len(suspect) - len(known)
    if other:
        head.append(f"  skipped {other} file(s) of no known format\n", style="yellow")
    for k in known:
        head.append(f"  skipped {k.path}: {k.reason}\n", style="dim")
    for k in suspect:
        head.append(f"  warning: skipped {k.path}: {k.reason} (a damaged part of the run?)\n", style="yellow")


def _checks(head: Text, checks: Checks | None) -> None:
    if checks is None or not checks.violations:
        return
    head.append(
        f"  physical checks: {len(checks.violations)} broken of {checks.rules_checked:,} checked; "
        "those values are NULL:\n",
        style="yellow",
    )
    for v in checks.violations[:8]:
        head.append(
            f"    {v.table}.{'/'.join(v.columns)} {v.rule}: {v.rows:,} rows"
            + (f" ({v.source})" if v.source else "")
            + "\n",
            style="yellow",
        )


def _clocks(head: Text, alignment: list[ClockAlignment]) -> None:
    for a in alignment:
        if a.residual_median_s is not UNSET:
            head.append(
                f"  clock: {a.source} aligned to the engine's spans by {a.offset_s:+,.3f} s "
                f"(residual median {a.residual_median_s * 1e3:,.2f} ms, p90 "
                f"{a.residual_p90_s * 1e3:,.2f} ms over {a.matched_events:,} requests)\n"
            )
        elif a.source == "server log":
            head.append(f"  clock: server log — {a.method}; zone {a.zone}\n")


_HOW = {
    "features": "on what both saw (send/arrival, first and last token, token counts)",
    "order": "in the order it sent them (no send times: aligned with the engine's arrivals on TTFT, e2e, sizes)",
}


def _client_line(c: JoinedClient) -> str:
    how = (
        f"by request id ({given(c.prefix_from)})" if c.method == "request_id" else _HOW.get(str(c.method), "not joined")
    )
    line = f"  join: {c.client_id}: {whole(c.matched)} of {whole(c.requests)} {how}"
    if c.ties:
        line += f" · {whole(c.ties)} tied (indistinguishable: same sizes and times)"
    if c.output_token_mismatches:
        line += (
            f" · the client counted other output tokens than the engine for {whole(c.output_token_mismatches)}"
            " (its own count in its summary; the engine's in requests)"
        )
    if c.unmatched:
        line += f" · {whole(c.unmatched)} unmatched ({given(c.unmatched_why) or 'no engine record'})"
    if c.not_counted:
        line += (
            f" · {whole(c.not_counted)} of them not counted: no send time places them beside the engine's "
            "records without a client record, which may be the same requests"
        )
    return line


def _joins(head: Text, join: Join | None) -> None:
    if join is None:
        return
    for c in join.clients:
        head.append(_client_line(c) + "\n", style="yellow" if c.unmatched else None)
    if join.features is not None:
        res = join.features.residuals
        shown = [
            f"{name} {r.median * 1e3:,.2f} / {r.p90 * 1e3:,.2f} ms"
            for r, name in ((res.arrival, "arrival"), (res.first_token, "first token"), (res.last_token, "last token"))
            if r is not UNSET
        ]
        if shown:
            head.append(f"  join residuals (median / p90): {', '.join(shown)}\n")
    if join.unmatched_spans:
        head.append(
            f"  join: {whole(join.unmatched_spans)} engine records with no client record (their own rows)\n",
            style="yellow",
        )


def source_groups(sources: list[Source]) -> list[list[Source]]:
    """The run's sources in order, consecutive ones of one folder, format and version that dropped nothing and
    warned of nothing (a Prometheus scrape every 15 s, for an hour) together: three or more are one entry."""

    def key(s: Source) -> tuple | None:
        if s.dropped or s.warnings:
            return None
        return (str(s.path).rpartition("/")[0], s.format, s.version)

    groups: list[list[Source]] = []
    for s in sources:
        if groups and key(s) is not None and key(s) == key(groups[-1][-1]):
            groups[-1].append(s)
        else:
            groups.append([s])
    return [g for group in groups for g in ([group] if len(group) >= 3 else [[s] for s in group])]

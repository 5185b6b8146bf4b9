"""The terminal summary of an analysis document (rich): the document's sections in the order a reader acts on
them, each drawn by the renderer of its type. It formats; it computes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console, Group

from lltrace.documents.analysis import AnalysisDocument
from lltrace.reports.analysis_lines import engine_queue_note, kv_lines
from lltrace.reports.console import SafeConsole, Text
from lltrace.reports.terminal_clients import client_tables
from lltrace.reports.terminal_engine import histogram_lines, quantiles_table, replicas_table, timeline_table
from lltrace.reports.terminal_incidents import incident_parts
from lltrace.reports.terminal_run import run_panel, sources_panel
from lltrace.reports.terminal_steps import profile_parts, requests_parts, steps_parts
from lltrace.reports.terminal_verdict import advice_table, attribution_parts, verdict_panel, workload_line

NOTHING = (
    "Nothing measured in these sources: no requests, engine steps or statistics, profiler events or client "
    "summaries (a configuration, or an empty file). Give them beside the run's measurements."
)


def _incidents(doc: AnalysisDocument) -> list[Any]:
    return incident_parts(doc.incidents, doc.incident_timeline)


def _verdict(doc: AnalysisDocument) -> list[Any]:
    return [verdict_panel(doc.classification)] if doc.classification is not None else []


def _attribution(doc: AnalysisDocument) -> list[Any]:
    return attribution_parts(doc.attribution, doc.kv) if doc.attribution is not None else []


def _kv(doc: AnalysisDocument) -> list[Any]:
    lines = kv_lines(doc.kv, doc.speculative)
    return [Text(lines)] if lines else []


def _advice(doc: AnalysisDocument) -> list[Any]:
    return [advice_table(doc.advice)] if doc.advice else []


def _workload(doc: AnalysisDocument) -> list[Any]:
    return [workload_line(doc.workload)] if doc.workload is not None else []


def _clients(doc: AnalysisDocument) -> list[Any]:
    return client_tables(doc.client_summary, per_request=bool(doc.requests and doc.requests.count))


def _engine(doc: AnalysisDocument) -> list[Any]:
    parts: list[Any] = histogram_lines(doc.engine_latency) if doc.engine_latency is not None else []
    if note := engine_queue_note(doc):
        parts.append(Text(note))
    timeline = doc.engine_timeline
    if timeline is not None and len(timeline.windows) > 1 and doc.attribution is None:
        parts.append(timeline_table(timeline))
    if len(doc.replicas) > 1:
        parts.append(replicas_table(doc.replicas))
    if quantiles := [q for q in doc.engine_quantiles if q.observations]:
        parts.append(quantiles_table(quantiles))
    return parts


def _requests(doc: AnalysisDocument) -> list[Any]:
    return requests_parts(doc.requests) if doc.requests is not None else []


def _steps(doc: AnalysisDocument) -> list[Any]:
    return steps_parts(doc.steps, doc.speculative) if doc.steps is not None else []


def _profile(doc: AnalysisDocument) -> list[Any]:
    return profile_parts(doc.profile) if doc.profile is not None else []


SECTIONS: tuple[Callable[[AnalysisDocument], list[Any]], ...] = (
    _incidents,
    _verdict,
    _attribution,
    _advice,
    _kv,
    _workload,
    _requests,
    _engine,
    _clients,
    _steps,
    _profile,
)
"""The summary's sections in the order a reader acts on them: the incident (when, to whom, why, what to change for
it), the whole run's verdict, where the time went, what to change,
then the figures behind them; the run's inventory (its files, joins and clocks) comes last."""


def _heading(doc: AnalysisDocument) -> Text:
    """One line before the answer: the run, and what its inventory at the end holds."""
    run = doc.run
    warned = sum(1 for s in run.sources if s.warnings)
    said = [f"{len(run.sources):,} file{'s' if len(run.sources) != 1 else ''} read"]
    if warned:
        said.append(f"{warned:,} with warnings")
    if run.skipped:
        said.append(f"{len(run.skipped):,} skipped")
    if run.checks is not None and run.checks.violations:
        said.append(f"{len(run.checks.violations):,} broken checks")
    return Text(f"run {run.id}: {', '.join(said)} (listed at the end)", style="bold")


def render(doc: AnalysisDocument, verbose: bool = False) -> Group:
    """The renderables of the summary of an analysis document; the run's inventory at the end one line per format,
    or file by file with ``verbose``."""
    parts = [part for section in SECTIONS for part in section(doc)]
    if not parts:  # nothing these sources measured
        parts.append(Text(NOTHING, style="yellow"))
    return Group(_heading(doc), *parts, run_panel(doc.run) if verbose else sources_panel(doc.run))


def print_summary(doc: AnalysisDocument, console: Console | None = None, verbose: bool = False) -> None:
    """Print the summary to the console (stdout by default)."""
    (console or SafeConsole()).print(render(doc, verbose))

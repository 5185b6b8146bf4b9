"""The benchmark clients' own summaries (the document's ``client_summary``) as the terminal shows them, and the
model server's side of a sweep where the client summarised it (inference-perf). It formats; it computes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from lltrace.documents.base import given
from lltrace.documents.clients import ClientSummary, Stats
from lltrace.parsers.inference_perf import SERVER
from lltrace.reports.console import Text
from lltrace.reports.numbers import ms, pct, per_s, whole


def client_tables(summaries: list[ClientSummary], per_request: bool) -> list[Any]:
    """The clients' own summaries (the document's ``client_summary``), one table per source: one line per
    result the client wrote (e.g. each rate of a sweep), the figures as the tool computed them."""
    out: list[Any] = []
    by_source: dict[str, list[ClientSummary]] = {}
    for c in summaries:
        # a sweep written as one report per stage (inference-perf) is one table: the folder's
        key = str(Path(c.source).parent) + "/" if c.tool.startswith("inference-perf") else c.source
        by_source.setdefault(key, []).append(c)
    for source, items in by_source.items():
        if any(given(c.server) for c in items):
            server = [_server_table(Path(source).name, items), *_server_notes(items)]
        else:
            server = []
        items = [c for c in items if c.tool != SERVER]  # a server report given without its client's
        if not items:
            out += server
            continue
        out.append(_client_table(source, items))
        behind = [c for c in items if c.sent_behind]
        if behind:
            out.append(Text(behind_note(behind)))
        for c in items:
            if c.goodput_slos:
                slos = ", ".join(f"{k} <= {v:g}" for k, v in c.goodput_slos.items())
                out.append(Text(f"goodput: the requests that met {slos} (the client's SLOs, in its display units)"))
        out += server
    if summaries and not per_request:
        named = list(dict.fromkeys(PER_REQUEST_OUTPUT[c.tool] for c in summaries if c.tool in PER_REQUEST_OUTPUT))
        out.append(
            Text(
                "Summary only: no per-request rows, so no attribution. Re-run the client with per-request output "
                f"({'; '.join(named) or ', '.join(dict.fromkeys(PER_REQUEST_OUTPUT.values()))}) and add the engine's "
                "spans or logs.",
                style="dim",
            )
        )
    return out


def _client_row(c: ClientSummary, goodput: bool) -> tuple[str, ...]:
    """One result a client wrote, as its table's cells (its own figures, ms)."""
    rate = c.requested_rate_per_s
    return (
        "-" if rate is None else str(rate) if isinstance(rate, str) else f"{rate:g}",  # "inf": all at once
        "-" if c.achieved_rate_per_s is None else per_s(c.achieved_rate_per_s),
        *(("-" if c.goodput_per_s is None else per_s(c.goodput_per_s),) if goodput else ()),
        "-"
        if c.mean_input_tokens is None or c.mean_output_tokens is None
        else f"{c.mean_input_tokens:,.0f} / {c.mean_output_tokens:,.0f}",
        whole(c.completed),
        whole(c.failed),
        _median(c.ttft_s),
        ms(c.ttft_s.p99) if c.ttft_s else "-",
        _median(c.tpot_s),
        _median(c.itl_s),
        _median(c.e2e_s),
        whole(c.output_tokens_per_s),
    )


def _client_table(source: str, items: list[ClientSummary]) -> Table:
    """One client's summaries as a table, a line per result (a stage of a sweep); a figure no line has is left out,
    so that the others fit the terminal."""
    t = Table(title=f"{Path(source).name}: the benchmark client's own summary ({items[0].tool}, as reported; ms)")
    staged = any(c.stage is not None for c in items)
    goodput = any(c.goodput_per_s is not None for c in items)  # only where the client had SLOs
    cols = (
        "req/s",
        "got/s",
        *(("goodput/s",) if goodput else ()),
        "in/out tok",
        "done",
        "failed",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "ITL p50",
        "e2e p50",
        "out tok/s",
    )
    rows = [_client_row(c, goodput) for c in items]
    shown = [i for i in range(len(cols)) if any(r[i] != "-" for r in rows)]
    if staged:  # as wide as its longest label ("concurrent@16"), never cut
        t.add_column("stage", justify="right", no_wrap=True, min_width=max(len(str(c.stage)) for c in items))
    for i in shown:  # a header on two lines, a figure on one: cut only where the terminal is too narrow
        t.add_column(cols[i].replace(" ", "\n", 1), justify="right", no_wrap=True)
    for c, r in zip(items, rows, strict=True):
        t.add_row(*([str(c.stage)] if staged else []), *(r[i] for i in shown))
    return t


# where each client that writes a summary keeps its per-request records (its own option or file), by format
PER_REQUEST_OUTPUT = {
    "vllm-bench": "vllm bench serve --save-result --save-detailed",
    "vllm-bench-client-log": "vllm bench serve --save-result --save-detailed",
    "sglang-bench": "SGLang's bench_serving --output-details",
    "sglang-bench-log": "SGLang's bench_serving --output-details",
    "llmperf-summary": "LLMPerf's individual_responses file, written beside its summary",
    "trtllm-bench-report": "trtllm-bench --request_json",
    "inference-perf-lifecycle": "inference-perf's report.request_lifecycle.per_request: true",
    SERVER: "inference-perf's report.request_lifecycle.per_request: true",
    "aiperf-summary": "AIPerf's profile_export.jsonl, written beside its summary",
    "aiperf-summary-csv": "AIPerf's profile_export.jsonl, written beside its summary",
    "guidellm-csv": "guidellm's benchmarks.json (its requests), written beside the CSV",
}


def behind_note(items: list[ClientSummary]) -> str:
    """The stages of one client that sent slower than asked (``sent_behind``): how much, and how late its requests
    left (the terminal and the report say it alike)."""

    def span(vals: list[str]) -> str:
        return vals[0] if vals[0] == vals[-1] else f"{vals[0]}-{vals[-1]}"

    sent = span(sorted((per_s(c.achieved_rate_per_s) for c in items), key=lambda v: float(v.replace(",", ""))))
    asked = span([f"{r:g}" for r in sorted(c.requested_rate_per_s for c in items)])
    delays = sorted(c.send_delay_s.median for c in items if c.send_delay_s and c.send_delay_s.median)
    late = span([ms(d) for d in delays])
    waited = f"; its requests left a median {late} ms after their scheduled time (its schedule_delay)" if delays else ""
    stages = ", ".join(str(c.stage) for c in items)
    return (
        f"stage {stages}: the client sent {sent} req/s of the {asked} asked{waited}: time spent in the client, "
        "which the client's latencies leave out"
    )


def _server_table(name: str, items: list[ClientSummary]) -> Table:
    """The model server's side of each stage, as the client summarised the server's Prometheus metrics over it
    (inference-perf's ``stage_N_prometheus_metrics.json``): the queue and load behind the client's latencies."""
    t = Table(
        title=f"{name}: the model server over each stage (its Prometheus metrics as the client summarised them; ms)"
    )
    cols = ("stage", "requests", "req/s", "queue", "running", "KV used", "preempted", "TTFT p50", "TPOT p50", "e2e p50")
    for col in cols:
        t.add_column(col, justify="right")

    def mean(v: float | None) -> str:
        return "-" if v is None else f"{v:,.1f}"

    for c in items:
        srv = given(c.server)
        if srv is None:  # a stage with no server report: its row says so
            t.add_row(str(c.stage), *("-" for _ in cols[1:]))
            continue
        t.add_row(
            str(c.stage),
            whole(srv.requests),
            "-" if srv.rate_per_s is None else per_s(srv.rate_per_s),
            mean(srv.queue_len_mean),
            mean(srv.running_mean),
            pct(srv.kv_usage_mean),
            whole(srv.preemptions),
            _median(srv.ttft_s),
            _median(srv.tpot_s),
            _median(srv.e2e_s),
        )
    return t


def _server_notes(items: list[ClientSummary]) -> list[Text]:
    """The analysis' notes on the server's figures, one line each with the stages it holds for."""
    stages: dict[str, list[str]] = {}
    for c in items:
        for note in given(c.server).notes if given(c.server) else []:
            stages.setdefault(note, []).append(str(c.stage))
    return [Text(f"server, stage {', '.join(st)}: {note}", style="yellow") for note, st in stages.items()]


def _median(d: Stats | None) -> str:
    """A latency's median in ms, as the client wrote it ("-" where it wrote none)."""
    return ms(d.median) if d else "-"

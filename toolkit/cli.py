"""The ``lltrace`` command: a thin typer client of the library API."""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from lltrace.documents import checked
from lltrace.errors import InputWarning, LltraceError, visible
from lltrace.reports.console import SafeConsole
from lltrace.version import __version__

app = typer.Typer(
    name="lltrace",
    help="Why was this LLM inference request slow? Ingest profiler and serving traces, attribute, report.",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)
out = SafeConsole()  # every string lltrace did not write shown, not obeyed (reports/console.py)
if not out.is_terminal:
    out = SafeConsole(width=120)  # piped output: wide enough that tables keep their column headers
err = SafeConsole(stderr=True)

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Run store: a folder, or a URI pyarrow opens (s3://bucket/runs, file:///...). "
        "Default: $LLTRACE_STORE or ./.lltrace.",
        show_default=False,
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or warnings on stderr.")]
StrictOpt = Annotated[
    bool, typer.Option("--strict", help="Reject a truncated trace instead of reading it as far as it is valid.")
]
KeepPythonOpt = Annotated[
    bool, typer.Option("--keep-python", help="Keep python_function stack events (dropped by default).")
]
RunOpt = Annotated[str | None, typer.Option("--run", help="Name the run (default: from the inputs).")]
RunArg = Annotated[
    list[str],
    typer.Argument(help="A stored run's id, or the files and folders of one run.", show_default=False),
]
GpuOpt = Annotated[str | None, typer.Option("--gpu", help="GPU name from the catalog (e.g. H100-SXM).")]
ModelOpt = Annotated[str | None, typer.Option("--model", help="Model name (e.g. llama-2-7b).")]


def _json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")


def _version(value: bool) -> None:
    if value:
        out.print(f"lltrace {__version__}")
        raise typer.Exit()


@app.callback()
def main_callback(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """lltrace: why was this LLM inference request slow?"""


@contextmanager
def _progress(quiet: bool) -> Iterator[Callable[[str, int, int], None] | None]:
    """A rich progress bar on stderr for ingest, off when stderr is not a terminal or with --quiet."""
    if quiet or not err.is_terminal:
        yield None
        return
    with Progress(
        TextColumn("[bold]ingest[/] {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    ) as bar:
        tasks: dict[str, Any] = {}

        def update(path: str, done: int, total: int) -> None:
            if path not in tasks:
                tasks[path] = bar.add_task(Path(path).name, total=total)
            bar.update(tasks[path], completed=done)

        yield update


@contextmanager
def _errors(quiet: bool) -> Iterator[None]:
    """Named library errors → one line on stderr and exit 1; truncation warnings → one line each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", InputWarning)
        try:
            yield
        except LltraceError as exc:
            _flush_warnings(caught, quiet)
            err.print(f"lltrace: error: {visible(str(exc))}", highlight=False, markup=False, soft_wrap=True)
            raise typer.Exit(1) from None
        except OSError as exc:  # a file the user may not read, a folder given for a file, a full disk
            _flush_warnings(caught, quiet)
            said = f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc)
            err.print(f"lltrace: error: {visible(said)}", highlight=False, markup=False, soft_wrap=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            err.print("lltrace: interrupted; nothing was written to the store", markup=False)
            raise typer.Exit(130) from None
    _flush_warnings(caught, quiet)


def _flush_warnings(caught: list[warnings.WarningMessage], quiet: bool) -> None:
    if quiet:
        return
    for w in caught:
        if issubclass(w.category, InputWarning):
            err.print(f"lltrace: warning: {visible(str(w.message))}", highlight=False, markup=False, soft_wrap=True)


@app.command("ingest")
def ingest_cli(
    paths: Annotated[
        list[str],
        typer.Argument(
            help="Trace files or folders of one run; with --each, files, folders or quoted globs of many runs.",
            show_default=False,
        ),
    ],
    store: StoreOpt = None,
    run: RunOpt = None,
    keep_python: KeepPythonOpt = False,
    force: Annotated[bool, typer.Option("--force", help="Re-ingest even if the same files are stored.")] = False,
    strict: StrictOpt = False,
    each: Annotated[
        bool,
        typer.Option(
            "--each",
            help="Many runs: every file or sub-folder of a folder, and every match of a glob, is its own run "
            "(implied by a glob, --jobs or --executor).",
        ),
    ] = False,
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", help="Runs ingested at once with --each (default: CPU count).")
    ] = None,
    executor: Annotated[
        str, typer.Option("--executor", help="Where --each runs: local (process pool) or ray (Ray tasks).")
    ] = "local",
    quiet: QuietOpt = False,
) -> None:
    """Ingest files into the run store and print the run id (with --each: one id per run, and a summary)."""
    from lltrace.ingest.pipeline import ingest

    globbed = any(not Path(p).exists() and any(c in p for c in "*?[") for p in paths)
    if each or globbed or jobs is not None or executor != "local":  # --jobs / --executor: many runs
        _ingest_batch(paths, store, run, keep_python, force, strict, jobs, executor, quiet)
        return
    with _errors(quiet), _progress(quiet) as progress:
        r = ingest(paths, store=store, run=run, keep_python=keep_python, force=force, strict=strict, progress=progress)
    for s in r.skipped:
        if not quiet:
            err.print(f"lltrace: skipped {s.path}: {s.reason}", markup=False)
    out.print(r.id, markup=False, highlight=False)


def _ingest_batch(
    paths: list[str],
    store: str | None,
    run: str | None,
    keep_python: bool,
    force: bool,
    strict: bool,
    jobs: int | None,
    executor: str,
    quiet: bool,
) -> None:
    from lltrace.ingest.many import ingest_each

    with _errors(quiet):
        if run:
            raise LltraceError("--run names one run; with --each every run is named after its files")
        with _progress(quiet) as progress:
            cb = (lambda done, total: progress("runs", done, total)) if progress else None
            result = ingest_each(
                paths,
                store=store,
                jobs=jobs,
                executor=executor,
                keep_python=keep_python,
                force=force,
                strict=strict,
                progress=cb,
            )
    for o in result.outcomes:
        if o.run_id:
            out.print(o.run_id, markup=False, highlight=False)
    line = {"markup": False, "highlight": False, "soft_wrap": True}
    if not quiet:
        for s in result.all_skipped:
            err.print(f"lltrace: skipped {s.path}: {s.reason}", **line)
        for o in result.outcomes:
            for w in o.warnings:
                err.print(f"lltrace: warning: {w}", **line)
    for o in result.failed:
        err.print(f"lltrace: failed: {o.error}", **line)
    runs = result.runs
    reused = sum(r.reused for r in runs)
    if not quiet or result.failed:
        err.print(
            f"lltrace: {len(runs)} runs ingested ({reused} already stored), {len(result.failed)} failed, "
            f"{len(result.all_skipped)} skipped",
            **line,
        )
    if result.failed:
        raise typer.Exit(1)


@app.command("analyze")
def analyze_cli(
    paths: RunArg,
    store: StoreOpt = None,
    run: RunOpt = None,
    gpu: GpuOpt = None,
    model: ModelOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the analysis document as JSON.")] = False,
    keep_python: KeepPythonOpt = False,
    strict: StrictOpt = False,
    report_file: Annotated[Path | None, typer.Option("--report", help="Also write the HTML report here.")] = None,
    slo: Annotated[
        str | None,
        typer.Option("--slo", help="Judge incidents by objectives instead of the run's own level: ttft_p90=500ms,..."),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="Judge incidents against twice this run's typical level (run id or path)."),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="List every file, clock alignment and join at the end.")
    ] = False,
    quiet: QuietOpt = False,
) -> None:
    """Ingest the files of one run (or reuse the store) and explain where its time went, incidents first."""
    from lltrace.analysis.document import analyze
    from lltrace.analysis.incidents import parse_slo
    from lltrace.reports.terminal import print_summary

    with _errors(quiet), _progress(quiet) as progress:
        result = analyze(
            paths,
            store=store,
            run=run,
            gpu=gpu,
            model=model,
            keep_python=keep_python,
            strict=strict,
            progress=progress,
            slo=parse_slo(slo) if slo else None,
            baseline=baseline,
        )
    if report_file is not None:
        from lltrace.analysis.report import report

        with _errors(quiet):
            report(result, report_file)
    if as_json:
        _json(result.to_dict())
    else:
        print_summary(result.document, out, verbose)


@app.command("report")
def report_cli(
    paths: RunArg,
    output: Annotated[Path, typer.Option("-o", "--output", help="The HTML file to write.")],
    store: StoreOpt = None,
    png: Annotated[Path | None, typer.Option("--png", help="Also write each chart as PNG into this folder.")] = None,
    gpu: GpuOpt = None,
    model: ModelOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Write the run's report: one offline HTML file (no network needed to open it)."""
    from lltrace.analysis.document import analyze
    from lltrace.analysis.report import report

    with _errors(quiet):
        charts = report(analyze(paths, store=store, gpu=gpu, model=model), output, png_dir=png)
    out.print(f"{output} ({len(charts)} charts: {', '.join(charts)})", markup=False, highlight=False, soft_wrap=True)


@app.command("diff")
def diff_cli(
    baseline: Annotated[str, typer.Argument(help="Baseline: a stored run's id or a run's file/folder.")],
    incident: Annotated[str, typer.Argument(help="Incident: a stored run's id or a run's file/folder.")],
    store: StoreOpt = None,
    baseline_window: Annotated[
        str | None,
        typer.Option("--baseline-window", help="FROM/TO: only the baseline's requests and samples in it (ISO-8601)."),
    ] = None,
    incident_window: Annotated[
        str | None,
        typer.Option("--incident-window", help="FROM/TO: only the incident's requests and samples in it (ISO-8601)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the diff document as JSON.")] = False,
    quiet: QuietOpt = False,
) -> None:
    """What changed between two runs (or two windows of one), with the request mix normalised."""
    from lltrace.analysis.diff import diff, parse_window
    from lltrace.reports.terminal_tables import diff_table

    with _errors(quiet):
        windows = [parse_window(w) if w else None for w in (baseline_window, incident_window)]
        doc = diff(baseline, incident, store=store, baseline_window=windows[0], incident_window=windows[1])
    if as_json:
        _json(doc)
    else:
        out.print(diff_table(checked(doc, "diff")), soft_wrap=True)


@app.command("weekly")
def weekly_cli(
    output: Annotated[Path, typer.Option("-o", "--output", help="The HTML file to write.")],
    store: StoreOpt = None,
    since: Annotated[str | None, typer.Option("--since", help="Start date (ISO-8601).")] = None,
    until: Annotated[str | None, typer.Option("--until", help="End date (ISO-8601), exclusive.")] = None,
    window: Annotated[str, typer.Option("--window", help="hour, day, week or auto.")] = "auto",
    model: Annotated[str | None, typer.Option("--model", help="Model for arrival-only traffic (estimates).")] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="GPU for arrival-only traffic (estimates).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Also print the per-window figures as JSON.")] = False,
) -> None:
    """Workload mix, latency and KV pressure across the store's runs, window by window."""
    from lltrace.analysis.weekly import weekly
    from lltrace.reports.weekly_html import write_weekly_html

    with _errors(False):
        if window not in ("auto", "hour", "day", "week"):
            raise LltraceError(f"--window must be hour, day, week or auto, not {window!r}")
        doc = weekly(store=store, since=since, until=until, window=window, model=model, gpu=gpu)
        write_weekly_html(checked(doc, "weekly"), output)
    if as_json:
        _json(doc)
    else:
        from lltrace.reports.terminal_tables import weekly_table

        out.print(weekly_table(checked(doc, "weekly")))
        out.print(f"{output}: {len(doc['windows'])} windows of one {doc['window']}", markup=False, highlight=False)


export_app = typer.Typer(
    help="Export a run to other tools.", context_settings={"help_option_names": ["-h", "--help"]}, no_args_is_help=True
)
app.add_typer(export_app, name="export")


@export_app.command("perfetto")
def export_perfetto_cli(
    run: RunArg,
    output: Annotated[Path, typer.Option("-o", "--output", help="The Chrome/Perfetto trace JSON to write.")],
    store: StoreOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Write the run as a Chrome/Perfetto trace: request lanes, engine steps, KV usage counters."""
    from lltrace.analysis.export import export_perfetto

    with _errors(quiet):
        counts = export_perfetto(run, output, store=store)
    out.print(
        f"{output}: {counts['requests']:,} request lanes, {counts['steps']:,} steps, "
        f"{counts['counters']:,} counter samples",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@export_app.command("llm-d-report")
def export_llmd_cli(
    run: RunArg,
    output: Annotated[
        Path, typer.Option("-o", "--output", help="The report to write: YAML, or JSON where the name ends in .json.")
    ],
    store: StoreOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Write the run as an llm-d benchmark report (schema 0.2): request counts, sizes, latencies, throughput."""
    from lltrace.analysis.export_llmd import SCHEMA_VERSION, export_llmd_report

    with _errors(quiet):
        report = export_llmd_report(run, output, store=store)
    agg = report["results"]["request_performance"]["aggregate"]
    out.print(
        f"{output}: llm-d benchmark report {SCHEMA_VERSION}, {agg['requests']['total']:,} requests, "
        f"{len(agg.get('latency', {}))} latency metrics",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@app.command("estimate")
def estimate_cli(
    input_tokens: Annotated[int, typer.Option("--input-tokens", help="Prompt length, tokens.")],
    output_tokens: Annotated[int, typer.Option("--output-tokens", help="Output length, tokens.")],
    model: Annotated[str | None, typer.Option("--model", help="Model from the catalog (e.g. llama-2-7b).")] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="GPU from the catalog (e.g. A100-80GB).")] = None,
    quant: Annotated[str, typer.Option("--quant", help="Weight precision: bf16, fp16, fp8, int8, int4.")] = "bf16",
    prefill_tps: Annotated[float | None, typer.Option("--prefill-tps", help="Measured prefill rate, tokens/s.")] = None,
    decode_ms: Annotated[
        float | None, typer.Option("--decode-ms-per-token", help="Measured decode time per token, ms.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the estimate document as JSON.")] = False,
) -> None:
    """The latency model for one request shape: prefill/decode split and the crossover input length."""
    from lltrace.physics.estimate import estimate
    from lltrace.reports.terminal_tables import estimate_line

    with _errors(False):
        doc = estimate(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            model=model,
            gpu=gpu,
            quant=quant,
            prefill_tps=prefill_tps,
            decode_ms_per_token=decode_ms,
        )
    if as_json:
        _json(doc)
    else:
        out.print(estimate_line(checked(doc, "estimate")))


@app.command("replay")
def replay_cli(
    target: RunArg,
    what_if: Annotated[
        list[str] | None,
        typer.Option(
            "--what-if",
            help="KEY=VALUE: gpu, weights, kv_dtype, tp, max_num_seqs, max_num_batched_tokens, "
            "chunked_prefill (on/off), long_prefill_token_threshold (0: off), data_parallel_size, kv_blocks, "
            "kv_memory_gb, block_size, "
            "rate_scale (arrival-rate multiplier), "
            "prefix_caching (on/off). Several keys in one case: KEY=VALUE,KEY=VALUE. A sweep, one case per "
            "value: a list (rate_scale=0.5|1|2|4) or a range in powers of two (max_num_seqs=4..32). "
            "Repeatable: one case (or sweep) each.",
        ),
    ] = None,
    store: StoreOpt = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="The run's GPU, when the sources do not say.")] = None,
    quant: Annotated[str, typer.Option("--quant", help="The run's weight precision.")] = "bf16",
    model: Annotated[
        str | None, typer.Option("--model", help="The run's model, when the server log does not name it.")
    ] = None,
    reference: Annotated[
        str | None,
        typer.Option(
            "--reference", help="MODEL@GPU: step cost from the catalog's roofline, for traces with no timings."
        ),
    ] = None,
    calibrate_on: Annotated[
        str | None,
        typer.Option(
            "--calibrate-on",
            help="Another run (id or path) of the same engine, model and machine: fit on it, replay this run, "
            "and report that validation too.",
        ),
    ] = None,
    check_against: Annotated[
        str | None,
        typer.Option(
            "--check-against",
            help="The same workload really run with the what-if's setting (id or path): score each what-if against "
            "it, the hosts' speed difference taken out.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the replay document as JSON.")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Replay the run through a scheduler model calibrated on it: its error first, then what-ifs."""
    from lltrace.replay.document import replay

    with _errors(quiet):
        doc = replay(
            target,
            what_ifs=what_if or [],
            store=store,
            gpu=gpu,
            quant=quant,
            reference=reference,
            model=model,
            calibrate_on=calibrate_on,
            check_against=check_against,
        )
    if as_json:
        _json(doc)
        return
    from lltrace.reports.terminal_replay import render_replay

    out.print(render_replay(checked(doc, "replay")), highlight=False)


@app.command("formats")
def formats_cli() -> None:
    """List the formats lltrace reads and what each can attribute."""
    from lltrace.parsers import FORMATS
    from lltrace.reports.terminal_tables import formats_text

    out.print(formats_text(FORMATS), highlight=False)


@app.command("sql")
def sql_cli(
    query: Annotated[str, typer.Argument(help="SQL over the store's tables and views.", show_default=False)],
    store: StoreOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Rows as JSON lines instead of a table.")] = False,
) -> None:
    """Run SQL over every run in the store (tables: kernels, ops, annotations, flows, engine_steps, …)."""
    from lltrace.reports.terminal_tables import sql_table
    from lltrace.store import Store

    with _errors(False):
        result = Store(store).query(query)
    if result is None:
        return
    cols, rows = result
    if as_json:
        for r in rows:
            sys.stdout.write(json.dumps(dict(zip(cols, r, strict=True)), default=str) + "\n")
    else:
        out.print(sql_table(cols, rows))


def main() -> None:
    """Console-script entry point."""
    # lltrace does no large linear algebra (the replay's fits have a few columns): NumPy's OpenBLAS threads would
    # only spin beside the readers after it loads (about 0.1 CPU-second a run). A user's own setting stands.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # Arrow's buffers from the C library's allocator rather than Arrow's bundled mimalloc, which keeps what is freed
    # for a second in huge pages: the 2 GB trace's peak is 0.19-0.20x the file against 0.20-0.24x, 0.21-0.22x
    # against 0.25-0.27x gzipped (benchmarks/ingest.py), the CPU-seconds the same within the noise. A user's own
    # setting stands.
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    app()


if __name__ == "__main__":  # python -m lltrace.cli
    main()

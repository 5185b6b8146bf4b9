"""``report``: the run's offline HTML report from the analysis document and the report views."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lltrace.analysis import Analysis, analyze
from lltrace.api import Run, ingest
from lltrace.store import Store

REPORT_VIEWS = (
    "report_request_bins",
    "report_latency_hist",
    "report_size_mix",
    "report_timeline",
    "interference_steps",
)


def resolve(paths_or_run: Sequence[str | os.PathLike[str]], store: Store) -> Sequence[str | os.PathLike[str]] | Run:
    """A single argument naming a stored run (and no file) is that run; anything else is files to ingest."""
    if len(paths_or_run) == 1:
        name = str(paths_or_run[0])
        if not Path(name).exists() and store.has_run(name):
            return Run(name, store)
    return paths_or_run


def run_of(arg: str | os.PathLike[str] | Run, store: Store) -> Run:
    """The stored run an argument names (a run id), or the run its files ingest into (reused if stored)."""
    if isinstance(arg, Run):
        return arg
    target = resolve([arg], store)
    return target if isinstance(target, Run) else ingest(target, store=store)


def report(
    paths_or_run: Sequence[str | os.PathLike[str]] | Run,
    output: str | os.PathLike[str],
    *,
    store: Store | str | os.PathLike[str] | None = None,
    png_dir: str | os.PathLike[str] | None = None,
    gpu: str | None = None,
    model: str | None = None,
) -> tuple[Analysis, list[str]]:
    """Analyze (or reuse) a run and write its report; returns the analysis and the charts drawn.

    When the run was replayed (``lltrace replay``), the report has a replay section: calibration, the
    validation error, then measured, replayed and each what-if (estimates) side by side.
    """
    from lltrace.reports.html import write_report

    st = store if isinstance(store, Store) else Store(store)
    target = paths_or_run if isinstance(paths_or_run, Run) else resolve(paths_or_run, st)
    result = analyze(target, store=st, gpu=gpu, model=model)
    tables: dict[str, Any] = {}
    con = result.run.store.connect([result.run.id])
    try:
        views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        for v in REPORT_VIEWS:
            if v in views:
                cur = con.execute(f"SELECT * EXCLUDE (run_id) FROM {v}")
                cols = [d[0] for d in cur.description]
                tables[v] = [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
    finally:
        con.close()
    page = result.to_dict() | {"replay": st.replay(result.run.id)}  # the run's latest `lltrace replay`, if any
    charts = write_report(page, tables, Path(output), Path(png_dir) if png_dir else None)
    return result, charts

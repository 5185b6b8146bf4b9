"""``report``: a run's offline HTML report: the analysis document, the report views' rows and the run's latest
replay, handed to ``lltrace.reports.html`` to draw."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lltrace.analysis.document import Analysis, analyze
from lltrace.analysis.sql import rows
from lltrace.ingest.targets import Target, as_store, open_run
from lltrace.store import Store

REPORT_VIEWS = (
    "report_request_bins",
    "report_latency_hist",
    "report_size_mix",
    "report_timeline",
    "interference_steps",
)


def report_inputs(
    target: Target,
    *,
    store: Store | str | os.PathLike[str] | None = None,
    gpu: str | None = None,
    model: str | None = None,
) -> tuple[Analysis, dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """What a run's report shows: its analysis, the page's document (the analysis document with the run's
    latest ``lltrace replay`` under ``replay``, or None) and the report views' rows (aggregated in SQL)."""
    st = as_store(store)
    result = analyze(open_run(target, st), gpu=gpu, model=model)
    con = st.connect([result.run.id])
    try:
        tables = {v: rows(con, f"SELECT * EXCLUDE (run_id) FROM {v} ORDER BY ALL") for v in REPORT_VIEWS}
    finally:
        con.close()
    return result, result.to_dict() | {"replay": st.replay(result.run.id)}, tables


def report(
    paths_or_run: Target,
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

    result, page, tables = report_inputs(paths_or_run, store=store, gpu=gpu, model=model)
    charts = write_report(page, tables, Path(output), Path(png_dir) if png_dir else None)
    return result, charts

"""``report``: a run's offline HTML report: the analysis document, the report views' rows and the run's latest
replay, handed to ``lltrace.reports.html`` to draw."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from lltrace.analysis.document import Analysis
from lltrace.analysis.sql import rows
from lltrace.documents import DocumentError, checked
from lltrace.documents.replay import ReplayDocument
from lltrace.errors import InputWarning

REPORT_VIEWS = (
    "report_request_bins",
    "report_latency_hist",
    "report_size_mix",
    "report_timeline",
    "interference_steps",
)


def report_inputs(analysis: Analysis) -> tuple[ReplayDocument | None, dict[str, list[dict[str, Any]]]]:
    """What a run's report shows beside its analysis: the run's latest ``lltrace replay`` document (None where it
    was never replayed, or was replayed by an lltrace whose replay document differs: replay it again) and the
    report views' rows (aggregated in SQL)."""
    st = analysis.run.store
    con = st.connect([analysis.run.id])
    try:
        tables = {v: rows(con, f"SELECT * EXCLUDE (run_id) FROM {v} ORDER BY ALL") for v in REPORT_VIEWS}
    finally:
        con.close()
    replayed = st.replay(analysis.run.id)
    if replayed is not None:
        try:
            replayed = checked(replayed, "replay")
        except DocumentError:
            warnings.warn(
                f"run {analysis.run.id}: its stored replay was made by another lltrace version; the report leaves it "
                "out (replay the run again to show it)",
                InputWarning,
                stacklevel=2,
            )
            replayed = None
    return replayed, tables


def report(
    analysis: Analysis,
    output: str | os.PathLike[str],
    *,
    png_dir: str | os.PathLike[str] | None = None,
) -> list[str]:
    """Write the report of an analysis already made (``lltrace.analyze``): one offline HTML file, and each chart as
    PNG into ``png_dir`` when given; returns the names of the charts drawn.

    When the run was replayed (``lltrace replay``), the report has a replay section: calibration, the
    validation error, then measured, replayed and each what-if (estimates) side by side.
    """
    from lltrace.reports.html import write_report

    replayed, tables = report_inputs(analysis)
    return write_report(analysis.document, replayed, tables, Path(output), Path(png_dir) if png_dir else None)

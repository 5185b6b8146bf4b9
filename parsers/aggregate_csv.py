"""AIPerf's ``profile_export_aiperf.csv`` and GenAI-Perf's ``profile_export_genai_perf.csv``: the tools' own
statistics as the CSV their exporters write, read into the same shape as their JSON aggregates
(``bench_clients.ingest_aiperf_summary``), so the client summary comes out alike.

Both exporters write a section of request metrics under ``Metric,avg,min,max,...`` (one row per metric, its
name and unit as ``Header (unit)``), a blank row, then the system metrics under ``Metric,Value``
(GenAI-Perf: genai_perf/export_data/csv_exporter.py, values as ``{:,.2f}``; AIPerf: aiperf/exporters/
csv_exporter.py, ``{:.2f}``, names from each metric's header, the unit left out for counts). GPU telemetry
sections follow in AIPerf's; they are not read.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import not_a_figure, report_unread_figures
from lltrace.parsers._lines import read_text
from lltrace.source_info import SourceInfo

AGGREGATE_CSV = "aiperf-summary-csv"

# seconds per unit as the exporters write them in a metric's name
_TO_S = {"ms": 1e-3, "sec": 1.0, "s": 1.0, "us": 1e-6, "ns": 1e-9}
_NAME = re.compile(r"^(?P<name>[^(]+?)\s*(?:\((?P<unit>[^)]*)\))?$")


def sniff(head: bytes) -> bool:
    """The first row is the request-metrics header both exporters write."""
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    return text.startswith(b"Metric,avg,min,max,")


def _figure(text: str) -> float | None:
    """A cell as the exporter formatted it (``1,234.56`` or ``1234.56``); None when empty or not a number."""
    try:
        value = float(text.replace(",", "")) if text.strip() else None
    except ValueError:
        return None
    return None if value is None or not_a_figure(value) else value


def ingest(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Each metric's statistics, latencies converted to seconds, kept as the JSON aggregate's (``aiperf_summary``):
    tags are the metric names in snake case (``Time To First Token (ms)`` is ``time_to_first_token``)."""
    info = SourceInfo(path=path, format=AGGREGATE_CSV)
    rows = list(csv.reader(read_text(path).removeprefix("\ufeff").splitlines()))
    metrics: dict[str, dict[str, Any]] = {}
    header: list[str] | None = None
    request_header: list[str] = []  # the first section's
    bad: list[str] = []
    for line, row in enumerate(rows, 1):
        if not row or not any(c.strip() for c in row):
            header = None  # a blank row ends a section
            continue
        if row[0] == "Metric":
            header = [c.strip().lower() for c in row]
            request_header = request_header or header
            continue
        if header is None:
            continue  # a section lltrace does not read (AIPerf's GPU telemetry)
        if len(row) != len(header):
            raise TraceFormatError(path, f"line {line}", f"expected {len(header)} cells, found {len(row)}")
        m = _NAME.match(row[0].strip())
        if m is None:
            continue
        tag = re.sub(r"\W+", "_", m.group("name").strip().lower()).strip("_")
        unit = (m.group("unit") or "").strip().lower()
        scale = _TO_S.get(unit)
        stats: dict[str, Any] = {"unit": "s" if scale is not None else unit or None}
        for key, cell in zip(header[1:], row[1:], strict=True):
            value = _figure(cell)
            if value is None and cell.strip():
                bad.append(f"line {line} {key}={cell!r}")
            stats["avg" if key == "value" else key] = value * scale if value is not None and scale else value
        metrics[tag] = stats
    if not metrics:
        raise TraceFormatError(path, "line 1", "no metric rows under the Metric header")
    report_unread_figures(path, info, bad)
    # GenAI-Perf's request-metrics header has its percentiles from p99 down after max (csv_exporter.py's
    # REQUEST_METRICS_HEADER); AIPerf's has sum, then p1 up (its STAT_KEYS)
    genai = request_header[1:5] == ["avg", "min", "max", "p99"]
    info.version = "GenAI-Perf csv_exporter" if genai else "AIPerf csv_exporter"
    info.details["aiperf_summary"] = {"metrics": metrics, "concurrency": None, "request_rate": None}
    info.records = len(metrics)
    return info

"""guidellm's CSV report (``benchmarks.csv``: >= 0.4 writes it beside ``benchmarks.json`` by default): each
benchmark's own statistics, read into ``client_summary`` as ``bench_clients.ingest_guidellm`` reads the JSON's
``metrics`` (the same keys, so one summary code shows both; beside its JSON the CSV is read once:
``toolkit.ingest.repeats``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._lines import read_text
from lltrace.source_info import SourceInfo

GUIDELLM_CSV = "guidellm-csv"

# guidellm's CSV report (>= 0.4 writes it beside benchmarks.json by default; benchmark/outputs/csv.py): three header
# rows (group, name with status and unit, statistic), one row per benchmark; a distribution's "Percentiles" cell is
# [min, p001, p01, p05, p10, p25, p75, p90, p95, p99, max] (its median a column of its own)
_CSV_PERCENTILES = ("min", "p001", "p01", "p05", "p10", "p25", "p75", "p90", "p95", "p99", "max")
# the metrics client_summary shows (benchmarks.json names), by the CSV's group and name
_CSV_METRICS = {
    "requests_per_second": ("Server Throughput", "Successful Requests/Sec"),
    "request_latency": ("Request Latency", "Successful Sec"),
    "time_to_first_token_ms": ("Time to First Token", "Successful ms"),
    "time_per_output_token_ms": ("Time per Output Token", "Successful ms"),
    "inter_token_latency_ms": ("Inter Token Latency", "Successful ms"),
    "output_tokens_per_second": ("Token Throughput", "Successful Output Tokens/Sec"),
    "tokens_per_second": ("Token Throughput", "Successful Total Tokens/Sec"),
    "prompt_token_count": ("Token Metrics", "Successful Input Tokens"),
    "output_token_count": ("Token Metrics", "Successful Output Tokens"),
}


def sniff_guidellm_csv(head: bytes) -> bool:
    """guidellm's CSV report: its first header row opens with the run's info, and names its latency groups."""
    text = head.lstrip(b"\xef\xbb\xbf")
    return text.startswith(b"Run Info,") and b"Request Latency" in text and b"Time to First Token" in text


def _strategy(written: str) -> dict[str, Any]:
    """A benchmark's strategy as the CSV writes it (``str`` of guidellm's strategy: ``poisson@4.00``,
    ``constant@2.00``, ``concurrent@16``, ``throughput@unlimited``, ``synchronous``), as ``_guidellm_summary``
    gives it from the JSON: the rate (to the CSV's two decimals) or the streams, and guidellm's label."""
    kind, _, value = written.partition("@")
    number = float(value) if re.fullmatch(r"\d+(?:\.\d+)?", value) else None
    rate = number if kind in ("constant", "poisson") else None
    streams = int(number) if kind == "concurrent" and number is not None else None
    at = rate if rate is not None else streams
    return {"strategy": kind, "rate": rate, "streams": streams, "label": f"{kind}@{at:g}" if at is not None else kind}


def ingest_guidellm_csv(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Each benchmark's own statistics (``client_summary``), as from benchmarks.json's ``metrics``: where both files
    of one run are given, the JSON's are kept (``toolkit.ingest.repeats``). No per-request rows: the CSV has none."""
    import csv
    import io

    info = SourceInfo(path=path, format=GUIDELLM_CSV)
    rows = list(csv.reader(io.StringIO(read_text(path), newline="")))
    if len(rows) < 4 or not (len(rows[0]) == len(rows[1]) == len(rows[2])):
        raise TraceFormatError(path, "line 1", "guidellm's CSV report needs its three header rows and a benchmark row")
    columns = {(g, n, st): i for i, (g, n, st) in enumerate(zip(*rows[:3], strict=True))}

    def cell(row: list[str], group: str, name: str, stat: str = "") -> str | None:
        i = columns.get((group, name, stat))
        return row[i] if i is not None and i < len(row) and row[i] != "" else None

    def number(text: str | None) -> float | None:
        try:
            return float(text) if text is not None else None
        except ValueError:
            return None

    summaries = []
    for line, row in enumerate(rows[3:], start=4):
        if len(row) != len(rows[0]):
            raise TraceFormatError(path, f"line {line}", f"{len(row)} cells, the header has {len(rows[0])}")
        strategy = cell(row, "Benchmark", "Strategy")
        metrics: dict[str, Any] = {}
        for name, (group, label) in _CSV_METRICS.items():
            listed = cell(row, group, label, "Percentiles")
            try:
                values = json.loads(listed) if listed else None
            except json.JSONDecodeError:
                values = None
            pct = (
                dict(zip(_CSV_PERCENTILES, values, strict=True))
                if isinstance(values, list) and len(values) == len(_CSV_PERCENTILES)
                else {}
            )
            mean = number(cell(row, group, label, "Mean"))
            if mean is not None or pct:
                metrics[name] = {
                    "successful": {
                        "mean": mean,
                        "median": number(cell(row, group, label, "Median")),
                        "percentiles": {"p90": pct.get("p90"), "p99": pct.get("p99")},
                    }
                }
        totals = {
            k: number(cell(row, "Request Counts", k.capitalize())) for k in ("successful", "incomplete", "errored")
        }
        totals["total"] = number(cell(row, "Request Counts", "Total"))
        summaries.append(
            _strategy(strategy or "")
            | {
                "duration": number(cell(row, "Timings", "Duration", "Sec")),
                "request_totals": {k: int(v) if v is not None else None for k, v in totals.items()},
                "metrics": metrics,
                "run_id": cell(row, "Run Info", "Run ID"),
                "benchmark_id": cell(row, "Benchmark", "ID"),
            }
        )
    info.details["guidellm_metrics"] = summaries
    info.records = len(summaries)
    info.version = f"guidellm CSV report ({len(summaries)} benchmark{'s' if len(summaries) != 1 else ''})"
    return info

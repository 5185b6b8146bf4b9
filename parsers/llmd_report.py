"""llm-d's benchmark report (``llm-d-benchmark``, ``llmdbenchmark/analysis/benchmark_report``): the vendor-neutral
summary its harness converts every client's output to (vLLM bench, guidellm, inference-perf, AIPerf, ...), YAML as
its converter writes it (``BenchmarkReport.export_yaml``) or JSON (``export_json``).

Read: schema versions 0.2 and 0.2.1 (``schema_v0_2.py``, ``schema_v0_2_1.py``; 0.2.1 adds fields beside the same
``results.request_performance.aggregate``). The aggregate's statistics carry their own units (``ms``, ``s``,
``ms/token``, ``s/token``, ``count``, ``tokens/s``, ``queries/s``): each is converted to lltrace's (seconds, tokens,
per second) by the unit it names, and a statistic whose unit is not one of its kind's is left NULL with a warning.
The figures are the client's, as the converter copied them: they go to the run's metadata (the document's
``client_summary``); the report has no per-request rows.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import not_a_figure, report_unread_figures
from lltrace.parsers._lines import read_text
from lltrace.source_info import SourceInfo

LLMD_REPORT = "llm-d-benchmark-report"
VERSIONS = ("0.2", "0.2.1")
"""The schema versions read (``version`` of the report)."""

_TIME = {"ms": 1e3, "s": 1.0}
_PER_TOKEN = {"ms/token": 1e3, "s/token": 1.0}
# lltrace's name, the report's, and the units that metric may carry, each with what it divides by to give seconds
LATENCIES = (
    ("ttft", "time_to_first_token", _TIME),
    ("tpot", "time_per_output_token", _PER_TOKEN),
    ("itl", "inter_token_latency", _PER_TOKEN),
    ("ntpot", "normalized_time_per_output_token", _PER_TOKEN),
    ("e2e", "request_latency", _TIME),
)
RATES = (
    ("requests_per_s", "request_rate", {"queries/s": 1.0}),
    ("output_tokens_per_s", "output_token_rate", {"tokens/s": 1.0}),
    ("input_tokens_per_s", "input_token_rate", {"tokens/s": 1.0}),
    ("total_tokens_per_s", "total_token_rate", {"tokens/s": 1.0}),
)
SIZES = (("input_tokens", "input_length", {"count": 1.0}), ("output_tokens", "output_length", {"count": 1.0}))
STATS = (("mean", "mean"), ("median", "p50"), ("p90", "p90"), ("p99", "p99"))
"""lltrace's statistic and the report's name for it (``p50``: the median)."""


def sniff(head: bytes) -> bool:
    """A report's ``results`` hold ``request_performance`` (JSON or YAML; pydantic writes the keys sorted, so
    ``results`` opens the YAML and ``version`` closes it); llm-d's JSON Schema of the report names the same keys,
    and is not a report."""
    return (
        b'"$defs"' not in head
        and b'"$schema"' not in head
        and re.search(rb'(^|[\s{,])"?request_performance"?\s*:', head) is not None
        and re.search(rb'(^|[\s{,])"?(aggregate|time_series)"?\s*:', head) is not None
    )


def _load(path: str) -> Any:
    """The report as data: JSON is YAML's subset, so one safe YAML reader reads both (no object is constructed
    beyond YAML's plain types)."""
    import yaml

    text = read_text(path)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}" if mark is not None else "line 1"
        raise TraceFormatError(path, where, f"invalid YAML/JSON ({exc.problem or exc.context})") from None
    except yaml.YAMLError as exc:
        raise TraceFormatError(path, "line 1", f"invalid YAML/JSON ({type(exc).__name__})") from None


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _stats(where: str, d: Any, units: dict[str, float], bad: list[str]) -> dict[str, float | None] | None:
    """One ``Statistics`` object in lltrace's units, or None when the report has none; a value that is no figure,
    or a unit not of the metric's kind, leaves it NULL (``bad``)."""
    if d is None:
        return None
    if not isinstance(d, dict):
        bad.append(f"{where} (not an object)")
        return None
    unit = d.get("units")
    if unit not in units:
        bad.append(f"{where}.units = {str(unit)[:40]!r} (not one of {', '.join(units)})")
        return None
    out: dict[str, float | None] = {}
    for ours, theirs in STATS:
        v = d.get(theirs)
        if v is None:
            out[ours] = None
        elif not_a_figure(v):
            bad.append(f"{where}.{theirs}")
            out[ours] = None
        else:
            out[ours] = float(v) / units[unit]
    return None if all(v is None for v in out.values()) else out


def _count(where: str, v: Any, bad: list[str]) -> int | None:
    if v is None:
        return None
    if not_a_figure(v) or not float(v).is_integer():
        bad.append(where)
        return None
    return int(v)


def _duration_s(v: Any) -> float | None:
    """An ISO-8601 duration as the converters write it (``PT49.97S``, ``PT1H2M3S``), in seconds; else None."""
    m = re.fullmatch(r"P(?:(\d+)D)?T?(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?", str(v or ""))
    if not m or not any(m.groups()):
        return None
    d, h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return d * 86400 + h * 3600 + mi * 60 + s


def _rate(v: Any) -> float | str | None:
    """The load's ``rate_qps`` or ``concurrency``: a number, ``inf`` for unbounded (YAML's ``.inf``)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return "inf" if math.isinf(v) and v > 0 else None if math.isnan(v) or v < 0 else v
    return None


def ingest(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """The report's aggregate request performance and its load (generator, stage, asked rate and concurrency),
    kept in the metadata (``llmd_report``: ``client_summary``); no rows."""
    info = SourceInfo(path=path, format=LLMD_REPORT)
    data = _load(path)
    if not isinstance(data, dict):
        raise TraceFormatError(path, "line 1", "expected one object (a benchmark report)")
    version = str(data.get("version"))
    if version not in VERSIONS:
        raise TraceFormatError(
            path,
            "key 'version'",
            f"llm-d benchmark report version {version[:20]!r}: lltrace reads {', '.join(VERSIONS)}",
        )
    perf = _obj(_obj(data.get("results")).get("request_performance"))
    agg = perf.get("aggregate")
    if not isinstance(agg, dict):
        raise TraceFormatError(path, "key 'results.request_performance.aggregate'", "no aggregate request performance")
    bad: list[str] = []
    base = "results.request_performance.aggregate"
    req, lat, tput = _obj(agg.get("requests")), _obj(agg.get("latency")), _obj(agg.get("throughput"))
    load = _obj(_obj(_obj(data.get("scenario")).get("load")).get("standardized"))
    run = _obj(data.get("run"))
    report: dict[str, Any] = {
        "version": version,
        "tool": str(load["tool"])[:200] if load.get("tool") is not None else None,
        "tool_version": str(load["tool_version"])[:200] if load.get("tool_version") else None,
        "stage": _count("scenario.load.standardized.stage", load.get("stage"), bad),
        "rate_qps": _rate(load.get("rate_qps")),
        "concurrency": _rate(load.get("concurrency")),
        "duration_s": _duration_s(_obj(run.get("time")).get("duration")),
        "total": _count(f"{base}.requests.total", req.get("total"), bad),
        "failures": _count(f"{base}.requests.failures", req.get("failures"), bad),
        "incomplete": _count(f"{base}.requests.incomplete", req.get("incomplete"), bad),
    }
    for ours, theirs, units in SIZES:
        report[ours] = _stats(f"{base}.requests.{theirs}", req.get(theirs), units, bad)
    for ours, theirs, units in LATENCIES:
        report[f"{ours}_s"] = _stats(f"{base}.latency.{theirs}", lat.get(theirs), units, bad)
    for ours, theirs, units in RATES:
        report[ours] = _stats(f"{base}.throughput.{theirs}", tput.get(theirs), units, bad)
    report_unread_figures(path, info, bad)
    info.details["llmd_report"] = report
    info.records = 1
    info.version = f"llm-d benchmark report {version}" + (f" of {report['tool']}" if report["tool"] else "")
    return info

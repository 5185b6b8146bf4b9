"""Log-stamped rows (``MM-DD HH:MM:SS``: no year, no zone) placed on the run clock."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from lltrace.arrow_rows import table_from_rows
from lltrace.ingest.join import staged_rows
from lltrace.parsers._io import WALL_CLOCK_FLOOR_S, chain_iteration_ends


def _needs_year(stamp: str | None) -> bool:
    """A vLLM-style ``MM-DD HH:MM:SS`` stamp (SGLang's carry their year and are placed when read)."""
    return stamp is not None and len(stamp) == 14


def _has_values(path: Path, column: str) -> bool:
    """Whether a staged file's ``column`` holds a value (from the file's statistics: a profiler's steps carry
    no log stamps, and reading them to find that out cost a tenth of a second)."""
    meta = pq.ParquetFile(path).metadata
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    if column not in names:
        return False
    k = names.index(column)
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(k).statistics
        if stats is None or not stats.has_null_count or stats.null_count < meta.row_group(g).num_rows:
            return True
    return False


def _stamp_column(f: Path) -> str:
    """The column of a staged file that holds its log stamps (a request line's: its arrival's)."""
    return "arrival_stamp" if f.parent.name == "_log_requests" else "log_stamp"


def place_log_times(stage: Path) -> dict[str, Any] | None:
    """Put log-stamped rows (``MM-DD HH:MM:SS``, no year, no zone) on the run clock.

    The year comes from another source of the run (span start, scrape time, a client's epoch send times or
    the profiler clock, the earliest one); a log with no such source beside it (nor requests timed on another
    clock) is placed on its own clock, seconds from its first stamp (year and zone unknown). The zone is UTC
    unless the spans (else the client's send times) show the log's clock a whole number of hours off, in which
    case that offset is applied. Iteration lines are printed when an iteration ends: each ``end_s`` is chained
    from the previous end plus the elapsed time and kept at or after its own 1-second stamp (estimated).
    """
    stat_files = sorted((stage / "engine_stats").glob("*.parquet"))
    step_files = sorted((stage / "engine_steps").glob("*.parquet"))
    request_files = sorted((stage / "_log_requests").glob("*.parquet"))  # a log's request lines
    logged = [
        f
        for f in stat_files + step_files + request_files
        if _has_values(f, _stamp_column(f))
        and any(_needs_year(x) for x in pq.read_table(f, columns=[_stamp_column(f)]).column(0).to_pylist())
    ]
    if not logged:
        return None
    anchors: list[tuple[float, str]] = []
    spans = staged_rows(stage / "_spans")
    if spans:
        anchors.append((min(s["start_ns"] for s in spans) / 1e9, "llm_request span start"))
    for f in stat_files:
        ts = [t for t in pq.read_table(f, columns=["ts_s"]).column("ts_s").to_pylist() if t is not None]
        if ts:
            anchors.append((min(ts), "Prometheus scrape time"))
    sent: list[float] = []
    timed_requests = False  # requests on a clock of their own (a client's perf_counter): not the log's
    for f in sorted((stage / "requests").glob("*.parquet")):
        if "arrival_s" in pq.read_schema(f).names:
            ts = [t for t in pq.read_table(f, columns=["arrival_s"]).column("arrival_s").to_pylist() if t is not None]
            timed_requests = timed_requests or bool(ts)
            # a client's epoch send times (guidellm, AIPerf, GenAI-Perf), not a trace's relative offsets
            if ts and min(ts) >= WALL_CLOCK_FLOOR_S:
                sent.append(min(ts))
    if sent:
        anchors.append((min(sent), "client's send time (epoch)"))
    for f in step_files:
        if "start_ns" in pq.read_schema(f).names:
            ns = [t for t in pq.read_table(f, columns=["start_ns"]).column("start_ns").to_pylist() if t]
            if ns:
                anchors.append((min(ns) / 1e9, "profiler clock"))
    report: dict[str, Any] = {"source": "server log", "zone": "UTC (assumed)", "zone_offset_h": 0}
    origin = 0.0
    if not anchors and timed_requests:
        report["method"] = (
            "no other dated source in the run, and the requests' times are on a clock of their own: log rows keep "
            "ts_s NULL (log_stamp only)"
        )
        return report
    if anchors:
        anchor, what = min(anchors)
        year = datetime.fromtimestamp(anchor, tz=timezone.utc).year
        report["method"] = f"year {year} from the {what}; zone UTC unless the spans say otherwise"
    else:
        # the log's own clock: seconds from its first stamp, read in a leap year so that every MM-DD is a day
        # (a log that runs across a New Year is not placed: its January would come before its December)
        year = 2000
        report["method"] = (
            "no other dated source in the run: the log's own clock, seconds from its first stamp (its year unknown)"
        )
        report["zone"], report["zone_offset_h"] = "unknown", None

    def epoch(stamp: str) -> float | None:
        try:
            when = datetime.strptime(f"{year}-{stamp}", "%Y-%m-%d %H:%M:%S")
        except ValueError:  # 02-29 in a year without one: the row keeps no time
            return None
        return when.replace(tzinfo=timezone.utc).timestamp() - origin

    if not anchors:
        stamps = [
            t
            for f in logged
            for x in pq.read_table(f, columns=[_stamp_column(f)]).column(0).to_pylist()
            if _needs_year(x) and (t := epoch(x)) is not None
        ]
        origin = min(stamps, default=0.0)
        if stamps and max(stamps) - origin > 183 * DAY_S:
            report["method"] += "; not placed: its stamps span more than half a year (a New Year inside it)"
            return report

    shift = 0.0
    step_rows = [r for f in step_files if f in logged for r in pq.read_table(f).to_pylist()]
    step_rows = [r for r in step_rows if _needs_year(r.get("log_stamp"))]
    first_log = min((t for r in step_rows if (t := epoch(r["log_stamp"])) is not None), default=None)
    line = "iteration"
    if first_log is None:  # no iteration lines: the first stats line (printed every log interval)
        stat_rows = [r for f in stat_files if f in logged for r in pq.read_table(f, columns=["log_stamp"]).to_pylist()]
        first_log = min(
            (t for r in stat_rows if _needs_year(r.get("log_stamp")) and (t := epoch(r["log_stamp"])) is not None),
            default=None,
        )
        line = "stats line"
    # the zone from the run's first request as another source dated it: the engine's first span, else the
    # first client send time (a whole number of hours apart: the log's clock is local time)
    first_dated = min(s["start_ns"] for s in spans) / 1e9 if spans else (min(sent) if sent else None)
    against = "first span" if spans else "first client send time"
    if first_dated is not None and first_log is not None:
        gap = first_log - first_dated
        hours = round(gap / 3600)
        if hours:
            shift = -hours * 3600.0
            report["zone"] = f"UTC{hours:+d} (inferred: the log's first {line} is {hours} h off the {against})"
            report["zone_offset_h"] = hours
        key = "first_iteration" if line == "iteration" else "first_stats_line"
        report[f"{key}_minus_{'first_span' if spans else 'first_send'}_s"] = gap + shift
        if not hours:
            report["zone"] = f"UTC (checked: the first {line} is {gap:+.2f} s from the {against})"
    unplaced = 0
    for f in logged:
        rows = pq.read_table(f).to_pylist()
        schema = pq.read_schema(f)
        if f in request_files:  # each request's Received and end lines
            for r in rows:
                for stamp, at in (("arrival_stamp", "arrival_s"), ("end_stamp", "end_s")):
                    if _needs_year(r.get(stamp)) and r.get(at) is None:
                        t = epoch(r[stamp])
                        r[at] = None if t is None else t + shift
                        unplaced += t is None
        elif "ts_s" in schema.names:  # engine_stats
            for r in rows:
                if _needs_year(r.get("log_stamp")) and r.get("ts_s") is None:
                    t = epoch(r["log_stamp"])
                    r["ts_s"] = None if t is None else t + shift
                    unplaced += t is None
        else:  # engine_steps from iteration lines

            def placed(stamp: str) -> float | None:
                t = epoch(stamp) if _needs_year(stamp) else None
                return None if t is None else t + shift

            unplaced += chain_iteration_ends([r for r in rows if _needs_year(r.get("log_stamp"))], placed)
        pq.write_table(table_from_rows(rows, schema), f)
    if unplaced:
        report["unplaced_rows"] = unplaced
        report["unplaced_why"] = f"stamped on a day the year {year} does not have"
    return report


DAY_S = 86_400.0
_DATED = {"engine_stats": "ts_s", "engine_steps": "start_s"}  # per-part tables with a run-clock time


def outside_window(stage: Path, sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows whose epoch time falls far outside the run's own window, per source (reported, not changed).

    The window is the run's dated rows (scrapes, log stats, engine steps) around their median; far is more
    than a day, or ten times their interquartile range where the run itself spans longer (a week of scrapes).
    A scrape eleven days out of order, or a log whose dates jump back eleven months, is far; relative clocks
    (times before 2015: a perf_counter origin) are not wall clocks and are left out.
    """
    times: list[tuple[float, int]] = []
    for table, column in _DATED.items():
        for f in sorted((stage / table).glob("*.parquet")) if (stage / table).is_dir() else []:
            names = pq.read_schema(f).names
            if column not in names or "part" not in names:
                continue
            t = pq.read_table(f, columns=["part", column])
            times.extend(
                (x, p)
                for x, p in zip(t[column].to_pylist(), t["part"].to_pylist(), strict=True)
                if x is not None and x >= 1_420_070_400.0
            )
    if len(times) < 4:
        return []
    values = sorted(x for x, _ in times)
    n = len(values)
    median, q1, q3 = values[n // 2], values[n // 4], values[(3 * n) // 4]
    far = max(DAY_S, 10 * (q3 - q1))
    paths = {s["part"]: s["path"] for s in sources}
    out: dict[int, dict[str, Any]] = {}
    for x, part in times:
        if abs(x - median) > far:
            o = out.setdefault(part, {"part": part, "source": paths.get(part), "rows": 0, "furthest_days": 0.0})
            o["rows"] += 1
            o["furthest_days"] = max(o["furthest_days"], round(abs(x - median) / DAY_S, 1))
    return [o | {"window_median_s": median, "far_s": far} for o in out.values()]

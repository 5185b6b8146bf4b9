"""What every request-level parser does the same way: load a JSON document, read JSON-lines objects, check
durations and ids, and write a canonical or staging table's rows for one source file."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from datetime import datetime, timezone
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lltrace.arrow_rows import table_from_rows
from lltrace.errors import TraceFormatError
from lltrace.parsers._lines import DuplicateKey, duplicate_at, json_lines, read_text, unique_keys
from lltrace.source_info import SourceInfo
from lltrace.tables import STAGING, TABLES


def write_rows(stage: Path, table: str, part: int, rows: list[dict[str, Any]]) -> int:
    """Write one source's rows of ``table`` (canonical or staging) as ``stage/<table>/part-<part>.parquet``
    with the declared schema (keys a row lacks are NULL); returns the row count."""
    declared = TABLES.get(table) or STAGING[table]
    (stage / table).mkdir(parents=True, exist_ok=True)
    fractional = _whole_counts(rows, declared)
    if fractional:  # the physical checks report them with the rest (lltrace.ingest.checks)
        with open(stage / FRACTIONAL, "a") as f:
            for column, n in fractional.items():
                f.write(json.dumps({"table": table, "column": column, "part": part, "rows": n}) + "\n")
    pq.write_table(table_from_rows(rows, declared), stage / table / f"part-{part:05d}.parquet")
    return len(rows)


def write_columns(stage: Path, table: str, part: int, columns: pa.Table) -> int:
    """``write_rows`` for a source read in bulk: its columns (any Arrow types that cast to the declared ones;
    a declared column it lacks is NULL) as ``stage/<table>/part-<part>.parquet``; returns the row count.
    Only for tables without integer counts (whose fractions ``write_rows`` reports)."""
    declared = (TABLES.get(table) or STAGING[table]).schema
    n = columns.num_rows
    arrays = [columns[f.name].cast(f.type) if f.name in columns.column_names else pa.nulls(n, f.type) for f in declared]
    (stage / table).mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_arrays(arrays, schema=declared), stage / table / f"part-{part:05d}.parquet")
    return n


FRACTIONAL = "_fractional.jsonl"  # staged counts of counts that were not whole numbers, set to NULL


def _whole_counts(rows: list[dict[str, Any]], declared: Any) -> dict[str, int]:
    """In place: a float in an integer column becomes the int it equals, or NULL when it has a fraction (a
    token count of 150.5 is damage; truncating it would hide that). Returns the NULLed counts per column."""
    ints = [c.name for c in declared.columns if pa.types.is_integer(c.type)]
    out: dict[str, int] = {}
    for r in rows:
        for name in ints:
            v = r.get(name)
            if type(v) is float:
                if v.is_integer():
                    r[name] = int(v)
                else:
                    r[name] = None
                    out[name] = out.get(name, 0) + 1
    return out


def strip_bom(head: bytes) -> bytes:
    """The head without a UTF-8 byte-order mark and leading white space."""
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")


def load_json(path: str) -> Any:
    """One JSON document; broken JSON or UTF-8 is a one-line error with the line or byte."""
    text = read_text(path)
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(path, f"line {exc.lineno}", f"invalid JSON ({exc.msg})") from None
    except DuplicateKey as exc:
        raise TraceFormatError(path, duplicate_at(text, exc.key), f"invalid JSON ({exc})") from None
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, f"byte {exc.start}", "invalid UTF-8") from None


def json_objects(path: str, info: SourceInfo | None = None) -> list[dict]:
    """JSON lines that must each be an object (a cut-off last line is dropped with a warning)."""
    out = json_lines(path, info)
    for n, obj in enumerate(out, start=1):
        if not isinstance(obj, dict):
            raise TraceFormatError(path, f"record {n}", "expected a JSON object")
    return out


def check_ids(path: str, rows: list[dict[str, Any]]) -> None:
    """A request id given twice in one file is an error naming the record."""
    seen: set[str] = set()
    for i, r in enumerate(rows):
        rid = r.get("request_id")
        if rid is None:
            continue
        if rid in seen:
            raise TraceFormatError(path, f"record {i}", f"duplicate request id {rid!r}")
        seen.add(rid)


# A wall clock (epoch times: profiler baseTimeNanoseconds, span times, scrape times, CSV dates) read before
# this moment or more than a day after now is a broken clock, not a run: LLM serving traces start in the
# 2020s, and 2015-01-01 leaves every real file a wide margin. Clocks with an arbitrary origin (perf_counter,
# monotonic stamps, relative milliseconds) are not wall clocks and are not held to this.
WALL_CLOCK_FLOOR_S = 1_420_070_400.0  # 2015-01-01T00:00:00Z
WALL_CLOCK_SLACK_S = 86_400.0


ERROR_TEXT_LIMIT = 300
"""The most characters of a source's error text kept on a request (a whole response body can follow a status)."""


def error_line(text: Any) -> str | None:
    """A source's error text for a request on one line, or None where it gives none: a Python traceback (what
    vLLM's and SGLang's bench clients store for an exception) as its last line, the exception itself; any other
    text with its whitespace runs as one space; cut to ``ERROR_TEXT_LIMIT`` characters (an ellipsis says so)."""
    if text is None:
        return None
    text = str(text).strip()
    if text.startswith("Traceback (most recent call last)"):
        text = text.splitlines()[-1].strip()
    text = " ".join(text.split())
    if not text:
        return None
    return text if len(text) <= ERROR_TEXT_LIMIT else text[: ERROR_TEXT_LIMIT - 1] + "\u2026"


def error_message(body: Any) -> Any:
    """The message of an error response's body where it is an OpenAI-style error (``{"error": {"message": ...}}``,
    or vLLM's and SGLang's ``{"object": "error", "message": ...}``), else the body as it is."""
    if not isinstance(body, str) or not body.lstrip().startswith("{"):
        return body
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    inner = doc.get("error") if isinstance(doc, dict) else None
    found = inner if isinstance(inner, dict) else doc if isinstance(doc, dict) else {}
    message = found.get("message")
    return message if isinstance(message, str) and message.strip() else body


def reason_status(text: Any) -> int | None:
    """The HTTP status whose standard reason phrase ``text`` is, exactly (``Bad Request``: 400), else None: what
    vLLM's and SGLang's bench clients keep of a refused request is the response's reason phrase alone."""
    if not isinstance(text, str):
        return None
    return _REASONS.get(text.strip())


_REASONS = {s.phrase: s.value for s in HTTPStatus}


def error_code(value: Any) -> int | None:
    """A source's error code as an integer (HTTP statuses are written as numbers or digit strings), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,9}", value.strip()):
        return int(value)
    return None


def check_wall_clock(path: str, where: str, seconds: float, what: str) -> None:
    """Raise the one-line ``TraceFormatError`` when an epoch time ``seconds`` is before 2015 or in the
    future (more than a day past now); ``what`` names the clock (``baseTimeNanoseconds``, a span start)."""
    now = time.time()
    if WALL_CLOCK_FLOOR_S <= seconds <= now + WALL_CLOCK_SLACK_S:
        return
    try:
        when = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        when = f"{seconds:.6g} s from the epoch"
    side = "before 2015" if seconds < WALL_CLOCK_FLOOR_S else "in the future"
    raise TraceFormatError(path, where, f"{what} is dated {when}, {side}: a wall clock no real run has")


def check_row_clocks(path: str, rows: list[dict[str, Any]], column: str, what: str) -> None:
    """``check_wall_clock`` on one epoch-time column of a request-level source's rows (``request N``)."""
    for i, r in enumerate(rows, start=1):
        if r.get(column) is not None:
            check_wall_clock(path, f"request {i}", r[column], what)


def stamp_ns(path: str, where: str, value: Any) -> int | None:
    """An integer stamp or count a record gives (None when absent); beyond int64 it is the one-line error:
    no clock or count has such a value, and float arithmetic on it would hide that."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT64_MAX:
        raise TraceFormatError(path, where, f"{value} does not fit a 64-bit integer")
    return value


_STATISTIC = re.compile(r"^(mean|median|min|max|avg|std|stddev|count|rate|p\d+(\.\d+)?)$")
INT64_MAX = 2**63 - 1


def not_a_figure(value: Any, signed: bool = False) -> bool:
    """True for a value no benchmark tool writes as a statistic: text, a boolean, NaN or an infinity, an integer
    beyond int64, or a negative number where the quantity cannot be negative (``signed``: it can)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return True
    if isinstance(value, int):
        return abs(value) > INT64_MAX or (value < 0 and not signed)
    return not math.isfinite(value) or (value < 0 and not signed)


def clean_statistics(path: str, tree: dict[str, Any], info: SourceInfo, signed: tuple[str, ...] = ()) -> None:
    """Set to None, in place, every statistic (``mean``, ``p90``, ``count``, ... at any depth of ``tree``) that
    is not a figure (``not_a_figure``), and say how many with a warning in ``info``; the tables named in
    ``signed`` hold quantities that can be negative (inference-perf's ``schedule_delay``: a request sent early)."""
    bad: list[str] = []

    def walk(node: dict[str, Any], where: tuple[str, ...]) -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value, (*where, str(key)))
            elif value is not None and _STATISTIC.match(str(key)):
                if not_a_figure(value, signed=any(w in signed for w in where)):
                    bad.append(f"{'.'.join((*where, str(key)))}={value!r}")
                    node[key] = None

    walk(tree, ())
    report_unread_figures(path, info, bad)


def drop_reversed(path: str, info: SourceInfo, rows: list[dict[str, Any]], reversed_at: list[int], what: str) -> None:
    """Records that end before they start (``reversed_at``: their indices in ``rows``; ``what`` names the two
    fields): no latency of theirs can be trusted, so their TTFT and e2e are set NULL, counted and said in one
    warning; the rest of the file is read as it is."""
    if not reversed_at:
        return
    for i in reversed_at:
        rows[i]["ttft_s"] = rows[i]["e2e_s"] = None
    info.dropped["records_ending_before_they_start"] = len(reversed_at)
    info.warnings.append(
        f"{path}: {len(reversed_at)} record(s) end before they start ({what}): their TTFT and e2e set NULL "
        f"(first: record {reversed_at[0] + 1})"
    )


def duration_ms(path: str, where: str, v: Any) -> float | None:
    """A duration a record writes in milliseconds, in seconds (None where absent); a value that is no
    non-negative number is the one-line error naming ``where``."""
    if v is None:
        return None
    if not_a_figure(v):
        raise TraceFormatError(path, where, f"{str(v)[:40]!r} is not a duration in ms")
    return float(v) / 1e3


def whole_count(path: str, where: str, v: Any) -> int | None:
    """A count a record writes (None where absent); a value that is no whole non-negative number is the one-line
    error naming ``where``."""
    if v is None:
        return None
    if not_a_figure(v) or not float(v).is_integer():
        raise TraceFormatError(path, where, f"{str(v)[:40]!r} is not a count")
    return int(v)


def report_unread_figures(path: str, info: SourceInfo, bad: list[str]) -> None:
    """Count and say (one warning) the summary figures of ``path`` left NULL for not being figures (``bad``:
    where and what, as the file has them)."""
    if not bad:
        return
    info.dropped["summary_values_not_numbers"] = info.dropped.get("summary_values_not_numbers", 0) + len(bad)
    info.warnings.append(
        f"{path}: {len(bad)} summary figure(s) that are not finite numbers in their range, left NULL: "
        + ", ".join(bad[:4])
        + (f" and {len(bad) - 4} more" if len(bad) > 4 else "")
    )


def chain_iteration_ends(rows: list[dict[str, Any]], seconds_of: Callable[[str], float | None]) -> int:
    """Place log iteration rows (``engine_steps`` from ``Iteration(k)`` lines, in step order) on a clock: a line
    is printed when its iteration ends, stamped to the second, so each ``end_s`` is the previous end plus this
    iteration's elapsed time, kept at or after its own stamp (``seconds_of(log_stamp)``); ``start_s`` is the end
    less the elapsed time. Each engine (``engine``: data-parallel engines log their own iterations, each numbered
    from 0) is chained on its own. Rows already placed are left; returns how many could not be (no time for the
    stamp)."""
    prev_end = None
    unplaced = 0
    engine: object = None
    for r in sorted(rows, key=lambda r: (r.get("engine") or "", r["step_id"])):
        if r.get("engine") != engine:
            engine, prev_end = r.get("engine"), None
        if r.get("end_s") is not None or r.get("log_stamp") is None:
            continue
        stamp = seconds_of(r["log_stamp"])
        if stamp is None:
            unplaced += 1
            continue
        wall = r["wall_s"] or 0.0
        end = stamp if prev_end is None else max(stamp, prev_end + wall)
        r["end_s"], r["start_s"] = end, end - wall
        prev_end = end
    return unplaced


# The stamp a log collector puts before each line it keeps: `kubectl logs --timestamps`, `docker logs -t`, a CI
# runner's log (RFC 3339: a date, a time to the nanosecond, an explicit zone); the last one before the logger's
# own header is taken (a runner's stamp before a container's)
COLLECTOR_CLOCK = "the log collector's stamp on each line (RFC 3339: date, zone and fraction as written)"
_COLLECTED = re.compile(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)(?=\s)")


def collected_seconds(prefix: str) -> float | None:
    """Seconds since the epoch of the RFC 3339 stamp in the text before a log line's own content (a collector's, or
    a logger's own such as TGI's tracing: its zone as written, its fraction to the nanosecond; the last one there),
    or None where there is none or it names no moment."""
    found = _COLLECTED.findall(prefix)
    if not found:
        return None
    day, time_of_day, fraction, zone = found[-1]
    try:
        when = datetime.strptime(f"{day} {time_of_day}", "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    offset = 0 if zone == "Z" else (1 if zone[0] == "+" else -1) * (int(zone[1:3]) * 3600 + int(zone[-2:]) * 60)
    return when.replace(tzinfo=timezone.utc).timestamp() - offset + float(fraction or 0)


# Logs kept as JSON, a line per record, after whatever prefix a collector puts: vLLM's own JSON records
# (--logging-config.formatter json, vLLM >= 0.32: asctime, levelname, name, processName, process, message,
# vllm_process_name), and Docker's json-file driver's lines ({"log": the line as printed, "stream", "time": RFC 3339})
_JSON_LINE = re.compile(r'^(?P<prefix>[^{]*)(?P<record>\{"(?:asctime|log)": ?".*\})\s*$')


def json_log(head: bytes) -> str | None:
    """Which JSON log a head holds: ``"vllm"`` (vLLM's records: a vLLM logger's name among them), ``"docker"``
    (Docker's json-file lines), or None."""
    if b'{"asctime": "' in head and b'"levelname": "' in head and b'"name": "vllm.' in head:
        return "vllm"
    if b'{"log":"' in head and b'"time":"' in head and b'"stream":"' in head:
        return "docker"
    return None


def json_log_as_text(text: str) -> tuple[str, str | None]:
    """A JSON log written as the text lines its records stand for, so that one reader reads both: vLLM's records as
    its text formatter's dated lines (``LEVEL YYYY-MM-DD HH:MM:SS,mmm [logger:0] message``: the stamp with its year,
    as NIM's config prints it; the logger's name where the text has file and line), Docker's lines as the line
    printed after the collector's stamp (``time``). Other lines stay as they are. Returns the text and what was
    unwrapped ("JSON records (820)"), or the text unchanged and None where it is no JSON log."""
    kind = json_log(text[: 64 << 10].encode("utf-8", "replace"))
    if kind is None:
        return text, None
    out, n = [], 0
    for line in text.splitlines():
        m = _JSON_LINE.match(line)
        record: Any = None
        if m is not None:
            try:
                record = json.loads(m.group("record"))
            except json.JSONDecodeError:
                record = None
        if kind == "vllm" and isinstance(record, dict) and {"asctime", "levelname", "message"} <= record.keys():
            logger = str(record.get("name") or "vllm").replace(" ", "_")
            out.append(f"{m.group('prefix')}{record['levelname']} {record['asctime']} [{logger}:0] {record['message']}")
        elif kind == "docker" and isinstance(record, dict) and isinstance(record.get("log"), str):
            out.append(f"{m.group('prefix')}{record.get('time', '')} {record['log'].rstrip(chr(10))}")
        else:
            out.append(line)
            continue
        n += 1
    what = "JSON records" if kind == "vllm" else "Docker json-file lines"
    return "\n".join(out) + "\n", f"{what} ({n:,})"


def log_date_seconds(stamp: str) -> float | None:
    """Seconds since the epoch of a ``YYYY-MM-DD HH:MM:SS`` log stamp, its zone UTC (assumed: logs print none);
    None for a day that year does not have."""
    try:
        return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None

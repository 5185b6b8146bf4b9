"""What every request-level parser does the same way: load a JSON document, read JSON-lines objects, check
durations and ids, and write a canonical or staging table's rows for one source file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from lltrace.errors import TraceFormatError
from lltrace.parsers._lines import json_lines, read_text
from lltrace.tables import STAGING, TABLES, SourceInfo, table_from_rows


def write_rows(stage: Path, table: str, part: int, rows: list[dict[str, Any]]) -> int:
    """Write one source's rows of ``table`` (canonical or staging) as ``stage/<table>/part-<part>.parquet``
    with the declared schema (keys a row lacks are NULL); returns the row count."""
    declared = TABLES.get(table) or STAGING[table]
    (stage / table).mkdir(parents=True, exist_ok=True)
    pq.write_table(table_from_rows(rows, declared), stage / table / f"part-{part:05d}.parquet")
    return len(rows)


def strip_bom(head: bytes) -> bytes:
    """The head without a UTF-8 byte-order mark and leading white space."""
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")


def load_json(path: str) -> Any:
    """One JSON document; broken JSON or UTF-8 is a one-line error with the line or byte."""
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise TraceFormatError(path, f"line {exc.lineno}", f"invalid JSON ({exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, f"byte {exc.start}", "invalid UTF-8") from None


def json_objects(path: str, info: SourceInfo | None = None) -> list[dict]:
    """JSON lines that must each be an object (a cut-off last line is dropped with a warning)."""
    out = json_lines(path, info)
    for n, obj in enumerate(out, start=1):
        if not isinstance(obj, dict):
            raise TraceFormatError(path, f"record {n}", "expected a JSON object")
    return out


def check_durations(path: str, rows: list[dict[str, Any]], where: str) -> None:
    """Negative latencies mean broken clocks or fields: a bad-input error, not data."""
    for i, r in enumerate(rows):
        for k in ("ttft_s", "e2e_s", "queue_s", "server_e2e_s"):
            v = r.get(k)
            if v is not None and v < 0:
                raise TraceFormatError(path, f"{where} {i}", f"negative duration {k}={v}")


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

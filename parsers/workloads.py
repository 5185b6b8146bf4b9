"""Production arrival traces and lltrace's own request schema → ``requests`` rows.

Formats: Azure LLM inference traces 2023 (``2023-11-16 18:17:03.9799600``, 100 ns, no zone) and 2024
(``2024-05-10 00:00:00.009930+00:00``, µs with zone, some rows without a fraction), BurstGPT (v1.1 and
v1.2+ columns; zero response tokens = a failed request), Mooncake FAST'25 JSONL (relative ms, ``hash_ids``
= prefix blocks of 512 tokens), and lltrace's own CSV / JSON-lines / Parquet request schema. Everything is
decoded by DuckDB's readers straight into Parquet: tens of millions of rows stream in bounded memory.

Arrival traces carry no request ids, so ``request_id`` stays NULL for them (a row is one request, in file
order; ``client_id`` names the file or, for BurstGPT, the model and log type).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import check_wall_clock
from lltrace.parsers._lines import partial_last_line, truncation_note, without_last_line
from lltrace.tables import REQUESTS, SourceInfo

AZURE = "azure-llm-trace"
BURSTGPT = "burstgpt"
MOONCAKE = "mooncake-trace"
OWN = "lltrace-requests"

MOONCAKE_BLOCK_TOKENS = 512

_REQUEST_COLUMNS = REQUESTS.duckdb_types


def _first_line(head: bytes) -> str:
    return head.lstrip(b"\xef\xbb\xbf").split(b"\n", 1)[0].decode("utf-8", "replace").strip().strip("\r")


def _header(head: bytes) -> list[str]:
    return [c.strip() for c in _first_line(head).split(",")]


def sniff_azure(head: bytes) -> bool:
    """Azure LLM (and LMM) inference trace CSV."""
    cols = _header(head)
    return cols[:1] == ["TIMESTAMP"] and "ContextTokens" in cols and "GeneratedTokens" in cols


def sniff_burstgpt(head: bytes) -> bool:
    """BurstGPT CSV (v1.1 or v1.2+ header)."""
    cols = _header(head)
    return cols[:1] == ["Timestamp"] and "Request tokens" in cols and "Response tokens" in cols


def sniff_mooncake(head: bytes) -> bool:
    """Mooncake JSONL: timestamp (ms), input_length, output_length, hash_ids."""
    line = _first_line(head)
    return line.startswith("{") and all(f'"{k}"' in line for k in ("timestamp", "input_length", "output_length"))


def sniff_own(head: bytes) -> bool:
    """lltrace's request schema as CSV, JSON lines or Parquet."""
    if head[:4] == b"PAR1":
        return True  # checked against the schema when read
    line = _first_line(head)
    needed = ("request_id", "input_tokens", "output_tokens")
    if line.startswith("{"):
        return all(f'"{k}"' in line for k in needed) and ('"arrival_s"' in line or '"arrival_time"' in line)
    cols = [c.strip().strip('"') for c in line.split(",")]
    return all(k in cols for k in needed) and ("arrival_s" in cols or "arrival_time" in cols)


def _connect(stage: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(
        f"SET threads = 2; SET memory_limit = '512MB'; SET temp_directory = '{stage}/_tmp'; SET TimeZone = 'UTC'; "
        "SET enable_progress_bar = false"
    )
    return con


def _copy(con: duckdb.DuckDBPyConnection, path: str, stage: Path, part: int, select: str, params: list) -> int:
    """Write the requests rows of one source: the canonical columns it gives, with their canonical types
    (the store's view adds the others as NULL)."""
    (stage / "requests").mkdir(parents=True, exist_ok=True)
    out = stage / "requests" / f"part-{part:05d}.parquet"
    try:
        given = [r[0] for r in con.execute(f"DESCRIBE {select}", params).fetchall()]
        cols = ", ".join(f"CAST({c} AS {_REQUEST_COLUMNS[c]}) AS {c}" for c in given if c in _REQUEST_COLUMNS)
        (n,) = con.execute(
            f"COPY (SELECT {cols} FROM ({select})) TO '{out}' (FORMAT parquet, COMPRESSION zstd)", params
        ).fetchone()
    except duckdb.Error as exc:
        text = str(exc)
        line = re.search(r"[Ll]ine:? (\d+)", text)
        detail = re.search(r"Could not convert string (\"[^\n]*?\") to '(\w+)'", text)
        msg = f"{detail.group(1)} is not a {detail.group(2)}" if detail else text.splitlines()[0]
        msg = re.sub(r'file "[^"]*"', f'file "{path}"', msg)  # the input, not a staged copy of it
        raise TraceFormatError(path, f"line {line.group(1)}" if line else "file", msg) from None
    return int(n)


def _ts_ns(x: str) -> str:
    """SQL: timestamp text → epoch nanoseconds, NULL when it is not a timestamp.

    With a zone (``+00:00``, ``Z``) DuckDB's TIMESTAMPTZ parser reads it (µs, as the 2024 traces are); without
    one it is read as TIMESTAMP_NS in UTC, which keeps Azure 2023's 100 ns digits exact.
    """
    return (
        f"(CASE WHEN right({x}, 1) = 'Z' OR substr({x}, -6, 1) IN ('+', '-') "
        f"THEN epoch_ns(TRY_CAST({x} AS TIMESTAMPTZ)) ELSE epoch_ns(TRY_CAST({x} AS TIMESTAMP_NS)) END)"
    )


def _check_arrivals(con: duckdb.DuckDBPyConnection, path: str, out: Path, column: str) -> None:
    (bad,) = con.execute(f"SELECT count(*) FROM read_parquet('{out}') WHERE arrival_ns IS NULL").fetchone()
    if bad:
        raise TraceFormatError(path, f"{column} column", f"{bad} rows are not 'YYYY-MM-DD HH:MM:SS[.f][zone]'")


def ingest_azure(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Azure LLM inference trace: arrival (exact ns), prompt and output tokens per request.

    The timestamp style is read from the first row: with a zone (2024, µs) DuckDB's CSV reader parses
    TIMESTAMPTZ; without one (2023, 100 ns) TIMESTAMP_NS in UTC keeps every digit. A row that does not parse
    is an error naming its line.
    """
    info = SourceInfo(path=path, format=AZURE)
    with open(path, "rb") as f:
        f.readline()
        first = f.readline().decode("utf-8", "replace").split(",", 1)[0].strip()
    zoned = first.endswith("Z") or first[-6:-5] in ("+", "-")
    ts_type = "TIMESTAMPTZ" if zoned else "TIMESTAMP_NS"
    con = _connect(stage)
    # columns by name (others ignored); a short row reads as NULLs and is dropped, counted
    source = (
        f"read_csv(?, header = true, null_padding = true, all_varchar = false, "
        f"types = {{'TIMESTAMP': '{ts_type}', 'ContextTokens': 'BIGINT', 'GeneratedTokens': 'BIGINT'}})"
    )
    complete = "TIMESTAMP IS NOT NULL AND ContextTokens IS NOT NULL AND GeneratedTokens IS NOT NULL"
    try:
        select = f"""
            SELECT ? AS client_id, epoch_ns(TIMESTAMP) / 1e9 AS arrival_s, epoch_ns(TIMESTAMP) AS arrival_ns,
                   ContextTokens AS input_tokens, GeneratedTokens AS output_tokens, 'ok' AS status
            FROM {source} WHERE {complete}
        """
        info.records = _copy(con, path, stage, part, select, [Path(path).name, path])
        (short,) = con.execute(f"SELECT count(*) FROM {source} WHERE NOT ({complete})", [path]).fetchone()
        lo, hi = con.execute(
            f"SELECT min(epoch_ns(TIMESTAMP)), max(epoch_ns(TIMESTAMP)) FROM {source} WHERE {complete}", [path]
        ).fetchone()
        # dates are a wall clock: the first row dated outside 2015..now is the error
        for ns in (x for x in (lo, hi) if x is not None):
            try:
                check_wall_clock(path, "TIMESTAMP column", ns / 1e9, "a row")
            except TraceFormatError as exc:
                (line,) = con.execute(
                    f"SELECT n FROM (SELECT row_number() OVER () + 1 AS n, TIMESTAMP FROM {source}) "
                    "WHERE epoch_ns(TIMESTAMP) = ? ORDER BY n LIMIT 1",
                    [path, ns],
                ).fetchone()
                raise TraceFormatError(path, f"line {line}", exc.message) from None
    finally:
        con.close()
    if short:
        info.dropped["rows_missing_fields"] = int(short)
        info.warnings.append(f"{path}: {short} rows with missing fields: dropped")
    info.version = "2024 (us, with zone)" if zoned else "2023 (100 ns, no zone)"
    info.details["clock"] = {
        "origin": "TIMESTAMP column, epoch ns",
        "zone": "as written" if zoned else "UTC assumed (no zone in the file)",
    }
    return info


def ingest_burstgpt(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """BurstGPT: arrival (s from day 1), sizes, model/log type as the client, and e2e where v1.2+ gives it."""
    info = SourceInfo(path=path, format=BURSTGPT)
    con = _connect(stage)
    try:
        cols = [r[0] for r in con.execute("DESCRIBE SELECT * FROM read_csv(?, header = true)", [path]).fetchall()]
        has_elapsed = "Elapsed time" in cols
        e2e = '"Elapsed time"' if has_elapsed else "NULL"
        select = f"""
            SELECT "Model" || '/' || "Log Type" AS client_id, CAST("Timestamp" AS DOUBLE) AS arrival_s,
                   CAST(round(CAST("Timestamp" AS DOUBLE) * 1e9) AS BIGINT) AS arrival_ns,
                   "Request tokens" AS input_tokens,
                   CASE WHEN "Response tokens" = 0 THEN NULL ELSE "Response tokens" END AS output_tokens,
                   CASE WHEN "Response tokens" = 0 THEN 'error' ELSE 'ok' END AS status,
                   CASE WHEN "Response tokens" = 0 THEN NULL ELSE CAST({e2e} AS DOUBLE) END AS e2e_s
            FROM read_csv(?, header = true)
        """
        info.records = _copy(con, path, stage, part, select, [path])
        (failed,) = con.execute(
            'SELECT count(*) FROM read_csv(?, header = true) WHERE "Response tokens" = 0', [path]
        ).fetchone()
    finally:
        con.close()
    info.version = "v1.2+ (Session ID, Elapsed time)" if has_elapsed else "v1.1"
    info.details["failed_requests"] = int(failed)
    info.details["clock"] = {"origin": "seconds from 00:00 of the trace's first day (relative)"}
    return info


def _whole_lines(path: str, stage: Path, info: SourceInfo) -> str:
    """The JSON-lines file to hand DuckDB: ``path``, or a copy without a last line cut off by a truncated
    write (dropped with a warning); the caller removes a copy when done."""
    if (cut := partial_last_line(path)) is None:
        return path
    info.truncated = f"partial line {cut[0]}"
    info.warnings.append(truncation_note(path, *cut))
    return without_last_line(path, cut[1], stage / "_tmp")


def ingest_mooncake(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Mooncake JSONL: relative arrival (ms), sizes and the prefix-block hash ids (512 tokens a block)."""
    info = SourceInfo(path=path, format=MOONCAKE, version="FAST'25 release")
    source = _whole_lines(path, stage, info)
    con = _connect(stage)
    try:
        # a damaged line reads as a row of NULLs (ignore_errors): dropped and counted, the rest read
        lines = """
            read_json(?, format = 'newline_delimited', ignore_errors = true,
                      columns = {timestamp: 'BIGINT', input_length: 'BIGINT', output_length: 'BIGINT',
                                 hash_ids: 'BIGINT[]'})
        """
        whole = "timestamp IS NOT NULL AND input_length IS NOT NULL AND output_length IS NOT NULL"
        select = f"""
            SELECT ? AS client_id, timestamp / 1e3 AS arrival_s, CAST(timestamp AS BIGINT) * 1000000 AS arrival_ns,
                   input_length AS input_tokens, output_length AS output_tokens,
                   hash_ids AS prefix_block_ids, 'ok' AS status
            FROM {lines} WHERE {whole}
        """
        info.records = _copy(con, path, stage, part, select, [Path(path).name, source])
        (damaged,) = con.execute(f"SELECT count(*) FROM {lines} WHERE NOT ({whole})", [source]).fetchone()
        if damaged and damaged >= info.records:
            raise TraceFormatError(
                path, "content", f"{damaged} of {damaged + info.records} lines are not Mooncake records"
            )
        if damaged:
            info.dropped["damaged_lines"] = int(damaged)
            info.truncated = info.truncated or "damaged lines"
            info.warnings.append(f"{path}: {damaged} damaged line(s) (no timestamp or sizes): dropped, the rest read")
    finally:
        con.close()
        if source != path:
            os.unlink(source)
    info.details["clock"] = {"origin": "milliseconds from the trace start (relative)"}
    info.details["prefix_block_tokens"] = MOONCAKE_BLOCK_TOKENS
    return info


_OWN_OPTIONAL = (
    "scheduled_s",
    "first_token_s",
    "last_token_s",
    "finished_s",
    "cached_tokens",
    "num_preemptions",
    "status",
    "client_id",
    "ttft_s",
    "e2e_s",
    "queue_s",
    "prefill_s",
    "decode_s",
)


def ingest_own(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """lltrace's request schema (README): request_id, arrival_s or arrival_time (ISO-8601), input_tokens,
    output_tokens, and any of the optional columns."""
    info = SourceInfo(path=path, format=OWN)
    with open(path, "rb") as f:
        magic = f.read(4)
        f.seek(0)
        first = f.readline().lstrip()
    source = path
    con = _connect(stage)
    if magic == b"PAR1":
        reader, info.version = "read_parquet(?)", "Parquet"
        cols = set(pq.read_schema(path).names)
    else:
        if first.startswith(b"{"):
            reader, info.version = "read_json(?, format = 'newline_delimited')", "JSON lines"
            source = _whole_lines(path, stage, info)
        else:
            reader, info.version = "read_csv(?, header = true)", "CSV"
        try:
            cols = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {reader}", [source]).fetchall()}
        except duckdb.Error as exc:
            con.close()
            raise TraceFormatError(path, "file", str(exc).splitlines()[0]) from None
    missing = [c for c in ("request_id", "input_tokens", "output_tokens") if c not in cols]
    if missing or not ({"arrival_s", "arrival_time"} & cols):
        con.close()
        need = missing + ([] if {"arrival_s", "arrival_time"} & cols else ["arrival_s or arrival_time"])
        raise TraceFormatError(path, "header", f"missing required column(s): {', '.join(need)}")
    if "arrival_s" in cols:
        arrival = "CAST(arrival_s AS DOUBLE)"
        arrival_ns = "CAST(round(CAST(arrival_s AS DOUBLE) * 1e9) AS BIGINT)"
    else:
        arrival_ns = _ts_ns("CAST(arrival_time AS VARCHAR)")
        arrival = f"{arrival_ns} / 1e9"
    extra = [c for c in _OWN_OPTIONAL if c in cols]
    status = "" if "status" in cols else ", 'ok' AS status"
    select = f"""
        SELECT CAST(request_id AS VARCHAR) AS request_id, {arrival} AS arrival_s, {arrival_ns} AS arrival_ns,
               input_tokens, output_tokens {"".join(", " + c for c in extra)} {status}
        FROM {reader}
    """
    try:
        info.records = _copy(con, path, stage, part, select, [source])
        if "arrival_time" in cols and "arrival_s" not in cols:
            _check_arrivals(con, path, stage / "requests" / f"part-{part:05d}.parquet", "arrival_time")
        (dups,) = con.execute(f"SELECT count(*) - count(DISTINCT request_id) FROM {reader}", [source]).fetchone()
    finally:
        con.close()
        if source != path:
            os.unlink(source)
    if dups:
        raise TraceFormatError(path, "request_id column", f"{dups} duplicate request ids")
    return info

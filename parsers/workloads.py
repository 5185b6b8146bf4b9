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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from lltrace.cores import usable_cores
from lltrace.errors import TraceFormatError
from lltrace.parsers._io import check_wall_clock
from lltrace.parsers._lines import partial_last_line, truncation_note, without_last_line
from lltrace.source_info import SourceInfo
from lltrace.tables import REQUESTS

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
        f"SET threads = {usable_cores()}; SET memory_limit = '512MB'; SET temp_directory = '{stage}/_tmp'; "
        "SET TimeZone = 'UTC'; SET enable_progress_bar = false"
    )
    return con


def _whole_number(column: str) -> str:
    """SQL: a count or stamp read as text, as BIGINT when it is a whole number that fits, else NULL (DuckDB's own
    casts round 12.5 to 13 or truncate 100.5 to 100 without a word; no tool writes a fraction of a token)."""
    return f"CASE WHEN regexp_full_match(trim({column}), '-?[0-9]+') THEN TRY_CAST(trim({column}) AS BIGINT) END"


def _copy(
    con: duckdb.DuckDBPyConnection,
    path: str,
    stage: Path,
    part: int,
    select: str,
    params: list,
    info: SourceInfo | None = None,
) -> int:
    """Write the requests rows of one source: the canonical columns it gives, with their canonical types
    (the store's view adds the others as NULL). A whole-number column the source gives with fractions (a
    CSV or JSON reader's DOUBLE) is NULL where the value has one, counted in ``info``: DuckDB's cast would
    round 12.5 to 13 without a word."""
    (stage / "requests").mkdir(parents=True, exist_ok=True)
    out = stage / "requests" / f"part-{part:05d}.parquet"
    try:
        described = con.execute(f"DESCRIBE {select}", params).fetchall()
        given = [r[0] for r in described]
        fractional = [
            r[0]
            for r in described
            if r[0] in _REQUEST_COLUMNS
            and _REQUEST_COLUMNS[r[0]] in ("BIGINT", "INTEGER")
            and str(r[1]).upper().startswith(("DOUBLE", "FLOAT", "DECIMAL"))
        ]

        def cast(c: str) -> str:
            if c in fractional:
                return f"CASE WHEN {c} = floor({c}) THEN CAST({c} AS {_REQUEST_COLUMNS[c]}) END AS {c}"
            return f"CAST({c} AS {_REQUEST_COLUMNS[c]}) AS {c}"

        cols = ", ".join(cast(c) for c in given if c in _REQUEST_COLUMNS)
        if fractional and info is not None:
            where = " OR ".join(f"{c} <> floor({c})" for c in fractional)
            (n_frac,) = con.execute(f"SELECT count(*) FROM ({select}) WHERE {where}", params).fetchone()
            if n_frac:
                info.dropped["not_whole_numbers"] = int(n_frac)
                info.warnings.append(
                    f"{path}: {n_frac} row(s) with a fraction in a whole-number column ({', '.join(fractional)}): "
                    "those values left NULL"
                )
        (n,) = con.execute(
            f"COPY (SELECT {cols} FROM ({select})) TO '{out}' (FORMAT parquet, COMPRESSION zstd)", params
        ).fetchone()
    except duckdb.Error as exc:
        raise _read_error(path, exc) from None
    return int(n)


def _read_error(path: str, exc: duckdb.Error) -> TraceFormatError:
    """DuckDB's error reading a source, as one line naming the input and the line where DuckDB gives it."""
    text = str(exc)
    line = re.search(r"[Ll]ine:? (\d+)", text)
    detail = re.search(r"Could not convert string (\"[^\n]*?\") to '(\w+)'", text)
    msg = f"{detail.group(1)} is not a {detail.group(2)}" if detail else text.splitlines()[0]
    msg = re.sub(r'file "[^"]*"', f'file "{path}"', msg)  # the input, not a staged copy of it
    return TraceFormatError(path, f"line {line.group(1)}" if line else "file", msg)


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
    # dates are a wall clock: the first row dated outside 2015..now is the error, naming its row
    rows = con.execute(
        f"SELECT n, arrival_s FROM (SELECT row_number() OVER () AS n, arrival_s FROM read_parquet('{out}')) "
        "WHERE arrival_s = (SELECT min(arrival_s) FROM read_parquet(?)) "
        "OR arrival_s = (SELECT max(arrival_s) FROM read_parquet(?)) ORDER BY n",
        [str(out), str(out)],
    ).fetchall()
    for n, seconds in rows:
        check_wall_clock(path, f"row {n}", seconds, "a request's arrival_time")


def ingest_azure(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Azure LLM inference trace: arrival (exact ns), prompt and output tokens per request.

    The timestamp style is read from the first row: with a zone (2024, µs) DuckDB's CSV reader parses
    TIMESTAMPTZ; without one (2023, 100 ns) TIMESTAMP_NS in UTC keeps every digit. A row that does not parse
    is an error naming its line, except a last row without a line end that is not whole: a cut row, dropped
    with a warning (the released files end without a line end, so a whole last row is read).
    """
    info = SourceInfo(path=path, format=AZURE)
    # Azure's released files end without a line end: a last row that reads whole is kept, a cut one dropped
    whole = _whole_lines(path, stage, info, _azure_row)
    try:
        return _read_azure(path, whole, stage, part, info)
    finally:
        if whole != path:
            Path(whole).unlink(missing_ok=True)


_AZURE_ROW = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?,\d+,\d+\r?")


def _azure_row(line: bytes) -> bool:
    """A whole Azure row (timestamp, context and generated tokens), as a last line without a line end must be."""
    return _AZURE_ROW.fullmatch(line.strip()) is not None


def _read_azure(path: str, whole: str, stage: Path, part: int, info: SourceInfo) -> SourceInfo:
    """``ingest_azure`` on ``whole`` (the file, or a copy without its cut last row); errors name ``path``."""
    with open(whole, "rb") as f:
        f.readline()
        first = f.readline().decode("utf-8", "replace").split(",", 1)[0].strip()
    zoned = first.endswith("Z") or first[-6:-5] in ("+", "-")
    ts_type = "TIMESTAMPTZ" if zoned else "TIMESTAMP_NS"
    con = _connect(stage)
    # columns by name (others ignored); a short row reads as NULLs and is dropped, counted
    source = (
        f"read_csv(?, header = true, null_padding = true, all_varchar = false, "
        f"types = {{'TIMESTAMP': '{ts_type}', 'ContextTokens': 'VARCHAR', 'GeneratedTokens': 'VARCHAR'}})"
    )
    raw = source
    source = (
        f"(SELECT TIMESTAMP, {_whole_number('ContextTokens')} AS ContextTokens, "
        f"{_whole_number('GeneratedTokens')} AS GeneratedTokens, ContextTokens AS context_text, "
        f"GeneratedTokens AS generated_text FROM {raw})"
    )
    complete = "TIMESTAMP IS NOT NULL AND ContextTokens IS NOT NULL AND GeneratedTokens IS NOT NULL"
    try:
        select = f"""
            SELECT ? AS client_id, epoch_ns(TIMESTAMP) / 1e9 AS arrival_s, epoch_ns(TIMESTAMP) AS arrival_ns,
                   ContextTokens AS input_tokens, GeneratedTokens AS output_tokens, 'ok' AS status
            FROM {source} WHERE {complete}
        """
        integer = "regexp_full_match(trim({0}), '-?[0-9]+') AND TRY_CAST(trim({0}) AS BIGINT) IS NULL"
        beyond = f"{integer.format('context_text')} OR {integer.format('generated_text')}"
        # The complete rows copied in one pass; the rows left out are counted against the file's (a pass without
        # the token checks) and only where some are is the file searched for a count beyond int64.
        info.records = _copy(con, path, stage, part, select, [Path(path).name, whole])
        try:
            (total,) = con.execute(f"SELECT count(*) FROM {raw}", [whole]).fetchone()
        except duckdb.Error as exc:
            raise _read_error(path, exc) from None
        short = total - info.records
        found = (
            short
            and con.execute(
                f"SELECT n, context_text, generated_text FROM (SELECT row_number() OVER () + 1 AS n, * FROM {source}) "
                f"WHERE {beyond} ORDER BY n LIMIT 1",
                [whole],
            ).fetchone()
        )
        if found:  # a token count beyond int64: no such request
            number = max(found[1:], key=lambda t: len(str(t)))
            raise TraceFormatError(path, f"line {found[0]}", f"{number} does not fit a 64-bit integer")
        copied = stage / "requests" / f"part-{part:05d}.parquet"
        lo, hi = con.execute(f"SELECT min(arrival_ns), max(arrival_ns) FROM read_parquet('{copied}')").fetchone()
        # dates are a wall clock: the first row dated outside 2015..now is the error
        for ns in (x for x in (lo, hi) if x is not None):
            try:
                check_wall_clock(path, "TIMESTAMP column", ns / 1e9, "a row")
            except TraceFormatError as exc:
                (line,) = con.execute(
                    f"SELECT n FROM (SELECT row_number() OVER () + 1 AS n, TIMESTAMP FROM {source}) "
                    "WHERE epoch_ns(TIMESTAMP) = ? ORDER BY n LIMIT 1",
                    [whole, ns],
                ).fetchone()
                raise TraceFormatError(path, f"line {line}", exc.message) from None
    finally:
        con.close()
    if short:
        info.dropped["rows_missing_fields"] = int(short)
        info.warnings.append(f"{path}: {short} rows with missing fields or token counts not whole numbers: dropped")
    info.version = "2024 (us, with zone)" if zoned else "2023 (100 ns, no zone)"
    info.details["clock"] = {
        "origin": "TIMESTAMP column, epoch ns",
        "zone": "as written" if zoned else "UTC assumed (no zone in the file)",
    }
    return info


def ingest_burstgpt(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """BurstGPT: arrival (s from day 1), sizes, model/log type as the client, and e2e where v1.2+ gives it."""
    info = SourceInfo(path=path, format=BURSTGPT)
    whole = _whole_lines(path, stage, info, _burstgpt_row)
    con = _connect(stage)
    try:
        cols = [r[0] for r in con.execute("DESCRIBE SELECT * FROM read_csv(?, header = true)", [whole]).fetchall()]
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
        info.records = _copy(con, path, stage, part, select, [whole], info)
        (failed,) = con.execute(
            'SELECT count(*) FROM read_csv(?, header = true) WHERE "Response tokens" = 0', [whole]
        ).fetchone()
    finally:
        con.close()
        if whole != path:
            Path(whole).unlink(missing_ok=True)
    info.version = "v1.2+ (Session ID, Elapsed time)" if has_elapsed else "v1.1"
    info.details["failed_requests"] = int(failed)
    info.details["clock"] = {"origin": "seconds from 00:00 of the trace's first day (relative)"}
    return info


_BURSTGPT_ROW = re.compile(rb"[\d.]+,.*,(Conversation log|API log)\r?")


def _burstgpt_row(line: bytes) -> bool:
    """A whole BurstGPT row, as a last line without a line end must be: it starts with the timestamp and ends
    with the log type (``Conversation log`` or ``API log``, the two the README documents)."""
    return _BURSTGPT_ROW.fullmatch(line.strip()) is not None


def _whole_lines(path: str, stage: Path, info: SourceInfo, valid: Callable[[bytes], bool] | None = None) -> str:
    """The JSON-lines file to hand DuckDB: ``path``, or a copy without a last line cut off by a truncated
    write (dropped with a warning); the caller removes a copy when done."""
    if (cut := partial_last_line(path, *([valid] if valid else []))) is None:
        return path
    info.truncated = f"partial line {cut[0]}"
    info.warnings.append(truncation_note(path, *cut))
    return without_last_line(path, cut[1], stage / "_tmp")


_MOONCAKE_KEYS = (b'"timestamp"', b'"input_length"', b'"output_length"', b'"hash_ids"')


def _no_repeated_keys(path: str, source: str, keys: tuple[bytes, ...]) -> list[int]:
    """The one-line error for a line that names one of the format's keys twice (one policy in every reader:
    which value was meant is unknown; DuckDB's reader would take one silently). Returns the numbers of the
    lines that are not blank (DuckDB's k-th record is on the k-th of them)."""
    lines: list[int] = []
    with open(source, "rb") as f:
        for n, line in enumerate(f, start=1):
            if line.strip():
                lines.append(n)
            for key in keys:
                if line.count(key) > 1:
                    why = f"invalid JSON line (key {key.decode()[1:-1]!r} appears twice in one object)"
                    raise TraceFormatError(path, f"line {n}", why)
    return lines


def ingest_mooncake(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Mooncake JSONL: relative arrival (ms), sizes and the prefix-block hash ids (512 tokens a block)."""
    info = SourceInfo(path=path, format=MOONCAKE, version="FAST'25 release")
    source = _whole_lines(path, stage, info)
    numbered = _no_repeated_keys(path, source, _MOONCAKE_KEYS)
    con = _connect(stage)
    try:
        # a damaged line reads as a row of NULLs (ignore_errors): dropped and counted, the rest read
        lines = """
            read_json(?, format = 'newline_delimited', ignore_errors = true,
                      columns = {timestamp: 'VARCHAR', input_length: 'VARCHAR', output_length: 'VARCHAR',
                                 hash_ids: 'JSON'})
        """
        # the hash ids are a list of whole numbers in int64; a string, a fraction or a number beyond is no block id:
        # that line's blocks are NULL (said), never a cast guess
        as_ints = "TRY_CAST(hash_ids AS BIGINT[])"
        ids_ok = f"""(json_type(hash_ids) = 'ARRAY'
            AND coalesce(list_bool_and(list_transform(json_extract(hash_ids, '$[*]'),
                                                      lambda x: json_type(x) IN ('UBIGINT', 'BIGINT'))), true)
            AND len(list_filter({as_ints}, lambda v: v IS NULL)) = 0)"""
        numbers = f"""
            SELECT {_whole_number("timestamp")} AS timestamp, {_whole_number("input_length")} AS input_length,
                   {_whole_number("output_length")} AS output_length,
                   CASE WHEN {ids_ok} THEN {as_ints} END AS hash_ids,
                   hash_ids IS NOT NULL AND NOT coalesce({ids_ok}, false) AS bad_ids
            FROM {lines}
        """
        lines = f"({numbers})"
        whole = "timestamp IS NOT NULL AND input_length IS NOT NULL AND output_length IS NOT NULL"
        select = f"""
            SELECT ? AS client_id, timestamp / 1e3 AS arrival_s, timestamp * 1000000 AS arrival_ns,
                   input_length AS input_tokens, output_length AS output_tokens,
                   hash_ids AS prefix_block_ids, 'ok' AS status
            FROM {lines} WHERE {whole}
        """
        info.records = _copy(con, path, stage, part, select, [Path(path).name, source])
        (damaged,) = con.execute(f"SELECT count(*) FROM {lines} WHERE NOT ({whole})", [source]).fetchone()
        (bad_ids,) = con.execute(f"SELECT count(*) FROM {lines} WHERE {whole} AND bad_ids", [source]).fetchone()
        if bad_ids:
            info.dropped["hash_ids_not_whole_numbers"] = int(bad_ids)
            info.warnings.append(
                f"{path}: {bad_ids} line(s) with hash_ids that are not lists of whole numbers (strings, fractions, "
                "beyond 64 bits): their prefix blocks set NULL, the rest read"
            )
        if damaged and damaged >= info.records:
            raise TraceFormatError(
                path, "content", f"{damaged} of {damaged + info.records} lines are not Mooncake records"
            )
        if damaged:
            (k,) = con.execute(
                f"SELECT min(k) FROM (SELECT row_number() OVER () AS k, * FROM {lines}) WHERE NOT ({whole})", [source]
            ).fetchone()
            at = f"line {numbered[k - 1]}: " if k is not None and k <= len(numbered) else ""
            info.dropped["damaged_lines"] = int(damaged)
            info.truncated = info.truncated or "damaged lines"
            info.warnings.append(
                f"{path}: {at}{damaged} damaged line(s) (no timestamp or sizes, or not whole numbers): dropped, "
                "the rest read"
            )
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
    """lltrace's request schema (docs/formats.md): request_id, arrival_s or arrival_time (ISO-8601), input_tokens,
    output_tokens, and any of the optional columns."""
    info = SourceInfo(path=path, format=OWN)
    with open(path, "rb") as f:
        magic = f.read(4)
        f.seek(0)
        first = f.readline().removeprefix(b"\xef\xbb\xbf").lstrip()  # a byte-order mark is accepted
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
        info.records = _copy(con, path, stage, part, select, [source], info)
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

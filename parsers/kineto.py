"""PyTorch profiler (Kineto) Chrome-trace JSON → the profiler tables ``kernels``, ``ops``, ``annotations``,
``flows``, plus ``engine_steps`` (see ``kineto_steps``).

Formats read: every era in docs/formats.md (how a profiler trace is read) — 2021 capitalised categories with string
tids, 2022 ``async_cpu_to_gpu`` flows, integer-µs absolute ``ts``, absolute µs with ns decimals, relative ``ts``
with ``baseTimeNanoseconds``, post-processed traces without ``M`` events, ROCm, and the bare-array Chrome
trace form. ``.json`` or gzip, any size, no Python object per event. A whole document's event array is
read by the compiled reader (``kineto_fast``, C, on both cores) where it is built and the input is its
common case; otherwise by DuckDB's JSON reader, in two pieces in parallel, or, for a truncated or odd
document, in fixed-size batches streamed by ``_jsonscan`` (which names the byte offset of any damage). Both
readers stage the same rows. ``ts`` is read as decimal text and kept as exact integer nanoseconds.
"""

from __future__ import annotations

import os
import queue
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import duckdb

from lltrace.cores import usable_cores
from lltrace.errors import TraceFormatError, TruncatedInput
from lltrace.parsers import kineto_fast, kineto_stream
from lltrace.parsers._blocks import gunzip_to, is_gzip, read_blocks
from lltrace.parsers._jsonscan import (
    ArrayLocation,
    Batch,
    EventArrayScanner,
    locate_event_array,
    split_event_array,
)
from lltrace.parsers.kineto_tables import OTHER_CLOCK_NS, finalize, staged_counts
from lltrace.source_info import SourceInfo

NAME = "pytorch-kineto"

# Raw event keys → DuckDB types. ts/dur are DECIMAL so that "1712195495519695.812" stays exact. The args
# keys lltrace uses are read as VARCHAR (a number keeps its exact text, a list becomes its JSON text)
# and cast afterwards, so one odd value (ROCm's "bytes": "256", Inductor's string "grid") never fails a
# batch. Struct keys match exactly but may not differ only in case, so PyTorch 1.8-1.10 files, whose GPU
# and runtime events spell "external id", are read with that spelling (decided from the file's head).
_ARGS = (
    "External id",
    "correlation",
    "Ev Idx",
    "Profiler Event Index",
    "device",
    "stream",
    "grid",
    "block",
    "bytes",
    "cbid",
    "cid",
    "Input Dims",
    "name",
    "labels",
)


def _json_columns(old_external_id: bool) -> str:
    keys = [("external id" if k == "External id" and old_external_id else k) for k in _ARGS]
    args = "STRUCT(" + ", ".join(f'"{k}" VARCHAR' for k in keys) + ")"
    return (
        "{ph: 'VARCHAR', cat: 'VARCHAR', name: 'VARCHAR', pid: 'VARCHAR', tid: 'VARCHAR', "
        "ts: 'DECIMAL(38,3)', dur: 'DECIMAL(38,3)', id: 'VARCHAR', bp: 'VARCHAR', "
        f"args: '{args}'}}"
    )


# Old category names (PyTorch 1.8–1.13) mapped onto the modern ones.
_CAT_ALIASES = {
    "Operator": "cpu_op",
    "Runtime": "cuda_runtime",
    "Kernel": "kernel",
    "Memcpy": "gpu_memcpy",
    "Memset": "gpu_memset",
    "async": "ac2g",
    "launch": "ac2g",
    "async_cpu_to_gpu": "ac2g",
    "async_gpu": "ac2g",
}


def _cat_expr() -> str:
    cases = " ".join(f"WHEN '{k}' THEN '{v}'" for k, v in _CAT_ALIASES.items())
    return f"CASE cat {cases} ELSE cat END"


def _arg(key: str) -> str:
    return f'args."{key}"'


# One normalised row per event, written to staging Parquet. Events not kept (python_function stacks unless
# asked for) stay as a row with their text columns NULL, so that every event is counted in one pass. Times
# are relative to the file's clock base here; the base (baseTimeNanoseconds, which may come after the
# events) is added at finalize.
_BATCH_SELECT = f"""
SELECT
    ph,
    {_cat_expr()} AS cat,
    CASE WHEN @KEEP@ THEN name END AS name,
    pid,
    tid,
    CAST(ts * 1000 AS BIGINT) AS ts_ns,
    CAST(dur * 1000 AS BIGINT) AS dur_ns,
    TRY_CAST({_arg("External id")} AS BIGINT) AS external_id,
    TRY_CAST({_arg("correlation")} AS BIGINT) AS correlation,
    TRY_CAST(coalesce({_arg("Ev Idx")}, {_arg("Profiler Event Index")}) AS BIGINT) AS ev_idx,
    TRY_CAST({_arg("device")} AS BIGINT) AS device,
    TRY_CAST({_arg("stream")} AS BIGINT) AS stream,
    {_arg("grid")} AS grid,
    {_arg("block")} AS block,
    TRY_CAST({_arg("bytes")} AS BIGINT) AS bytes,
    TRY_CAST(coalesce({_arg("cbid")}, {_arg("cid")}) AS BIGINT) AS cbid,
    CASE WHEN ph = 'X' THEN {_arg("Input Dims")} END AS input_dims,
    CASE WHEN ph = 'M' THEN coalesce({_arg("name")}, {_arg("labels")}) END AS meta_value,
    id AS flow_id,
    bp AS flow_bp,
    cat IN ('Operator', 'Runtime', 'Kernel', 'Memcpy', 'Memset') AS old_cat,
    ({_arg("External id")} IS NOT NULL AND TRY_CAST({_arg("External id")} AS BIGINT) IS NULL)
      OR ({_arg("correlation")} IS NOT NULL AND TRY_CAST({_arg("correlation")} AS BIGINT) IS NULL) AS bad_link,
    NOT (@KEEP@) AS dropped
FROM read_json(?, format = 'newline_delimited', columns = @COLUMNS@,
               maximum_object_size = 268435456)
"""

# python_function frames (with_stack) are dropped but for vLLM's execute_model and module calls: steps read them
_KEEP_DEFAULT = (
    "cat IS DISTINCT FROM 'python_function' OR name LIKE '%execute_model%' OR starts_with(name, 'nn.Module: ')"
)
_KEEP_ALL = "true"


def sniff(head: bytes) -> bool:
    """True when the first bytes look like a Chrome-trace JSON document (object or bare event array)."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"{"):
        if b'"traceEvents"' in text or b'"schemaVersion"' in text:
            return True
        return b'"ph"' in text and b'"ts"' in text
    if text.startswith(b"["):
        return b'"ph"' in text and (b'"ts"' in text or b'"name"' in text)
    return False


_BIG_INT = re.compile(rb"[:\[,]\s*(-?\d{20,}|-?\d{19}(?=[^\d.eE]))")


def _duck_error(path: str, exc: Exception, batch_data: bytes, batch_offset: int) -> TraceFormatError:
    """Map a DuckDB JSON error inside a batch to the byte offset of the event in the source."""
    msg = str(exc).splitlines()[0]
    m = re.search(r"(?:line|record/value) (\d+)", msg)
    offset = batch_offset
    big = None if m else _BIG_INT.search(batch_data)
    if big is not None:
        offset += big.start(1)
    if m:
        line = int(m.group(1))
        pos = 0
        for _ in range(line - 1):
            nxt = batch_data.find(b"\n", pos)
            if nxt < 0:
                break
            pos = nxt + 1
        offset += pos
    detail = re.sub(r'in file "[^"]*"', "", msg).replace("Invalid Input Error: ", "")
    if "Could not convert" in detail or "Conversion Error" in detail or "out of range" in detail:
        detail = f"a value does not fit its column (e.g. an integer beyond int64 in ts/dur): {detail}"
    return TraceFormatError(path, f"byte {offset}", f"invalid event JSON: {detail.strip()}")


def ingest(
    path: str,
    stage: Path,
    part: int,
    *,
    keep_python: bool = False,
    progress: Callable[[int], None] | None = None,
) -> SourceInfo:
    """Read one trace file into staging Parquet files ``stage/<table>/part-<part>.parquet``.

    A whole document takes the fast path: its event array is located from the head and the tail
    (``locate_event_array``) and handed to DuckDB's JSON reader in one piece, on both cores. A truncated
    document, or one DuckDB rejects, is streamed in batches by ``EventArrayScanner``, which reads as far
    as the file is valid and names the byte offset of any damage. Raises ``TraceFormatError`` for broken
    input; truncation is reported in ``SourceInfo.warnings`` and as a ``TruncatedInput`` warning.
    """
    info = SourceInfo(path=path, format=NAME)
    scratch = stage / f"_events_{part}"
    scratch.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute(
        f"SET threads = {usable_cores()}; SET preserve_insertion_order = false; SET memory_limit = '{DUCK_MEMORY}'; "
        f"SET temp_directory = '{scratch}'; SET enable_progress_bar = true; SET enable_progress_bar_print = false"
    )
    try:
        done = _ingest_whole(con, path, scratch, stage, part, keep_python, progress, info)
        if not done:
            _ingest_streaming(con, path, scratch, keep_python, progress, info)
        if progress is not None:
            progress(os.path.getsize(path))
        clock = time.perf_counter()
        finalize(con, path, scratch, stage, part, info, done if isinstance(done, kineto_fast.FastResult) else None)
        info.details["tables_seconds"] = round(time.perf_counter() - clock, 3)  # the kernels' links, the tables
    finally:
        con.close()
        for f in scratch.glob("*"):
            f.unlink()
        scratch.rmdir()
    return info


DUCK_MEMORY = "128MB"  # bounds the reader whatever the file size; joins and sorts spill to disk
# Bounds step detection the same way: at 128 MB a 2 GB trace's kernels placed in their steps spilled (0.85 s against
# 0.63 s at 256 MB); the run's peak memory stays within 0.23x of the file with 2 to 4 threads (lltrace.cores).
STEPS_MEMORY = "256MB"
_MAX_EVENT_BYTES = kineto_fast.MAX_EVENT_BYTES
_PIECES_PER_READER = 4  # pieces of the array per compiled reader thread: a free thread takes the next


def _copy_select(source_format: str, keep_python: bool, max_object: int, old_external_id: bool) -> str:
    keep = _KEEP_ALL if keep_python else _KEEP_DEFAULT
    select = _BATCH_SELECT.replace("@KEEP@", f"({keep})").replace("@COLUMNS@", _json_columns(old_external_id))
    if old_external_id:
        select = select.replace('args."External id"', 'args."external id"')
    select = select.replace("format = 'newline_delimited'", f"format = '{source_format}'").replace(
        "maximum_object_size = 268435456", f"maximum_object_size = {max_object}"
    )
    # Small row groups keep the writer's buffers (and so peak memory) small; the stage is read once.
    return f"COPY ({select}) TO '@OUT@' (FORMAT parquet, COMPRESSION uncompressed, ROW_GROUP_SIZE 32768)"


def _copy_range(src: int, dst: int, start: int, end: int) -> None:
    """Copy bytes [start, end) of one file descriptor to the current end of another (in-kernel when possible)."""
    pos, left = start, end - start
    while left > 0:
        if hasattr(os, "copy_file_range"):
            n = os.copy_file_range(src, dst, min(left, 1 << 30), pos)
        else:
            n = os.write(dst, os.pread(src, min(left, 16 << 20), pos))
        if n <= 0:
            raise OSError(f"short copy at byte {pos}")
        pos += n
        left -= n


def _old_external_id(path: str) -> bool:
    """Whether the file spells the key "external id" (PyTorch 1.8-1.10) rather than "External id"."""
    with closing(read_blocks(path, 1 << 20, lambda _msg: None)) as blocks:
        head = next(blocks, b"")
    return b'"external id"' in head and b'"External id"' not in head


# Real profiler traces gzip 3-20x (every trace in sample_traces/); deflate tops out
# near 1032x. Five times the highest real ratio is a file of filler, a warning (it is read all the same).
_BOMB_RATIO = 100


def _bomb(info: SourceInfo, path: str, doc_size: int, size: int) -> None:
    if doc_size > _BOMB_RATIO * size:
        info.warnings.append(
            f"{path}: decompresses {doc_size / size:,.0f}x ({doc_size:,} bytes from {size:,}): far beyond a real "
            f"trace's 3-20x, mostly filler (read in bounded memory all the same)"
        )


def _ingest_whole(
    con: duckdb.DuckDBPyConnection,
    path: str,
    scratch: Path,
    stage: Path,
    part: int,
    keep_python: bool,
    progress: Callable[[int], None] | None,
    info: SourceInfo,
) -> kineto_fast.FastResult | bool:
    """The fast path: the compiled reader's result (tables ``ops`` and ``flows`` written, the rest staged), True when
    DuckDB's reader staged the events, or False (having written nothing) when the file must be streamed instead."""
    size = os.path.getsize(path)
    gz = is_gzip(path)
    doc = Path(path)
    streamed = _streamed(con, path, scratch, stage, part, keep_python, progress, info) if gz else None
    if isinstance(streamed, kineto_fast.FastResult):
        return streamed
    if gz:
        doc = scratch / "document.json"
        cut: list[str] = []
        gunzip_to(path, doc, cut.append, (lambda pos: progress(pos // 2)) if progress else None)
        if cut:
            doc.unlink()
            return False
        info.details["gzip"] = "decompressed to a scratch file, then read"
    try:
        doc_size = doc.stat().st_size
        if gz:
            _bomb(info, path, doc_size, size)
        loc = locate_event_array(str(doc), doc_size)
        if loc is None:
            return False
        # The array is cut into pieces of whole events. DuckDB reads one array file per core (one thread
        # each, files in parallel); the compiled reader takes more pieces than cores, a free thread taking
        # the next (balanced load), and checks each cut itself (a piece must end in a whole event exactly
        # where the next begins), so its cuts need only a short look.
        compiled = kineto_fast.available() and streamed is None  # (a string: why its rows could not stand)
        readers = usable_cores()
        if compiled:
            # (at least two: one event it declines sends only its piece to DuckDB, even on one core)
            parts = max(2, min(_PIECES_PER_READER * readers, max(readers, doc_size // (16 << 20))))
            cuts = split_event_array(str(doc), loc, parts, window=64 << 10)
        else:
            cuts = split_event_array(str(doc), loc, readers)
        bounds = [loc.open, *(x for cut in cuts for x in cut), loc.close + 1]
        old_ext = _old_external_id(path)
        done: kineto_fast.FastResult | bool = False
        base = kineto_fast.reader_base(loc.metadata)
        if compiled and base is not None:
            pieces = [
                (bounds[2 * k] + (k == 0), bounds[2 * k + 1] - (k == len(bounds) // 2 - 1))
                for k in range(len(bounds) // 2)
            ]
            # progress: the first half of the bar is decompression for gzip
            scaled = None
            if progress is not None:
                scaled = (lambda n: progress(size // 2 + n * size // (2 * doc_size))) if gz else progress
            res = kineto_fast.stage(doc, pieces, scratch, stage, part, base, keep_python, old_ext, scaled, readers)
            why = res if isinstance(res, str) else _needs_cleaning(res)
            if why is None and res.declined:  # type: ignore[union-attr]
                why = _read_declined(con, doc, res, scratch, keep_python, old_ext)  # type: ignore[arg-type]
            if why is None:
                done = res
            else:
                if not isinstance(res, str):
                    kineto_fast.remove_outputs(res, stage, part)
                    for f in scratch.glob("ev-*.parquet"):
                        f.unlink()
                info.details["reader_note"] = f"compiled reader declined ({why}); read with DuckDB"
        if not done:
            if compiled:
                cuts = split_event_array(str(doc), loc, readers)
                bounds = [loc.open, *(x for cut in cuts for x in cut), loc.close + 1]
            halves = len(bounds) // 2
            whole = [
                (bounds[2 * k], bounds[2 * k + 1], b"[" if k else b"", b"]" if k < halves - 1 else b"")
                for k in range(halves)
            ]
            if not _duckdb_pieces(con, doc, whole, scratch, keep_python, old_ext, progress, size):
                return False
            done = True
    finally:
        if gz:
            doc.unlink(missing_ok=True)
    if streamed is not None:
        info.details["reader_note"] = f"compiled reader declined ({streamed}); read with DuckDB"
    _describe(info, done, loc)
    return done


def _describe(info: SourceInfo, done: kineto_fast.FastResult | bool, loc: ArrayLocation) -> None:
    """Which reader read the trace (and which byte ranges each, where both did), and the metadata around it."""
    if isinstance(done, kineto_fast.FastResult):
        info.details["reader"] = "compiled" if not done.declined else "compiled, pieces with DuckDB"
        info.details["reader_seconds"] = done.seconds
        if done.declined:
            info.details["readers"] = kineto_fast.byte_ranges(done, loc)
    else:
        info.details["reader"] = "duckdb"
    info.details["metadata"] = loc.metadata
    info.details["array_form"] = loc.array_form


def _streamed(
    con: duckdb.DuckDBPyConnection,
    path: str,
    scratch: Path,
    stage: Path,
    part: int,
    keep_python: bool,
    progress: Callable[[int], None] | None,
    info: SourceInfo,
) -> kineto_fast.FastResult | str | None:
    """The compiled reader on the gzip stream as it is inflated (``kineto_stream``): its result, why its rows cannot
    stand (nothing kept: the whole array is DuckDB's), or None (nothing kept: the file is read the other ways)."""
    if not kineto_fast.available():
        return None
    old_ext = _old_external_id(path)
    got = kineto_stream.stage_gzip(path, scratch, stage, part, keep_python, old_ext, usable_cores(), progress)
    if got is None or isinstance(got, str):
        return got
    res, size, doc_size = got.result, os.path.getsize(path), got.size
    try:
        why = _needs_cleaning(res)
        if why is None and res.declined:
            why = _read_declined(con, got.document, res, scratch, keep_python, old_ext)
    finally:
        got.document.unlink(missing_ok=True)
    if why is not None:
        kineto_fast.remove_outputs(res, stage, part)
        for f in scratch.glob("ev-*.parquet"):
            f.unlink()
        return why
    _bomb(info, path, doc_size, size)
    info.details["gzip"] = "read as inflated"
    _describe(info, res, got.location)
    return res


def _needs_cleaning(res: kineto_fast.FastResult) -> str | None:
    """Why the compiled reader's rows cannot be final as read: damage that ``_damage`` drops (or zeroed
    timestamps among real ones), which the DuckDB path filters out of the staged events."""
    c = res.counts
    if c["negative_dur"]:
        return "negative durations"
    if (c["max_ts"] or 0) - (c["min_ts"] or 0) > OTHER_CLOCK_NS:
        return "times more than a day apart"
    if res.distinct_events < c["events"]:
        return "duplicate events"
    if (c["max_x_ts"] or 0) > 0 and (c["zero_ts"] or c["null_ts"]):
        return "zeroed or missing timestamps"
    return None


def _read_declined(
    con: duckdb.DuckDBPyConnection,
    doc: Path,
    res: kineto_fast.FastResult,
    scratch: Path,
    keep_python: bool,
    old_ext: bool,
) -> str | None:
    """DuckDB's reader over the pieces the compiled reader declined, staged beside its rows (their counts kept in
    ``res.declined_counts`` for finalize); None when the
    two readers' rows make one trace as they are, else why the whole array must be read by DuckDB (events of
    the read pieces that only the DuckDB path's cleaning would drop, given the declined pieces' times). Exact
    duplicates are found within each reader's rows, not between them: a trace repeated whole repeats events
    within the read pieces, which sends the whole array to DuckDB before this."""
    ranges = [(start, end, b"[", b"]") for start, end, _ in res.declined]
    if not _duckdb_pieces(con, doc, ranges, scratch, keep_python, old_ext, None, 0):
        return "a declined piece that DuckDB does not read either"
    res.declined_counts = theirs = staged_counts(con, f"read_parquet('{scratch}/ev-*.parquet')")
    c = res.counts  # times relative to the clock base, as DuckDB stages them
    lows = [v for v in (c["min_ts"], theirs["min_ts"]) if v is not None]
    highs = [v for v in (c["max_ts"], theirs["max_ts"]) if v is not None]
    if lows and max(highs) - min(lows) > OTHER_CLOCK_NS:
        return "times more than a day apart"
    if (theirs["max_x_ts"] or 0) > 0 and (c["zero_ts"] or c["null_ts"]):
        return "zeroed or missing timestamps"
    return None


def _duckdb_pieces(
    con: duckdb.DuckDBPyConnection,
    doc: Path,
    pieces: list[tuple[int, int, bytes, bytes]],
    scratch: Path,
    keep_python: bool,
    old_ext: bool,
    progress: Callable[[int], None] | None,
    size: int,
) -> bool:
    """DuckDB's JSON reader over pieces of the array, (start, end, before, after): bytes [start, end) copied to
    an array file of their own between ``before`` and ``after`` (the brackets a piece lacks)."""
    files = []
    with open(doc, "rb") as src:
        for k, (start, end, before, after) in enumerate(pieces):
            piece = scratch / f"events-{k}.json"
            dst = os.open(piece, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(dst, before)
                _copy_range(src.fileno(), dst, start, end)
                os.write(dst, after)
            finally:
                os.close(dst)
            files.append(piece)
    out = scratch / "ev-000000.parquet"
    copy = _copy_select("array", keep_python, _MAX_EVENT_BYTES, old_ext).replace("@OUT@", str(out))
    try:
        _run_with_progress(con, copy, [[str(p) for p in files]], progress, size)
    except duckdb.Error:
        # DuckDB's own error locations are per record; the streaming reader names the byte offset.
        out.unlink(missing_ok=True)
        return False
    finally:
        for p in files:
            p.unlink()
    return True


def _run_with_progress(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    params: list,
    progress: Callable[[int], None] | None,
    size: int,
) -> tuple:
    """Execute one statement, reporting DuckDB's query progress as bytes of the source file."""
    if progress is None:
        return con.execute(sql, params).fetchone()
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(0.2):
            try:
                pct = con.query_progress()
            except duckdb.Error:
                return
            if pct and pct > 0:
                progress(size // 2 + int(size * min(pct, 100) / 200))

    watcher = threading.Thread(target=poll, name="lltrace-progress", daemon=True)
    watcher.start()
    try:
        return con.execute(sql, params).fetchone()
    finally:
        stop.set()
        watcher.join()


def _ingest_streaming(
    con: duckdb.DuckDBPyConnection,
    path: str,
    scratch: Path,
    keep_python: bool,
    progress: Callable[[int], None] | None,
    info: SourceInfo,
) -> None:
    """The batch path: NDJSON batches from the scanner, decoded by DuckDB while the next is scanned."""
    batch_file = scratch / "batch.ndjson"
    copy = _copy_select("newline_delimited", keep_python, _MAX_EVENT_BYTES, _old_external_id(path))
    scanner = EventArrayScanner(path)
    for n, batch in enumerate(_prefetch(scanner.batches())):
        batch_file.write_bytes(batch.data)
        out = scratch / f"ev-{n:06d}.parquet"
        try:
            con.execute(copy.replace("@OUT@", str(out)), [str(batch_file)])
        except duckdb.Error as exc:
            raise _duck_error(path, exc, batch.data, batch.offset) from None
        if progress is not None:
            progress(scanner.position)
    batch_file.unlink(missing_ok=True)
    res = scanner.result
    if res.truncated:
        info.truncated = res.truncated
        msg = f"{path}: truncated trace: {res.truncated}; kept the events before it"
        if res.dropped_bytes:
            msg += f", dropped {res.dropped_bytes} bytes of a partial last event"
        info.warnings.append(msg)
        warnings.warn(msg, TruncatedInput, stacklevel=2)
    if not any(scratch.glob("ev-*.parquet")):
        raise TraceFormatError(path, f"byte {res.bytes_read}", "the traceEvents array holds no events")
    info.details["reader"] = "duckdb"
    info.details["metadata"] = res.metadata
    info.details["array_form"] = res.array_form


def _prefetch(batches: Iterator[Batch], depth: int = 2) -> Iterator[Batch]:
    """Scan the next batches in a thread while the caller decodes the current one (two cores busy)."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def produce() -> None:
        try:
            for b in batches:
                while not stop.is_set():
                    try:
                        q.put(b, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(done)
        except BaseException as exc:  # handed to the consumer, raised there
            q.put(exc)

    worker = threading.Thread(target=produce, name="lltrace-scan", daemon=True)
    worker.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while worker.is_alive():
            try:
                q.get(timeout=0.05)
            except queue.Empty:
                pass
        worker.join()

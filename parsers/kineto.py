"""PyTorch profiler (Kineto) Chrome-trace JSON → the profiler tables ``kernels``, ``ops``, ``annotations``,
``flows``, plus ``engine_steps`` (see ``kineto_steps``).

Formats read: every era in docs/TORCH_TRACE_FORMAT.md — 2021 capitalised categories with string tids,
2022 ``async_cpu_to_gpu`` flows, integer-µs absolute ``ts``, absolute µs with ns decimals, relative ``ts``
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
import warnings
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from lltrace.errors import TraceFormatError, TruncatedInput
from lltrace.parsers import kineto_fast
from lltrace.parsers._jsonscan import (
    BLOCK_BYTES,
    Batch,
    EventArrayScanner,
    locate_event_array,
    read_blocks,
    split_event_array,
)
from lltrace.parsers.kernel_classes import classify_pairs

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
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
ANNOTATION_CATS = ("user_annotation", "gpu_user_annotation")


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

_KEEP_DEFAULT = "cat IS DISTINCT FROM 'python_function' OR name LIKE '%execute_model%'"
_KEEP_ALL = "true"


@dataclass
class SourceInfo:
    """What the run metadata records about one ingested source file."""

    path: str
    format: str = NAME
    version: str | None = None
    records: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    truncated: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form for the run metadata."""
        return {
            "path": self.path,
            "format": self.format,
            "version": self.version,
            "records": self.records,
            "dropped": self.dropped,
            "warnings": self.warnings,
            **self.details,
        }


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
    info = SourceInfo(path=path)
    scratch = stage / f"_events_{part}"
    scratch.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute(
        f"SET threads = 2; SET preserve_insertion_order = false; SET memory_limit = '{DUCK_MEMORY}'; "
        f"SET temp_directory = '{scratch}'; SET enable_progress_bar = true; SET enable_progress_bar_print = false"
    )
    try:
        done = _ingest_whole(con, path, scratch, stage, part, keep_python, progress, info)
        if not done:
            _ingest_streaming(con, path, scratch, keep_python, progress, info)
        _finalize(con, path, scratch, stage, part, info, done if isinstance(done, kineto_fast.FastResult) else None)
    finally:
        con.close()
        for f in scratch.glob("*"):
            f.unlink()
        scratch.rmdir()
    return info


DUCK_MEMORY = "128MB"  # bounds the reader whatever the file size; joins and sorts spill to disk
_MAX_EVENT_BYTES = kineto_fast.MAX_EVENT_BYTES
_READERS = 2  # array files decoded in parallel (one per core)
_PIECES = 8  # pieces of the array for the compiled reader's threads


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
    """The fast path: the compiled reader's result (tables ``ops`` and ``flows`` written, the rest staged),
    True when DuckDB's reader staged the events, or False (having written nothing) when the file must be
    streamed instead."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    doc = Path(path)
    if gz:
        doc = scratch / "document.json"
        cut: list[str] = []
        with open(doc, "wb") as out:
            for block in read_blocks(
                path, BLOCK_BYTES, cut.append, (lambda pos: progress(pos // 2)) if progress else None
            ):
                out.write(block)
        if cut:
            doc.unlink()
            return False
    try:
        doc_size = doc.stat().st_size
        loc = locate_event_array(str(doc), doc_size)
        if loc is None:
            return False
        # The array is cut into pieces of whole events. DuckDB reads one array file per core (one thread
        # each, files in parallel); the compiled reader takes more pieces than cores, a free thread taking
        # the next (balanced load), and checks each cut itself (a piece must end in a whole event exactly
        # where the next begins), so its cuts need only a short look.
        compiled = kineto_fast.available()
        if compiled:
            parts = min(_PIECES, max(_READERS, doc_size // (16 << 20)))
            cuts = split_event_array(str(doc), loc, parts, window=64 << 10)
        else:
            cuts = split_event_array(str(doc), loc, _READERS)
        bounds = [loc.open, *(x for cut in cuts for x in cut), loc.close + 1]
        old_ext = _old_external_id(path)
        done: kineto_fast.FastResult | bool = False
        base = loc.metadata.get("baseTimeNanoseconds", 0)
        if compiled and type(base) is int and -(2**62) < base < 2**62:
            pieces = [
                (bounds[2 * k] + (k == 0), bounds[2 * k + 1] - (k == len(bounds) // 2 - 1))
                for k in range(len(bounds) // 2)
            ]
            # progress: the first half of the bar is decompression for gzip
            scaled = None
            if progress is not None:
                scaled = (lambda n: progress(size // 2 + n * size // (2 * doc_size))) if gz else progress
            res = kineto_fast.stage(doc, pieces, scratch, stage, part, base, keep_python, old_ext, scaled, _READERS)
            why = res if isinstance(res, str) else _needs_cleaning(res)
            if why is None:
                done = res
            else:
                if not isinstance(res, str):
                    kineto_fast.remove_outputs(res, stage, part)
                info.details["reader_note"] = f"compiled reader declined ({why}); read with DuckDB"
        if not done:
            if compiled:
                cuts = split_event_array(str(doc), loc, _READERS)
                bounds = [loc.open, *(x for cut in cuts for x in cut), loc.close + 1]
            if not _duckdb_pieces(con, doc, bounds, scratch, keep_python, old_ext, progress, size):
                return False
            done = True
    finally:
        if gz:
            doc.unlink(missing_ok=True)
    info.details["reader"] = "compiled" if isinstance(done, kineto_fast.FastResult) else "duckdb"
    info.details["metadata"] = loc.metadata
    info.details["array_form"] = loc.array_form
    if progress is not None:
        progress(size)
    return done


def _needs_cleaning(res: kineto_fast.FastResult) -> str | None:
    """Why the compiled reader's rows cannot be final as read: damage that ``_damage`` drops (or zeroed
    timestamps among real ones), which the DuckDB path filters out of the staged events."""
    c = res.counts
    if c["negative_dur"]:
        return "negative durations"
    if (c["max_ts"] or 0) - (c["min_ts"] or 0) > _OTHER_CLOCK_NS:
        return "times more than a day apart"
    if res.distinct_events < c["events"]:
        return "duplicate events"
    if (c["max_x_ts"] or 0) > 0 and (c["zero_ts"] or c["null_ts"]):
        return "zeroed or missing timestamps"
    return None


def _duckdb_pieces(
    con: duckdb.DuckDBPyConnection,
    doc: Path,
    bounds: list[int],
    scratch: Path,
    keep_python: bool,
    old_ext: bool,
    progress: Callable[[int], None] | None,
    size: int,
) -> bool:
    """DuckDB's JSON reader over the array's pieces, each copied to its own array file."""
    pieces = []
    with open(doc, "rb") as src:
        for k in range(len(bounds) // 2):
            start, end = bounds[2 * k], bounds[2 * k + 1]
            piece = scratch / f"events-{k}.json"
            dst = os.open(piece, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                if k > 0:
                    os.write(dst, b"[")
                _copy_range(src.fileno(), dst, start, end)
                if k < len(bounds) // 2 - 1:
                    os.write(dst, b"]")
            finally:
                os.close(dst)
            pieces.append(piece)
    out = scratch / "ev-000000.parquet"
    copy = _copy_select("array", keep_python, _MAX_EVENT_BYTES, old_ext).replace("@OUT@", str(out))
    try:
        _run_with_progress(con, copy, [[str(p) for p in pieces]], progress, size)
    except duckdb.Error:
        # DuckDB's own error locations are per record; the streaming reader names the byte offset.
        out.unlink(missing_ok=True)
        return False
    finally:
        for p in pieces:
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


def _version(meta: dict, counts: dict[str, int], array_form: bool) -> str:
    rocm = "roctracer_version" in meta or "hip_runtime_version" in meta
    if array_form:
        era = "Chrome trace event array (no Kineto metadata)"
    elif counts.get("capitalised_cats"):
        era = "2021 (PyTorch 1.8-1.10: capitalised categories)"
    elif counts.get("old_flows"):
        era = "2022 (PyTorch ~1.11-1.13: async_cpu_to_gpu flows)"
    elif "baseTimeNanoseconds" in meta:
        era = "2024+ (PyTorch >= 2.4: relative ts with baseTimeNanoseconds)"
    elif counts.get("ns_decimals"):
        era = "2024-04 (absolute us with ns decimals)"
    else:
        era = "2023 (PyTorch 2.0-2.3: integer us, absolute)"
    return era + (", ROCm" if rocm else "")


# The staged event columns (_BATCH_SELECT): equal in all of them, two events are duplicates.
_STAGED = (
    "ph, cat, name, pid, tid, ts_ns, dur_ns, external_id, correlation, ev_idx, device, stream, grid, block, "
    "bytes, cbid, input_dims, meta_value, flow_id, flow_bp"
).split(", ")
_OTHER_CLOCK_NS = 24 * 3600 * 10**9  # an event this far from the trace's median time is on another clock


def _damage(con: duckdb.DuckDBPyConnection, path: str, staged: str, counts: dict[str, Any], info: SourceInfo) -> str:
    """The SELECT of the events kept, leaving out damaged ones, each kind counted in ``info.dropped`` and
    warned about: negative durations, events on another clock, exact duplicates (of events other than
    metadata, which Kineto itself repeats). Link ids that are not 64-bit integers are read as NULL and
    counted."""
    where = ["NOT dropped"]
    if counts["negative_dur"]:
        where.append("(dur_ns IS NULL OR dur_ns >= 0)")
        info.dropped["negative_duration"] = int(counts["negative_dur"])
        info.warnings.append(f"{path}: {counts['negative_dur']} events with a negative duration: dropped")
    spread = (counts["max_ts"] or 0) - (counts["min_ts"] or 0)
    if spread > _OTHER_CLOCK_NS:  # the median is only needed when the times span more than a day
        # the median of the complete events' times, else of all times (a trace of instants and metadata)
        (median,) = con.execute(
            f"SELECT coalesce(quantile_disc(ts_ns, 0.5) FILTER (WHERE ph = 'X'), quantile_disc(ts_ns, 0.5)) "
            f"FROM {staged} WHERE NOT dropped AND ts_ns <> 0"
        ).fetchone()
        (far,) = con.execute(
            f"SELECT count(*) FROM {staged} WHERE NOT dropped AND ts_ns <> 0 AND abs(ts_ns - {median}) > "
            f"{_OTHER_CLOCK_NS}"
        ).fetchone()
        if far:
            where.append(f"(ts_ns = 0 OR abs(ts_ns - {median}) <= {_OTHER_CLOCK_NS})")
            info.dropped["another_clock"] = int(far)
            info.warnings.append(
                f"{path}: {far} events more than 24 h from the trace's median time (another clock): dropped"
            )
    if counts["bad_link"]:
        info.dropped["link_id_not_int64"] = int(counts["bad_link"])
        info.warnings.append(
            f"{path}: {counts['bad_link']} events carry an External id or correlation that is not a 64-bit "
            "integer: read as NULL, so those events are not linked"
        )
    select = f"SELECT * EXCLUDE (dropped, bad_link) FROM {staged} WHERE {' AND '.join(where)}"
    # Kineto repeats some metadata (M) events as written; duplicates of real events are damage
    events = f"SELECT * FROM ({select}) WHERE ph IS DISTINCT FROM 'M'"
    dups = 0
    if counts["distinct_events"] < counts["events"]:  # the row hashes say so: count exactly
        (dups,) = con.execute(
            f"SELECT count(*) - (SELECT count(*) FROM (SELECT DISTINCT * FROM ({events}))) FROM ({events})"
        ).fetchone()
    if dups:
        info.dropped["duplicate_events"] = int(dups)
        info.warnings.append(f"{path}: {dups} exact duplicate events: dropped (each kept once)")
        select = f"SELECT DISTINCT * FROM ({events}) UNION ALL SELECT * FROM ({select}) WHERE ph = 'M'"
    return select


def _staged_counts(con: duckdb.DuckDBPyConnection, staged: str) -> dict[str, Any]:
    """The counts ``_finalize`` reads off DuckDB's staged events (the compiled reader makes the same)."""
    names = [
        "read",
        "dropped_py",
        "x",
        "zero_ts",
        "python",
        "ns_decimals",
        "instants",
        "meta",
        "other_ph",
        "capitalised_cats",
        "old_flows",
        "max_x_ts",
        "negative_dur",
        "bad_link",
        "min_ts",
        "max_ts",
        "events",
        "null_ts",
        "distinct_events",
    ]
    return dict(
        zip(
            names,
            con.execute(
                f"""
                SELECT count(*),
                       count(*) FILTER (WHERE dropped),
                       count(*) FILTER (WHERE NOT dropped AND ph = 'X'),
                       count(*) FILTER (WHERE NOT dropped AND ph = 'X' AND ts_ns = 0),
                       count(*) FILTER (WHERE NOT dropped AND cat = 'python_function'),
                       count(*) FILTER (WHERE ts_ns % 1000 <> 0),
                       count(*) FILTER (WHERE ph IN ('i', 'I')),
                       count(*) FILTER (WHERE ph = 'M'),
                       count(*) FILTER (WHERE ph NOT IN ('X', 'i', 'I', 'M', 's', 'f', 't')),
                       count(*) FILTER (WHERE old_cat),
                       count(*) FILTER (WHERE ph IN ('s', 'f') AND name IN ('async_cpu_to_gpu', 'async_gpu')),
                       max(ts_ns) FILTER (WHERE ph = 'X'),
                       count(*) FILTER (WHERE NOT dropped AND dur_ns < 0),
                       count(*) FILTER (WHERE bad_link),
                       min(ts_ns) FILTER (WHERE NOT dropped AND ts_ns <> 0),
                       max(ts_ns) FILTER (WHERE NOT dropped AND ts_ns <> 0),
                       count(*) FILTER (WHERE NOT dropped AND ph <> 'M'),
                       count(*) FILTER (WHERE NOT dropped AND ph = 'X' AND ts_ns IS NULL),
                       count(DISTINCT hash({", ".join(_STAGED)})) FILTER (WHERE NOT dropped AND ph <> 'M')
                FROM {staged}
                """
            ).fetchone(),
            strict=True,
        )
    )


def _finalize(
    con: duckdb.DuckDBPyConnection,
    path: str,
    scratch: Path,
    stage: Path,
    part: int,
    info: SourceInfo,
    fast: kineto_fast.FastResult | None,
) -> None:
    """Write the tables from the staged events: DuckDB's staging of every event, or the compiled reader's
    (``ops`` and ``flows`` already written; kernels, annotations and metadata events staged)."""
    meta = info.details.pop("metadata")
    array_form = info.details.pop("array_form")
    base = meta.get("baseTimeNanoseconds")
    if base is not None and not isinstance(base, int):
        raise TraceFormatError(path, "baseTimeNanoseconds", f"expected an integer, found {base!r}")
    base_ns = int(base or 0)
    staged = f"read_parquet('{scratch}/ev-*.parquet')"
    if fast is not None:
        counts: dict[str, Any] = dict(fast.counts) | {"distinct_events": fast.distinct_events}
    else:
        counts = _staged_counts(con, staged)
    if counts["dropped_py"]:
        info.dropped["python_function (not asked for)"] = int(counts["dropped_py"])
    if counts["read"] == counts["meta"]:
        what = f"only {counts['meta']} metadata events" if counts["meta"] else "the array is empty"
        raise TraceFormatError(path, "traceEvents", f"no trace events ({what})")
    keep = _damage(con, path, staged, counts, info)
    has_real = (counts["max_x_ts"] or 0) > 0
    # Zeroed timestamps (pytorch/pytorch#188481) are dropped when the rest of the trace has real times.
    drop_zero = "AND ts_ns <> 0" if has_real else ""
    if has_real and counts["zero_ts"]:
        info.dropped["zero_timestamp"] = counts["zero_ts"]
    if has_real and counts["null_ts"]:  # (the same condition, ts_ns <> 0, leaves them out)
        info.dropped["no_timestamp"] = counts["null_ts"]
    if counts["instants"]:
        info.dropped["instant_events"] = counts["instants"]
    if counts["other_ph"]:
        info.dropped["other_phases"] = counts["other_ph"]
    # The kept events each table is made from (DuckDB's staging: times relative to the clock base).
    if fast is None:
        con.execute(f"CREATE OR REPLACE VIEW raw AS {keep}")
        sources = {
            "k_src": f"SELECT * FROM raw WHERE ph = 'X' AND cat IN {GPU_CATS} {drop_zero}",
            "a_src": f"SELECT * FROM raw WHERE ph = 'X' AND cat IN {ANNOTATION_CATS} {drop_zero}",
            "m_src": "SELECT * FROM raw WHERE ph = 'M'",
            "l_src": "SELECT * FROM raw WHERE ph = 'X'",
        }
    else:  # the compiled reader left no damage to drop (else the DuckDB path was taken)

        def files(paths: list[Path]) -> str:
            return "read_parquet([" + ", ".join(f"'{p}'" for p in paths) + "])"

        ops_files = f"read_parquet('{stage}/ops/part-{part:05d}.*parquet')"
        sources = {  # the compiled reader's rows carry the clock base already
            "k_src": f"SELECT * FROM {files(fast.staged['kernels'])}",
            "a_src": f"SELECT * FROM {files(fast.staged['annotations'])}",
            "m_src": f"SELECT * FROM {files(fast.staged['meta'])}",
            "l_src": f"SELECT cat, name, pid, tid, ts_ns, correlation FROM {ops_files}",
        }
    shift = base_ns if fast is None else 0  # added to the times below
    for view, select in sources.items():
        con.execute(f"CREATE OR REPLACE VIEW {view} AS {select}")
    lanes = con.execute(
        "SELECT name, pid, tid, meta_value FROM m_src WHERE meta_value IS NOT NULL ORDER BY ALL"
    ).fetchall()

    names = con.execute("SELECT DISTINCT name, cat FROM k_src").fetchall()
    classes, variants = classify_pairs([r[0] for r in names], [r[1] for r in names])
    # lists in, not an Arrow table: pyarrow builds one from Python lists only after importing pandas (0.2 s)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE kernel_classes AS "
        "SELECT unnest(?::VARCHAR[]) AS name, unnest(?::VARCHAR[]) AS cat, unnest(?::VARCHAR[]) AS kernel_class, "
        "unnest(?::VARCHAR[]) AS attention_variant",
        [[r[0] for r in names], [r[1] for r in names], classes, variants],
    )

    for table in ("kernels", "ops", "annotations", "flows"):
        (stage / table).mkdir(parents=True, exist_ok=True)
    common = f"CAST({part} AS INTEGER) AS part"
    out = {t: stage / t / f"part-{part:05d}.parquet" for t in ("kernels", "ops", "annotations", "flows")}
    table_rows: dict[str, int] = {}
    table_rows["kernels"] = con.execute(
        f"""
        COPY (
          WITH launches AS (
            SELECT correlation, min(ts_ns) AS launch_ts_ns, arg_min(name, ts_ns) AS launch_name,
                   arg_min(tid, ts_ns) AS launch_tid, arg_min(pid, ts_ns) AS launch_pid
            FROM l_src WHERE cat IN {LAUNCH_CATS} AND correlation IS NOT NULL
            GROUP BY correlation
          )
          SELECT {common}, k.cat, k.name, k.pid, k.tid,
                 coalesce(k.device, TRY_CAST(k.pid AS BIGINT)) AS device,
                 coalesce(k.stream, TRY_CAST(regexp_extract(k.tid, '(\\d+)', 1) AS BIGINT)) AS stream,
                 k.ts_ns + {shift} AS ts_ns, k.dur_ns, k.correlation, k.external_id, k.ev_idx,
                 k.grid, k.block, k.bytes,
                 c.kernel_class, c.attention_variant,
                 l.launch_name, l.launch_ts_ns + {shift} AS launch_ts_ns, l.launch_pid, l.launch_tid,
                 coalesce(l.launch_name ILIKE '%GraphLaunch%', false) AS cuda_graph,
                 l.correlation IS NULL AS orphan
          FROM k_src k
          LEFT JOIN kernel_classes c ON c.name = k.name AND c.cat = k.cat
          LEFT JOIN launches l ON l.correlation = k.correlation
        ) TO '{out["kernels"]}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 16384)
        """
    ).fetchone()[0]
    table_rows["annotations"] = con.execute(
        f"""
        COPY (
          SELECT {common}, cat, name, pid, tid, ts_ns + {shift} AS ts_ns, dur_ns, external_id, ev_idx,
                 cat = 'gpu_user_annotation' AS on_gpu, input_dims
          FROM a_src
          ORDER BY ts_ns, dur_ns DESC
        ) TO '{out["annotations"]}' (FORMAT parquet, COMPRESSION zstd)
        """
    ).fetchone()[0]
    if fast is not None:
        table_rows["ops"], table_rows["flows"] = fast.rows["ops"], fast.rows["flows"]
    else:
        table_rows["ops"] = con.execute(
            f"""
            COPY (
              SELECT {common}, cat, name, pid, tid, ts_ns + {shift} AS ts_ns, dur_ns, external_id,
                     correlation, ev_idx, cbid, input_dims
              FROM raw
              WHERE ph = 'X' AND cat NOT IN {GPU_CATS} AND cat NOT IN {ANNOTATION_CATS} {drop_zero}
            ) TO '{out["ops"]}' (FORMAT parquet, COMPRESSION zstd)
            """
        ).fetchone()[0]
        table_rows["flows"] = con.execute(
            f"""
            COPY (
              SELECT {common}, cat, name, ph, TRY_CAST(flow_id AS BIGINT) AS flow_id, pid, tid,
                     ts_ns + {shift} AS ts_ns, flow_bp AS bp
              FROM raw WHERE ph IN ('s', 'f', 't')
            ) TO '{out["flows"]}' (FORMAT parquet, COMPRESSION zstd)
            """
        ).fetchone()[0]
    table_rows = {t: table_rows[t] for t in ("kernels", "ops", "annotations", "flows")}
    info.records = int(counts["read"])
    info.version = _version(meta, counts, array_form)
    info.details |= {
        "size_bytes": os.path.getsize(path),
        "rows": table_rows,
        "clock": {
            "unit": "ns",
            "base_ns": base_ns,
            "origin": "baseTimeNanoseconds + ts" if base is not None else "absolute ts as written",
        },
        "rank": (meta.get("distributedInfo") or {}).get("rank"),
        "devices": [
            {k: d.get(k) for k in ("id", "name", "totalGlobalMem", "computeMajor", "computeMinor", "numSms")}
            for d in meta.get("deviceProperties") or []
            if isinstance(d, dict)
        ],
        "trace_metadata": {
            k: v
            for k, v in meta.items()
            if k not in ("deviceProperties", "distributedInfo", "traceEvents") and not isinstance(v, (dict, list))
        }
        | {k: meta[k] for k in ("vllm_version", "vllm_version_tuple") if k in meta},
        "lanes": [{"kind": r[0], "pid": r[1], "tid": r[2], "value": r[3]} for r in lanes],
        "python_function_events_kept": int(counts["python"]),
    }

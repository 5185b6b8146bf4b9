"""The compiled reader's driver: a whole trace's event array → the profiler tables, on every usable core.

``_kineto_fast`` (C, built at install where a compiler is available) reads blocks of whole events into
the rows ``kineto``'s DuckDB reader stages (same values), already split by the table each feeds, with the
counts ``kineto._finalize`` needs and a hash per row for duplicate detection; it releases the GIL, so
each core (``lltrace.cores.usable_cores``) reads one piece of the array at a time (``split_event_array``), and
hands each block's columns over without a copy. ``ops`` and ``flows`` are written in their
final form as they are read; kernels, annotations and metadata events go to small staging files that
``kineto._finalize`` joins and sorts. It handles the common case only and says so (``Unsupported``) where
the DuckDB reader must decide: nothing is kept of that piece, which the caller reads the other way, and the
other pieces stay read (every piece declined: the whole array is read the other way).
Set ``LLTRACE_PURE=1`` to always use the DuckDB reader. Strings are scanned 32 bytes at a time where the CPU
has AVX2 (``_kineto_fast.SIMD`` says which path runs; ``LLTRACE_NO_AVX2=1`` takes the 16-byte one).
"""

from __future__ import annotations

import gc
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lltrace.parsers._jsonscan import ArrayLocation
from lltrace.tables import FLOWS, OPS

try:
    from lltrace.parsers import _kineto_fast
except ImportError:  # built without a C compiler
    _kineto_fast = None

# The staged columns of kineto._BATCH_SELECT, in its order, with its types, and the flow id as an integer.
STAGED_SCHEMA = pa.schema(
    [(n, pa.string()) for n in ("ph", "cat", "name", "pid", "tid")]
    + [(n, pa.int64()) for n in ("ts_ns", "dur_ns", "external_id", "correlation", "ev_idx", "device", "stream")]
    + [(n, pa.string()) for n in ("grid", "block")]
    + [(n, pa.int64()) for n in ("bytes", "cbid")]
    + [(n, pa.string()) for n in ("input_dims", "meta_value", "flow_id", "flow_bp")]
    + [(n, pa.bool_()) for n in ("old_cat", "bad_link", "dropped")]
    + [("flow_id_int", pa.int64())]
)
SINKS = ("kernels", "ops", "annotations", "flows", "meta", "launches")
# The staged columns each sink carries (the compiled reader's SINK_COLUMNS: what _finalize reads of it).
SINK_COLUMNS = dict(zip(SINKS, _kineto_fast.SINK_COLUMNS, strict=True)) if _kineto_fast else {}
SINK_SCHEMAS = {s: pa.schema([STAGED_SCHEMA.field(i) for i in cols]) for s, cols in SINK_COLUMNS.items()}
# the others are written in final form; "launches" are the ops rows that launch GPU work, staged apart as well
STAGED_SINKS = ("kernels", "annotations", "meta", "launches")
# The final tables written here (lltrace.tables' declarations, part first): (column, staged source column).
_SOURCE = {"flow_id": "flow_id_int", "bp": "flow_bp"}
OPS_COLUMNS = [(c, _SOURCE.get(c, c)) for c in OPS.names if c != "part"]
FLOWS_COLUMNS = [(c, _SOURCE.get(c, c)) for c in FLOWS.names if c != "part"]
BLOCK_BYTES = 4 << 20  # bytes read per call of the compiled reader, per thread
# rows per row group written: a final table's, and a staged file's (its rows hold more text: kernel names). A block
# holds about 1,500 kernels: a row group per block took the reader threads 0.3 s more on a 2 GB trace.
_ROW_GROUP = {"final": 65536, "staged": 16384}
MAX_EVENT_BYTES = 8 << 20  # one event larger than this is not a real trace event (DuckDB's maximum_object_size)
_MAX_BASE = 2**62  # the largest clock base the readers add (far beyond any real one: the sums cannot overflow)
# How each kind of file is written. The staged ones are read once, soon: no compression.
_STAGED_WRITE: dict[str, Any] = {"compression": "none", "write_statistics": False}
_FINAL_WRITE: dict[str, Any] = {"compression": "zstd"}


def _text_columns(schema: pa.Schema) -> list[str]:
    return [f.name for f in schema if pa.types.is_string(f.type)]


def _staged_write(schema: pa.Schema) -> dict[str, Any]:
    """How a staged file is written: its text columns dictionary-encoded (see ``_final_write``). On a 2 GB trace the
    kernels' links to their launches and their classes read the staged kernels and launches in 0.16 s so, 0.32 s
    with only the kernel names encoded; the write takes about as long."""
    return _STAGED_WRITE | {"use_dictionary": _text_columns(schema)}


def _final_write(schema: pa.Schema) -> dict[str, Any]:
    """How a final table is written: its text columns dictionary-encoded, statistics for its number and flag
    columns only.

    A trace's names, categories and lanes are few: DuckDB then checks and compares each distinct text once, not
    each row's. On a 2 GB trace's 2.5 M ops, the step detection's scans of their names take 0.02 s (its markers),
    0.05 s (the attention ops' shapes) and 0.01 s (graph launches), against 0.10, 0.15 and 0.07 s plain; the
    encoding adds 0.01-0.05 s to the write, and a column with too many distinct values for a dictionary page
    (1 MB) falls back to plain by itself. A row group's least and greatest name, category or lane prune nothing
    (every row group holds them all) and cost string comparisons on every value (0.05-0.08 CPU-seconds on a 2 GB
    trace)."""
    kept = [f.name for f in schema if not pa.types.is_string(f.type)]
    return _FINAL_WRITE | {"use_dictionary": _text_columns(schema), "write_statistics": kept}


def reader_base(metadata: dict[str, Any]) -> int | None:
    """The clock base the compiled reader adds to the rows' times: the document's ``baseTimeNanoseconds`` (0 where
    it has none), or None where that is not one it takes (not an integer, or beyond +-2^62): DuckDB's reader then
    reads the trace and judges it."""
    base = metadata.get("baseTimeNanoseconds", 0)
    return base if type(base) is int and -_MAX_BASE < base < _MAX_BASE else None


def available() -> bool:
    """Whether the compiled reader is built and not switched off (``LLTRACE_PURE=1``)."""
    return _kineto_fast is not None and os.environ.get("LLTRACE_PURE", "") in ("", "0")


@dataclass
class FastResult:
    """What the compiled reader found: the finalize counts, rows per table, and the distinct-row count."""

    counts: dict[str, int | None]
    rows: dict[str, int]
    distinct_events: int
    staged: dict[str, list[Path]] = field(default_factory=dict)
    declined: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, why): for DuckDB
    declined_counts: dict[str, int | None] = field(default_factory=dict)  # DuckDB's staging of those
    base_ns: int = 0  # the clock base the readers added to the times (shift_outputs: ops and flows then moved on)
    # where the time went: the reader threads' wall time summed over them, reading the file's bytes (the copy from
    # the page cache), parsing them (the compiled reader, without the GIL) and writing the tables (Arrow batches,
    # Parquet encoding and compression); then, once they are done, counting the distinct rows ("duplicates")
    seconds: dict[str, float] = field(default_factory=dict)


class _Stop(Exception):
    """Another reader gave up: stop this one too."""


def _batch(sink: str, rows: int, columns: tuple) -> pa.RecordBatch:
    arrays = []
    for i in SINK_COLUMNS[sink]:
        valid, values, data, nulls = columns[i]
        vbuf = None if valid is None else pa.py_buffer(valid)
        bufs = [vbuf, pa.py_buffer(values)] + ([pa.py_buffer(data)] if data is not None else [])
        arrays.append(pa.Array.from_buffers(STAGED_SCHEMA.field(i).type, rows, bufs, null_count=nulls))
    return pa.RecordBatch.from_arrays(arrays, schema=SINK_SCHEMAS[sink])


def _final(batch: pa.RecordBatch, columns: list[tuple[str, str]], schema: pa.Schema, part: int) -> pa.RecordBatch:
    # (from_buffers: pa.array on a NumPy array would import pandas, 0.2 s, where it is installed)
    parts = pa.Array.from_buffers(
        pa.int32(), batch.num_rows, [None, pa.py_buffer(np.full(batch.num_rows, part, np.int32))]
    )
    arrays = [parts, *(batch.column(src) for _, src in columns)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class _Piece:
    """One piece's writers and tallies (its own files: a piece declined part way leaves nothing)."""

    def __init__(self, k: int, scratch: Path, stage: Path, part: int):
        self.k = k
        self.part = part
        self.paths = {s: scratch / f"fast-{s}-{k}.parquet" for s in STAGED_SINKS}
        name = f"part-{part:05d}.parquet" if k == 0 else f"part-{part:05d}.{k}.parquet"  # glob: part-N.*parquet
        self.paths["ops"] = stage / "ops" / name
        self.paths["flows"] = stage / "flows" / name
        self.writers: dict[str, pq.ParquetWriter] = {}
        self.pending: dict[str, list[pa.RecordBatch]] = {s: [] for s in SINKS}
        self.counts: list[list[int | None]] = []
        self.rows = dict.fromkeys(SINKS, 0)
        self.hashes: list[np.ndarray] = []
        self.seconds = dict.fromkeys(("read", "parse", "write", "sort"), 0.0)
        self.held: list[tuple[str, pa.RecordBatch]] | None = None  # a streamed piece's batches, until it is whole
        self.marks = (0, 0)

    def open(self) -> None:
        for s in STAGED_SINKS:
            self.writers[s] = pq.ParquetWriter(self.paths[s], SINK_SCHEMAS[s], **_staged_write(SINK_SCHEMAS[s]))
        for t, schema in (("ops", OPS.schema), ("flows", FLOWS.schema)):
            self.writers[t] = pq.ParquetWriter(self.paths[t], schema, **_final_write(schema))

    def hold(self) -> None:
        """Hold what is written from now on until ``commit`` (one piece of a stream read whole) or ``rollback`` (the
        piece declined: its rows, counts and hashes dropped, the earlier pieces' kept)."""
        self.held = []
        self.marks = (len(self.counts), len(self.hashes))

    def commit(self) -> None:
        held, self.held = self.held or [], None
        for sink, batch in held:
            self.write(sink, batch)

    def rollback(self) -> None:
        self.held = None
        del self.counts[self.marks[0] :], self.hashes[self.marks[1] :]

    def write(self, sink: str, batch: pa.RecordBatch) -> None:
        """Write a batch, in row groups of about ``_ROW_GROUP`` rows."""
        if self.held is not None:
            self.held.append((sink, batch))
            return
        self.rows[sink] += batch.num_rows
        self.pending[sink].append(batch)
        if sum(b.num_rows for b in self.pending[sink]) >= _ROW_GROUP["staged" if sink in STAGED_SINKS else "final"]:
            self.flush(sink)

    def flush(self, sink: str) -> None:
        if self.pending[sink]:
            self.writers[sink].write_table(pa.Table.from_batches(self.pending[sink]))
            self.pending[sink] = []

    def close(self) -> None:
        for s, w in self.writers.items():
            self.flush(s)
            w.close()

    def sort_hashes(self) -> None:
        """The piece's row hashes as one sorted array: the trace's distinct count then merges sorted runs."""
        clock = time.perf_counter()
        if self.hashes:  # one array of its own (the blocks' arrays are the reader's read-only buffers)
            joined = np.concatenate(self.hashes)
            joined.sort()
            self.hashes = [joined]
        self.seconds["sort"] = time.perf_counter() - clock

    def remove(self) -> None:
        for p in self.paths.values():
            p.unlink(missing_ok=True)


def merge_counts(names: list[str], parts: list[list[int | None]]) -> dict[str, int | None]:
    """The finalize counts of several pieces of one trace (each a list in ``names`` order): the earliest and
    latest times of all, the sums of the rest."""
    out: dict[str, int | None] = {}
    for i, name in enumerate(names):
        vals = [p[i] for p in parts if p and p[i] is not None]
        if name in ("min_ts",):
            out[name] = min(vals) if vals else None
        elif name in ("max_ts", "max_x_ts"):
            out[name] = max(vals) if vals else None
        else:
            out[name] = sum(vals)
    return out


def _take(piece: _Piece, sinks: tuple, counts: tuple, hashes: object) -> None:
    """One block's rows, counts and row hashes into the piece."""
    clock = time.perf_counter()
    for name, (rows, columns) in zip(SINKS, sinks, strict=True):
        if not rows:
            continue
        batch = _batch(name, rows, columns)
        if name == "ops":
            batch = _final(batch, OPS_COLUMNS, OPS.schema, piece.part)
        elif name == "flows":
            batch = _final(batch, FLOWS_COLUMNS, FLOWS.schema, piece.part)
        piece.write(name, batch)
    piece.counts.append(list(counts))
    row_hashes = np.frombuffer(hashes, dtype=np.uint64)  # type: ignore[call-overload]
    if row_hashes.size:
        piece.hashes.append(row_hashes)
    piece.seconds["write"] += time.perf_counter() - clock


def _read_bytes(
    data: bytes, start: int, piece: _Piece, base_ns: int, keep_python: bool, ext_key: str, stop: threading.Event
) -> None:
    """Read a piece of the array held in memory (``data``, whole events, from offset ``start``: a ``Feed``'s)."""
    view = memoryview(data)
    pos, want, first = 0, BLOCK_BYTES, True
    while True:
        if stop.is_set():
            raise _Stop
        end = min(len(data), pos + want)
        final = end >= len(data)
        clock = time.perf_counter()
        try:
            consumed, sinks, counts, hashes = _kineto_fast.read_events(
                view[pos:end], first, final, keep_python, ext_key, base_ns, MAX_EVENT_BYTES
            )
        except _kineto_fast.Unsupported as exc:
            raise _kineto_fast.Unsupported(start + pos + exc.args[0], exc.args[1]) from None
        piece.seconds["parse"] += time.perf_counter() - clock
        _take(piece, sinks, counts, hashes)
        if final:
            return
        if consumed:
            pos, want, first = pos + consumed, BLOCK_BYTES, False
        elif want >= BLOCK_BYTES + MAX_EVENT_BYTES:
            raise _kineto_fast.Unsupported(start + pos, "an event longer than the largest one read")
        else:  # one event longer than the block: a longer look
            want *= 2


class Feed:
    """Pieces of the event array handed to ``stage`` as they are made (``kineto_stream``): (start, end, bytes), whole
    events each. ``keep(start, bytes)`` is given each piece the compiled reader declines; ``stop`` is set when the
    readers give up (the maker stops too) or are done."""

    def __init__(self, readers: int, keep: Callable[[int, bytes], None]) -> None:
        self._pieces: queue.Queue[tuple[int, int, bytes]] = queue.Queue(maxsize=max(1, readers))
        self._ended = threading.Event()
        self.stop = threading.Event()
        self.keep = keep

    def put(self, start: int, end: int, data: bytes) -> None:
        """Hand a piece over (waits while the readers are busy; gives up once they stop)."""
        while not self.stop.is_set():
            try:
                self._pieces.put((start, end, data), timeout=0.05)
                return
            except queue.Full:
                continue

    def end(self) -> None:
        """No more pieces."""
        self._ended.set()

    def get(self) -> tuple[int, int, bytes] | None:
        """The next piece, or None after the last one (or once the readers stop)."""
        while not self.stop.is_set():
            try:
                return self._pieces.get(timeout=0.05)
            except queue.Empty:
                if self._ended.is_set() and self._pieces.empty():
                    return None
        return None


def _read_piece(
    path: Path,
    start: int,
    end: int,
    piece: _Piece,
    base_ns: int,
    keep_python: bool,
    ext_key: str,
    stop: threading.Event,
    advance: Callable[[int], None],
) -> None:
    """Read bytes [start, end) of the array (whole events) through the compiled reader."""
    buf = bytearray(BLOCK_BYTES)
    carry = 0  # bytes at the front of buf not consumed yet
    pos = start
    first = True
    with open(path, "rb") as f:
        f.seek(start)
        while True:
            if stop.is_set():
                raise _Stop
            want = min(len(buf) - carry, end - pos)
            clock = time.perf_counter()
            n = f.readinto(memoryview(buf)[carry : carry + want]) if want else 0
            read_at = time.perf_counter()
            piece.seconds["read"] += read_at - clock
            if want and n <= 0:
                raise _kineto_fast.Unsupported(pos, "the file shrank while being read")
            pos += n
            size = carry + n
            final = pos >= end
            try:
                consumed, sinks, counts, hashes = _kineto_fast.read_events(
                    memoryview(buf)[:size], first, final, keep_python, ext_key, base_ns, MAX_EVENT_BYTES
                )
            except _kineto_fast.Unsupported as exc:  # its offset is within buf, which starts at pos - size
                raise _kineto_fast.Unsupported(pos - size + exc.args[0], exc.args[1]) from None
            piece.seconds["parse"] += time.perf_counter() - read_at
            if consumed:
                first = False
            _take(piece, sinks, counts, hashes)
            advance(consumed)
            if final:
                return
            carry = size - consumed
            if consumed == 0 and carry == len(buf):  # one event longer than the buffer
                if len(buf) >= BLOCK_BYTES + MAX_EVENT_BYTES:
                    raise _kineto_fast.Unsupported(pos, "an event longer than the largest one read")
                buf.extend(bytes(len(buf)))
            elif consumed:
                buf[:carry] = buf[consumed:size]


def stage(
    path: Path,
    pieces: list[tuple[int, int]] | Feed,
    scratch: Path,
    stage_dir: Path,
    part: int,
    base_ns: int,
    keep_python: bool,
    old_external_id: bool,
    progress: Callable[[int], None] | None,
    readers: int = 2,
) -> FastResult | str:
    """Read the event array's pieces (byte ranges of whole events of the file ``path``, or a ``Feed``'s pieces as they
    come) on ``readers`` threads.

    Each piece of the file (each reader, of a feed) writes ``stage_dir/{ops,flows}/part-<part>[.<k>].parquet`` in
    final form and its kernels, annotations and metadata rows to ``scratch/fast-<sink>-<k>.parquet``. A piece the
    compiled reader cannot read (``Unsupported``) leaves no row and is listed in ``FastResult.declined`` with why,
    for the DuckDB reader (a feed's is given to its ``keep``); the other pieces stay read. Returns the
    ``FastResult``, or why the DuckDB reader must read the whole array (every piece declined; then no file is
    left)."""
    assert _kineto_fast is not None
    ext_key = "external id" if old_external_id else "External id"
    stop = pieces.stop if isinstance(pieces, Feed) else threading.Event()
    failures: list[BaseException] = []
    lock = threading.Lock()
    done = [0]
    for t in ("ops", "flows"):
        (stage_dir / t).mkdir(parents=True, exist_ok=True)
    read: list[_Piece] = []
    declined: list[tuple[int, int, str]] = []

    def advance(n: int) -> None:
        if progress is not None:
            with lock:
                done[0] += n
                progress(done[0])

    def stream(feed: Feed, k: int) -> None:
        piece: _Piece | None = None
        kept = 0
        try:
            while (item := feed.get()) is not None:
                start, end, data = item
                if piece is None:
                    piece = _Piece(k, scratch, stage_dir, part)
                    piece.open()
                piece.hold()
                try:
                    _read_bytes(data, start, piece, base_ns, keep_python, ext_key, stop)
                except _kineto_fast.Unsupported as exc:
                    piece.rollback()
                    feed.keep(start, data)
                    with lock:
                        declined.append((start, end, f"byte {exc.args[0]}: {exc.args[1]}"))
                    continue
                piece.commit()
                kept += 1
        except BaseException:
            if piece is not None:
                piece.close()
                piece.remove()
            raise
        if piece is None:
            return
        piece.close()
        if not kept:
            piece.remove()
            return
        piece.sort_hashes()
        with lock:
            read.append(piece)

    todo = [] if isinstance(pieces, Feed) else list(range(len(pieces)))  # taken in order by whichever reader is free

    def work(k: int = 0) -> None:
        try:
            if isinstance(pieces, Feed):
                stream(pieces, k)
            while not stop.is_set():
                with lock:
                    if not todo:
                        return
                    i = todo.pop(0)
                piece = _Piece(i, scratch, stage_dir, part)
                piece.open()
                try:
                    _read_piece(path, *pieces[i], piece, base_ns, keep_python, ext_key, stop, advance)  # type: ignore[index]
                except _kineto_fast.Unsupported as exc:
                    piece.close()
                    piece.remove()
                    with lock:
                        declined.append((*pieces[i], f"byte {exc.args[0]}: {exc.args[1]}"))  # type: ignore[index]
                    continue
                except BaseException:
                    piece.close()
                    piece.remove()
                    raise
                clock = time.perf_counter()
                piece.close()  # (the last row groups written)
                piece.seconds["write"] += time.perf_counter() - clock
                piece.sort_hashes()  # on this reader's core (NumPy sorts without the GIL)
                with lock:
                    read.append(piece)
        except _Stop:
            pass
        except BaseException as exc:  # handed to the caller below
            failures.append(exc)
            stop.set()

    count = readers if isinstance(pieces, Feed) else min(readers, len(pieces))
    threads = [threading.Thread(target=work, args=(k,), name=f"lltrace-read-{k}") for k in range(1, count)]
    collecting = gc.isenabled()
    gc.disable()  # nothing here makes reference cycles; collections would scan every module's objects
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)  # a reader back from C waits for the GIL at most this long, not 5 ms
    try:
        for t in threads:
            t.start()
        work()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
        if collecting:
            gc.enable()
    if failures or not read:
        for s in read:
            s.remove()
        if failures:
            raise failures[0]
        return min(declined)[2] if declined else "no piece to read"
    read.sort(key=lambda s: s.k)
    names = _kineto_fast.COUNT_NAMES.split()
    counts = merge_counts(names, [c for s in read for c in s.counts])
    clock = time.perf_counter()
    # the pieces' sorted hashes (8 bytes per event) merged where they lie: no copy of them all
    distinct = _kineto_fast.count_distinct([h for s in read for h in s.hashes])
    for s in read:
        s.hashes.clear()
    rows = {name: sum(s.rows[name] for s in read) for name in SINKS}
    staged = {s: [st.paths[s] for st in read] for s in STAGED_SINKS}
    seconds = {k: round(sum(s.seconds[k] for s in read), 3) for k in ("read", "parse", "write", "sort")}
    seconds["duplicates"] = round(time.perf_counter() - clock, 3)  # after the threads: the distinct rows counted
    return FastResult(counts, rows, distinct, staged, sorted(declined), base_ns=base_ns, seconds=seconds)


def _final_files(stage_dir: Path, part: int) -> list[Path]:
    """The ``ops`` and ``flows`` files ``stage`` wrote for ``part`` (every reader's)."""
    return [p for t in ("ops", "flows") for p in (stage_dir / t).glob(f"part-{part:05d}.*parquet")]


def remove_outputs(result: FastResult, stage_dir: Path, part: int) -> None:
    """Delete what ``stage`` wrote (when its rows must be read the other way after all)."""
    for paths in result.staged.values():
        for p in paths:
            p.unlink(missing_ok=True)
    for p in _final_files(stage_dir, part):
        p.unlink()


def _shift_file(path: Path, by_ns: int) -> None:
    """Rewrite one of the final tables ``stage`` wrote with ``by_ns`` added to its times, row group by row group."""
    out = path.with_name(path.name + ".shifted")
    try:
        with pq.ParquetFile(path) as src:
            schema = src.schema_arrow
            with pq.ParquetWriter(out, schema, **_final_write(schema)) as w:
                at = schema.get_field_index("ts_ns")
                for g in range(src.num_row_groups):
                    rows = src.read_row_group(g)
                    w.write_table(rows.set_column(at, "ts_ns", pc.add_checked(rows.column(at), by_ns)))
    except BaseException:
        out.unlink(missing_ok=True)
        raise
    os.replace(out, path)


def shift_outputs(result: FastResult, stage_dir: Path, part: int, by_ns: int) -> bool:
    """Add ``by_ns`` to the times of every row ``stage`` wrote: the clock base, where the document gives it only after
    its events and they were read with none (``kineto_stream``). ``ops`` and ``flows`` are rewritten; the staged rows
    are moved as ``kineto_tables.finalize`` reads them (by the document's base less ``result.base_ns``). False,
    changing nothing, where a
    time could pass 64-bit nanoseconds (the compiled reader declines such a row: the caller reads the trace the
    other way)."""
    ends = [result.counts[k] for k in ("min_ts", "max_ts")]  # the rows' times before any base
    if any(t is not None and not -(2**63) <= t + result.base_ns + by_ns < 2**63 for t in ends):
        return False
    for p in _final_files(stage_dir, part):  # one at a time, on this thread: two at once save 0.3 s on 2 GB but
        _shift_file(p, by_ns)  # hold 80 MB more, and their threads' allocations stay held through the later phases
    pa.default_memory_pool().release_unused()  # (what the rewriting held goes back before the next phase)
    return True


def byte_ranges(res: FastResult, loc: ArrayLocation) -> list[dict[str, Any]]:
    """Which byte ranges of the event array each reader read (the declined ones with why)."""
    out: list[dict[str, Any]] = []
    at = loc.open + 1
    for start, end, why in res.declined:
        if start > at:
            out.append({"bytes": [at, start], "reader": "compiled"})
        out.append({"bytes": [start, end], "reader": "duckdb", "why": why})
        at = end
    if at < loc.close:
        out.append({"bytes": [at, loc.close], "reader": "compiled"})
    return out

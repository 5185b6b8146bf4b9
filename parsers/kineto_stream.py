"""The compiled reader on a gzipped trace as it is inflated, with no decompressed copy written first.

A ``.json.gz`` trace (the form the PyTorch profiler writes in vLLM, ``*.pt.trace.json.gz``) is inflated on a thread
of its own (zlib releases the GIL) and cut, as it comes, into pieces of whole events; the compiled reader's threads
take each piece as it is made (``kineto_fast.stage`` with a ``Feed``). Without this, the document is first
decompressed into a scratch file on one core, which on a 2 GB trace took longer than reading it.

The readers add the document's clock base (``baseTimeNanoseconds``) to the times they write. Where the document's
head (what comes before ``traceEvents``) holds it, as in every vLLM and SGLang trace in sample_traces/, or the document
is a bare event array (no base), it is known before the events. Where the head has none, the base may still come after
the events: Kineto wrote it in the document's closing lines (``finalizeTrace``) before it moved it ahead of the events
(``handleTraceStart``), so the HTA and Hugging Face traces here have it last, and traces older than PyTorch 2.4 have
none. Then the events are read with none, and once the stream's end shows the base, the times written are moved by
it (``kineto_fast.shift_outputs``: ``ops`` and ``flows`` rewritten, about a second for 2 GB of trace, where writing
it decompressed to a file first cost more; the staged rows moved as they are joined). A piece the compiled
reader declines is written at its offset into a sparse copy of the document, for DuckDB's reader. A stream cut short,
a document that does not end as a trace does, a clock base the readers do not take, or no boundary between events
where one is looked for give None, having kept nothing: the caller reads the file the other ways.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lltrace.parsers import kineto_fast
from lltrace.parsers._blocks import Inflate
from lltrace.parsers._jsonscan import ArrayHead, ArrayLocation, array_head, close_from_tail, find_cut, metadata_of

PIECE_BYTES = 4 << 20  # bytes of events per piece (about: it ends at the first event boundary after); the bytes
# inflated but not read yet are about (2 x readers + 3) x this: a few pieces, not the document
_CUT_WINDOW = 16 << 10  # bytes looked at for an event boundary: dozens of events confirm it (and each piece
# is checked whole by the reader: one ending inside an event is declined)
_TAIL_BYTES = 8 << 20  # bytes at the end looked at for the array's close (locate_event_array's)
_HEAD_BYTES = 8 << 20  # the most inflated to find where the array opens


@dataclass
class Streamed:
    """What the compiled reader made of the stream: its result, where the array lay, and the sparse document that
    holds the pieces it declined (at their offsets), for DuckDB's reader."""

    result: kineto_fast.FastResult
    location: ArrayLocation
    document: Path
    size: int  # bytes decompressed: the document's size


def _head(path: str) -> tuple[ArrayHead, int] | None:
    """Where the array opens, from the document's first bytes, and the clock base the readers add (0 where the head has
    none: it may come after the events); None where the array's opening is not there or the head's base is not one the
    readers take."""
    inflater = zlib.decompressobj(wbits=31)
    with open(path, "rb") as f:
        try:
            head = inflater.decompress(f.read(1 << 20), _HEAD_BYTES)
        except zlib.error:
            return None  # corrupt from the start: the file path says so, with its offset
    found = array_head(path, head)
    if found is None:
        return None
    if found.array_form:
        return found, 0
    meta = metadata_of(path, found.text, b"}")
    base = None if meta is None else kineto_fast.reader_base(meta)
    return None if base is None else (found, base)


class _Cutter:
    """Inflates the stream on its own thread and feeds pieces of whole events to the readers."""

    def __init__(self, path: str, head: ArrayHead, feed: kineto_fast.Feed, progress: Callable[[int], None] | None):
        self.path, self.head, self.feed, self.progress = path, head, feed, progress
        self.error: BaseException | None = None
        self.why_not: str | None = None  # why the stream cannot be read this way (then nothing is kept)
        self.close: int | None = None
        self.tail = b""
        self.size = 0
        self.thread = threading.Thread(target=self._run, name="lltrace-inflate", daemon=True)

    def _run(self) -> None:
        try:
            self._cut()
        except BaseException as exc:  # raised in the caller
            self.error = exc
        finally:
            self.feed.end()

    def _cut(self) -> None:
        head, path = self.head, self.path
        with open(path, "rb") as f:
            stream = Inflate(f, path, PIECE_BYTES, self.progress)
            buf = bytearray()
            at = head.open + 1  # the offset of buf[0]: just after the array's "["
            seen = 0  # bytes inflated
            look = PIECE_BYTES  # where in buf to look for the next cut
            for chunk in stream:
                if self.feed.stop.is_set():
                    return
                skip = max(0, at - seen)  # the head, before the array
                seen += len(chunk)
                buf += memoryview(chunk)[skip:] if skip else chunk
                while len(buf) >= look + _CUT_WINDOW:
                    cut = find_cut(path, bytes(buf[look : look + _CUT_WINDOW]), at + look, head.ev_depth)
                    if cut is None:  # no event boundary there (a very long event): look further on
                        look += _CUT_WINDOW
                        if look > PIECE_BYTES + 2 * kineto_fast.MAX_EVENT_BYTES:  # longer than any event read
                            self.why_not = f"no boundary between events within {look:,} bytes"
                            return
                        continue
                    end, start = cut
                    with memoryview(buf) as view:
                        piece = bytes(view[: end - at])  # (one copy: a slice of buf would be a second)
                    self.feed.put(at, end, piece)
                    del buf[: start - at]
                    at, look = start, PIECE_BYTES
            self.size = seen
            if stream.truncated_at is not None:
                self.why_not = f"gzip stream ends early after {stream.truncated_at} decompressed bytes"
                return
            window = min(len(buf), _TAIL_BYTES)
            found = close_from_tail(path, bytes(buf[len(buf) - window :]), at + len(buf) - window, head.ev_depth)
            if found is None:
                self.why_not = "the document does not end as a trace does"
                return
            self.close, self.tail = found
            with memoryview(buf) as view:
                piece = bytes(view[: self.close - at])  # (empty where the array is)
            self.feed.put(at, self.close, piece)


def stage_gzip(
    path: str,
    scratch: Path,
    stage_dir: Path,
    part: int,
    keep_python: bool,
    old_external_id: bool,
    readers: int,
    progress: Callable[[int], None] | None,
) -> Streamed | str | None:
    """Read the gzipped trace ``path`` with the compiled reader as it is inflated (``kineto_fast.stage``'s outputs).
    Keeping nothing: why DuckDB's reader must read the whole array, where every piece was declined; or None, where the
    stream is not a whole trace or its clock base is not one the readers take (the caller then reads the file the
    other ways). Corrupt gzip data raises ``TraceFormatError``."""
    found = _head(path)
    if found is None:
        return None
    head, base = found  # the base the readers add: the head's, else 0 until the end shows whether there is one
    document = scratch / "document.json"  # sparse: the declined pieces' bytes at their offsets
    out = open(document, "wb")  # noqa: SIM115 (closed below, once the readers are done)
    lock = threading.Lock()

    def keep(start: int, data: bytes) -> None:
        with lock:
            out.seek(start)
            out.write(data)

    feed = kineto_fast.Feed(readers, keep)
    cutter = _Cutter(path, head, feed, progress)
    cutter.thread.start()
    try:
        res = kineto_fast.stage(path, feed, scratch, stage_dir, part, base, keep_python, old_external_id, None, readers)
    finally:
        feed.stop.set()  # (the readers are done: the cutter stops if it is not)
        cutter.thread.join()
        out.close()
    if cutter.error is not None or cutter.why_not is not None or isinstance(res, str):
        if not isinstance(res, str):
            kineto_fast.remove_outputs(res, stage_dir, part)
        document.unlink(missing_ok=True)
        if cutter.error is not None:
            raise cutter.error
        return res if isinstance(res, str) and cutter.why_not is None else None
    assert cutter.close is not None
    meta = {} if head.array_form else metadata_of(path, head.text, cutter.tail)
    whole = None if meta is None else kineto_fast.reader_base(meta)  # the document's base, head and tail read
    if whole is None or (whole != base and not kineto_fast.shift_outputs(res, stage_dir, part, whole - base)):
        kineto_fast.remove_outputs(res, stage_dir, part)
        document.unlink(missing_ok=True)
        return None
    return Streamed(res, ArrayLocation(head.open, cutter.close, meta, head.array_form), document, cutter.size)

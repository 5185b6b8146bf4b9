"""Stream the event array of a Chrome-trace JSON document as newline-delimited JSON batches.

A profiler trace is one JSON object whose ``traceEvents`` array holds millions of events. Building a
Python object per event is what makes ``json.load`` slow and memory-hungry, so this module never parses
events at all: it finds the array's structure with vectorised byte scans (numpy over the positions of
quotes, brackets and commas), rewrites each top-level event of the array onto one line, and hands the
lines over in fixed-size batches for a columnar JSON reader (DuckDB) to decode. Memory is bounded by the
block size, not by the file.

The metadata keys around the array (``baseTimeNanoseconds``, ``deviceProperties``…) may come before or
after it; both sides are kept as raw bytes and parsed once at the end.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import orjson

from lltrace.errors import TraceFormatError
from lltrace.parsers._blocks import BLOCK_BYTES, read_blocks
from lltrace.parsers._lines import DuplicateKey, unique_keys

_MAX_METADATA_BYTES = 64 << 20

# Byte classes: 1 open, 2 close, 3 comma, 4 quote, 5 backslash, 6 control char other than tab/LF/CR.
# Tab, LF and CR are left out on purpose: they are whitespace between tokens, and inside a string (old
# Kineto wrote raw newlines into python_function names) they become spaces when events are flattened.
_CLASS = bytearray(256)
for _c in b"{[":
    _CLASS[_c] = 1
for _c in b"}]":
    _CLASS[_c] = 2
_CLASS[ord(",")] = 3
_CLASS[ord('"')] = 4
_CLASS[ord("\\")] = 5
for _c in range(32):
    _CLASS[_c] = 6
for _c in b"\t\n\r":
    _CLASS[_c] = 0
_CLASS_TABLE = bytes(_CLASS)
_FLATTEN = bytes.maketrans(b"\t\n\r", b"   ")
_KEY_BEFORE = re.compile(rb'"traceEvents"\s*:\s*\Z')
_HEAD, _EVENTS, _TAIL = 0, 1, 2


@dataclass
class Batch:
    """Whole events of the array, one per line, and where the first one starts in the source."""

    data: bytes
    offset: int


@dataclass
class ScanResult:
    """What the scan learnt besides the events: metadata keys and how the document ended."""

    metadata: dict = field(default_factory=dict)
    array_form: bool = False
    bytes_read: int = 0
    truncated: str | None = None
    dropped_bytes: int = 0


_BOM = b"\xef\xbb\xbf"


class EventArrayScanner:
    """Splits a Chrome-trace JSON stream into batches of NDJSON events (see module docstring)."""

    def __init__(self, path: str, block_bytes: int = BLOCK_BYTES) -> None:
        self.path = path
        self.block_bytes = block_bytes
        self.result = ScanResult()
        self._phase = _HEAD
        self._in_string = False
        self._depth = 0
        self._escape_pending = False
        self._ev_depth = 2
        self._head = bytearray()
        self._head_end = 0
        self._tail = bytearray()
        self._carry = b""
        self._carry_offset = 0
        self._started = False
        self.position = 0  # bytes of the file (compressed, for gzip) consumed so far
        self.array_open: int | None = None  # offset of the events array's "["
        self.array_close: int | None = None  # offset of its "]"

    @classmethod
    def inside_array(cls, path: str, ev_depth: int) -> EventArrayScanner:
        """A scanner that starts between two events of the array (for probing a piece of a file)."""
        probe = cls(path)
        probe._phase = _EVENTS
        probe._depth = ev_depth
        probe._ev_depth = ev_depth
        probe._started = True
        return probe

    def _error(self, offset: int, message: str) -> TraceFormatError:
        return TraceFormatError(self.path, f"byte {offset}", message)

    def batches(self) -> Iterator[Batch]:
        """Yield batches of whole events; afterwards ``self.result`` holds metadata and truncation."""
        base = 0

        def truncated(message: str) -> None:
            self.result.truncated = message

        def moved(pos: int) -> None:
            self.position = pos

        for block in read_blocks(self.path, self.block_bytes, truncated, moved):
            yield from self._feed(block, base)
            base += len(block)
        self.result.bytes_read = base
        yield from self._finish(base)

    # -- one block -------------------------------------------------------------------------------
    def _feed(self, block: bytes, base: int) -> Iterator[Batch]:
        cls = np.frombuffer(block.translate(_CLASS_TABLE), dtype=np.uint8)
        pos = np.flatnonzero(cls)
        kind = cls[pos]
        if self._escape_pending or (kind == 5).any():
            pos, kind = self._drop_escaped(pos, kind, len(block))
        is_quote = kind == 4
        quotes_upto = np.cumsum(is_quote, dtype=np.int64)
        inside = ((quotes_upto - is_quote + self._in_string) & 1).astype(bool)
        bad = inside & (kind >= 6)
        if bad.any():
            at = int(pos[np.argmax(bad)])
            raise self._error(base + at, f"raw control character 0x{block[at]:02x} inside a string (invalid JSON)")
        structural = ~inside & (kind <= 3)
        sp = pos[structural]
        sk = kind[structural]
        delta = np.where(sk == 1, 1, np.where(sk == 2, -1, 0))
        d_after = self._depth + np.cumsum(delta)
        d_before = d_after - delta
        if len(quotes_upto):
            self._in_string = bool((int(quotes_upto[-1]) + self._in_string) & 1)
        if len(d_after):
            if int(d_after.min()) < 0:
                at = int(sp[np.argmax(d_after < 0)])
                raise self._error(base + at, "unbalanced closing bracket")
            self._depth = int(d_after[-1])

        i = 0  # index into sp where the rest of this block starts
        start = 0  # byte in block where the rest starts
        if self._phase == _HEAD:
            opened = self._find_array(block, base, sp, sk, d_before)
            if opened is None:
                self._head += block
                if len(self._head) > _MAX_METADATA_BYTES:
                    raise self._error(base, "no traceEvents array in the first 64 MB: not a profiler trace")
                return
            i, start = opened
        if self._phase == _EVENTS:
            closes = np.flatnonzero((sk[i:] == 2) & (d_after[i:] == self._ev_depth - 1))
            end_i = i + int(closes[0]) if len(closes) else None
            end = int(sp[end_i]) if end_i is not None else len(block)
            stop_i = end_i if end_i is not None else len(sp)
            commas = sp[i:stop_i][(sk[i:stop_i] == 3) & (d_before[i:stop_i] == self._ev_depth)]
            yield from self._emit(block, base, start, end, commas, closing=end_i is not None)
            if end_i is None:
                return
            self._phase = _TAIL
            self.array_close = base + end
            start = end + 1
        if self._phase == _TAIL:
            self._tail += block[start:]
            if len(self._tail) > _MAX_METADATA_BYTES:
                raise self._error(base, "more than 64 MB after the traceEvents array")

    def _drop_escaped(self, pos: np.ndarray, kind: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        escaped: list[int] = []
        free_from = 0
        if self._escape_pending:
            escaped.append(0)
            free_from = 1
        for p in pos[kind == 5].tolist():
            if p < free_from:
                continue
            escaped.append(p + 1)
            free_from = p + 2
        self._escape_pending = bool(escaped) and escaped[-1] == size
        keep = (kind != 5) & ~np.isin(pos, np.asarray(escaped, dtype=pos.dtype))
        return pos[keep], kind[keep]

    def _find_array(
        self, block: bytes, base: int, sp: np.ndarray, sk: np.ndarray, d_before: np.ndarray
    ) -> tuple[int, int] | None:
        if not self._started and len(sp):
            self._started = True
            first = block[int(sp[0])]
            prefix = (bytes(self._head) + block[: int(sp[0])]).strip()
            if prefix.startswith(_BOM):  # a UTF-8 byte-order mark is accepted in every format
                prefix = prefix[len(_BOM) :].strip()
            if sk[0] != 1 or prefix:
                raise self._error(base, "not a JSON object or array: not a profiler trace")
            if first == ord("["):
                self.result.array_form = True
                self._ev_depth = 1
                self._phase = _EVENTS
                self.array_open = base + int(sp[0])
                return 1, int(sp[0]) + 1
        for j in np.flatnonzero((sk == 1) & (d_before == 1)).tolist():
            p = int(sp[j])
            if block[p] != ord("["):
                continue
            before = (bytes(self._head[-256:]) + block[max(0, p - 256) : p])[-256:]
            m = _KEY_BEFORE.search(before)
            if m is None:
                continue
            key_at = len(self._head) + p - len(before) + m.start()
            self._head += block[:p]
            self._head_end = key_at
            self._phase = _EVENTS
            self.array_open = base + p
            return j + 1, p + 1
        return None

    def _emit(
        self, block: bytes, base: int, start: int, end: int, commas: np.ndarray, closing: bool
    ) -> Iterator[Batch]:
        region = bytearray(block[start:end].translate(_FLATTEN))
        if len(commas):
            np.frombuffer(region, dtype=np.uint8)[commas - start] = 10
            last = int(commas[-1]) - start
            out = self._carry + bytes(region[: last + 1])
            out_offset = self._carry_offset if self._carry else base + start
            self._carry = bytes(region[last + 1 :])
            self._carry_offset = base + int(commas[-1]) + 1
        else:
            if not self._carry:
                self._carry_offset = base + start
            self._carry += bytes(region)
            out = b""
            out_offset = 0
        if closing:
            out_offset = out_offset if out else self._carry_offset
            out += self._carry
            self._carry = b""
        if out.strip():
            yield Batch(self._check_utf8(out, out_offset), out_offset)

    def _check_utf8(self, data: bytes, offset: int) -> bytes:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self._error(offset + exc.start, "invalid UTF-8 in the event text") from None
        return data

    # -- end of input ----------------------------------------------------------------------------
    def _finish(self, size: int) -> Iterator[Batch]:
        res = self.result
        if self._phase == _HEAD:
            if not self._started:
                if bytes(self._head).strip():
                    raise self._error(0, "not a JSON object or array: not a profiler trace")
                raise self._error(size, "empty file: no JSON document")
            if self._depth > 0 or self._in_string:
                raise self._error(size, "file ends before any traceEvents array (truncated header)")
            raise self._error(0, "JSON document has no traceEvents array: not a profiler trace")
        if self._phase == _EVENTS:
            tail = self._carry.strip().rstrip(b",")
            res.truncated = res.truncated or f"file ends inside the traceEvents array at byte {size}"
            kept = False
            if tail:
                try:
                    kept = isinstance(orjson.loads(tail), dict)
                except orjson.JSONDecodeError:
                    kept = False
            if kept:
                yield Batch(self._check_utf8(tail, self._carry_offset), self._carry_offset)
            else:
                res.dropped_bytes = len(self._carry)
            self._carry = b""
        if res.array_form:
            return
        head = bytes(self._head[: self._head_end]).removeprefix(_BOM)
        tail_bytes = bytes(self._tail) if self._phase == _TAIL else b"}"
        doc = head + b'"traceEvents": null' + tail_bytes
        try:
            meta = orjson.loads(doc)
            unique_metadata_keys(self.path, doc)
        except orjson.JSONDecodeError as exc:
            if self._phase == _TAIL and res.truncated is None:
                res.truncated = f"metadata after the traceEvents array is incomplete ({exc})"
            try:
                meta = orjson.loads(head + b'"traceEvents": null}')
            except orjson.JSONDecodeError:
                meta = {}
        if isinstance(meta, dict):
            meta.pop("traceEvents", None)
            res.metadata = meta


@dataclass
class ArrayLocation:
    """Where a whole (not truncated) document's event array lies, and the metadata around it."""

    open: int
    close: int
    metadata: dict
    array_form: bool


def locate_event_array(path: str, size: int) -> ArrayLocation | None:
    """Find the event array of an uncompressed document by reading only its head and its tail.

    The head is scanned from the start until the ``traceEvents`` array opens. The close is found from
    the end: candidate event starts in the last few MB are scanned forward, and a candidate counts only
    if every object after it parses on its own as an event (it has a ``ph``: the objects of an array that
    follows, such as ``deviceProperties``, have not) and the bytes after the array close the document. Returns
    None when the document does not end like that (a truncated file), so the caller streams instead.
    """
    head = EventArrayScanner(path)
    with open(path, "rb") as f:
        base = 0
        while head._phase == _HEAD:
            block = f.read(1 << 20)
            if not block:
                return None
            for _ in head._feed(block, base):
                pass
            base += len(block)
        if head.array_open is None:
            return None
        if head.array_close is not None:  # the whole array was in the head blocks
            close, tail_bytes = head.array_close, None
        else:
            window = min(size - head.array_open - 1, 8 << 20)
            start = size - window
            f.seek(start)
            tail = f.read(window)
            found = close_from_tail(path, tail, start, head._ev_depth)
            if found is None:
                return None
            close, tail_bytes = found
    if head.result.array_form:
        return ArrayLocation(head.array_open, close, {}, True)
    if tail_bytes is None:
        with open(path, "rb") as f:
            f.seek(close + 1)
            tail_bytes = f.read()
    meta = metadata_of(path, bytes(head._head[: head._head_end]).removeprefix(_BOM), tail_bytes)
    return None if meta is None else ArrayLocation(head.array_open, close, meta, False)


def metadata_of(path: str, head: bytes, tail: bytes) -> dict | None:
    """The trace's metadata: the document's bytes before the ``traceEvents`` key (``head``) and after its array
    (``tail``) read as one object; None where they do not make one (the one-line error where a key repeats)."""
    doc = head + b'"traceEvents": null' + tail
    try:
        meta = orjson.loads(doc)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(meta, dict):
        return None
    unique_metadata_keys(path, doc)
    meta.pop("traceEvents", None)
    return meta


@dataclass
class ArrayHead:
    """Where a document's event array opens, found in its first bytes (``array_head``)."""

    open: int  # offset of the array's "["
    ev_depth: int  # the nesting depth of an event (1 in the bare array form, else 2)
    array_form: bool
    text: bytes  # the document before the "traceEvents" key (empty in the bare array form)


def array_head(path: str, head: bytes) -> ArrayHead | None:
    """Where the event array opens within ``head``, the document's first bytes (as ``locate_event_array`` finds it
    reading a file); None where it does not open within them."""
    scanner = EventArrayScanner(path)
    for at in range(0, len(head), 1 << 20):
        for _ in scanner._feed(head[at : at + (1 << 20)], at):
            pass
        if scanner._phase != _HEAD:
            break
    if scanner.array_open is None:
        return None
    form = scanner.result.array_form
    text = b"" if form else bytes(scanner._head[: scanner._head_end]).removeprefix(_BOM)
    return ArrayHead(scanner.array_open, scanner._ev_depth, form, text)


def unique_metadata_keys(path: str, doc: bytes) -> None:
    """The one-line error when the trace's metadata (the document around its events) names a key twice in
    one object: which value the profiler meant is unknown (the event reader rejects them too)."""
    try:
        json.loads(doc, object_pairs_hook=unique_keys)
    except DuplicateKey as exc:
        raise TraceFormatError(path, "trace metadata", f"invalid JSON ({exc})") from None
    except (ValueError, RecursionError):
        pass  # orjson read it: anything else is not a duplicate


_EVENT_START = re.compile(rb"[,\[]\s*\{")


def _is_event(obj: object) -> bool:
    return isinstance(obj, dict) and "ph" in obj


def close_from_tail(path: str, tail: bytes, base: int, ev_depth: int) -> tuple[int, bytes] | None:
    """The event array's close in ``tail``, the document's last bytes (``base``: the offset of the first): its offset
    and the bytes after it, or None (see ``locate_event_array``)."""
    window = 64 << 10  # the last 64 candidate event starts: look at the end first
    while True:
        start = max(0, len(tail) - window)
        starts = [m.end() - 1 for m in _EVENT_START.finditer(tail, start)]
        if len(starts) >= 64 or start == 0:
            break
        window *= 4
    for p in reversed(starts[-64:]):
        probe = EventArrayScanner.inside_array(path, ev_depth)
        try:
            lines = b"".join(b.data for b in probe._feed(tail[p:], base + p))
            if probe.array_close is None:
                continue
            for line in lines.split(b"\n"):
                # trace events have a phase; objects in a later metadata array (deviceProperties) have not
                if line.strip() and not _is_event(orjson.loads(line)):
                    raise ValueError
        except (TraceFormatError, ValueError, orjson.JSONDecodeError):
            continue
        if probe._tail.strip(b" \t\r\n").rstrip(b"}").strip() and ev_depth == 1:
            continue  # a bare array must end the document
        return probe.array_close, bytes(probe._tail)
    return None


def split_event_array(path: str, loc: ArrayLocation, parts: int, window: int = 2 << 20) -> list[tuple[int, int]]:
    """Cut the event array into up to ``parts`` pieces of whole events, for parallel decoding.

    Returns (end, start) pairs: piece k ends before the separating comma at ``end`` and piece k+1 starts
    at ``start``. A cut is taken near each even share of the array at a candidate event start that a
    forward scan of the next ``window`` bytes confirms (every event it completes parses on its own); where
    no candidate is confirmed, there is no cut there.
    """
    ev_depth = 1 if loc.array_form else 2
    span = loc.close - loc.open
    cuts: list[tuple[int, int]] = []
    if parts < 2 or span < 4 * window:
        return cuts
    with open(path, "rb") as f:
        for k in range(1, parts):
            target = loc.open + span * k // parts
            f.seek(target)
            cut = find_cut(path, f.read(window), target, ev_depth)
            if cut is not None:
                cuts.append(cut)
    return cuts


def find_cut(path: str, buf: bytes, base: int, ev_depth: int) -> tuple[int, int] | None:
    """The first place in ``buf`` (bytes of the event array from offset ``base``) where it can be cut between two
    events: a candidate event start that a forward scan of the rest of ``buf`` confirms (every event it completes
    parses on its own). (end, start) as ``split_event_array`` gives them, or None."""
    for m in re.finditer(rb",\s*\{", buf):
        p = m.end() - 1
        probe = EventArrayScanner.inside_array(path, ev_depth)
        try:
            lines = b"".join(b.data for b in probe._feed(buf[p:], base + p)).split(b"\n")
            complete = [ln for ln in lines if ln.strip()]
            if not complete or not all(isinstance(orjson.loads(ln), dict) for ln in complete):
                continue
        except (TraceFormatError, orjson.JSONDecodeError):
            continue
        return base + m.start(), base + p
    return None

"""A file's bytes in blocks, gunzipped where its magic says gzip (also multi-member, zero padding after the
last member), never more than a block or two in memory; and a compressed file (gzip, zstd, xz, bzip2) decompressed
into another file with the decompressing and the writing on two threads."""

from __future__ import annotations

import bz2
import lzma
import queue
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from lltrace.errors import TraceFormatError

BLOCK_BYTES = 16 << 20
SNIFF_BYTES = 64 << 10  # the first bytes a format is told by (``read_head``)


def is_gzip(path: str | Path) -> bool:
    """Whether the file starts with gzip's magic bytes."""
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


# each compression's magic bytes (RFC 1952, RFC 8878, the .xz file format, bzip2's "BZh" and block size digit)
_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
    *((b"BZh" + bytes([d]), "bzip2") for d in b"123456789"),
)
SUFFIXES = {"gzip": (".gz",), "zstd": (".zst", ".zstd"), "xz": (".xz",), "bzip2": (".bz2",)}
"""The file name endings of each compression (a decompressed copy is named without one)."""


def compression_of(head: bytes) -> str | None:
    """The compression a file's first bytes name (gzip, zstd, xz, bzip2), else None."""
    return next((name for magic, name in _MAGIC if head.startswith(magic)), None)


def compression(path: str | Path) -> str | None:
    """The compression of the file (from its magic bytes, never its name), else None."""
    with open(path, "rb") as f:
        return compression_of(f.read(6))


def without_suffix(name: str) -> str:
    """A compressed file's name without its compression's ending (``server.log.zst`` -> ``server.log``)."""
    lower = name.lower()
    for ending in (e for ends in SUFFIXES.values() for e in ends):
        if lower.endswith(ending):
            return name[: -len(ending)]
    return name


class Unpack:
    """A zstd, xz or bzip2 file's decompressed bytes (every frame or stream of the file), in chunks of at most
    ``chunk_bytes``; as ``Inflate`` does for gzip: corrupt data raises ``TraceFormatError`` at the decompressed
    byte where it was found, a stream that ends early sets ``truncated_at``."""

    def __init__(
        self, f: BinaryIO, path: str, kind: str, chunk_bytes: int, on_position: Callable[[int], None] | None
    ) -> None:
        self.f, self.path, self.kind, self.chunk_bytes, self.on_position = f, path, kind, chunk_bytes, on_position
        self.truncated_at: int | None = None
        self.done = 0

    def _corrupt(self, exc: BaseException) -> TraceFormatError:
        return TraceFormatError(self.path, f"decompressed byte {self.done}", f"corrupt {self.kind} data ({exc})")

    def __iter__(self) -> Iterator[bytes]:
        yield from self._zstd() if self.kind == "zstd" else self._streams()

    def _zstd(self) -> Iterator[bytes]:
        import pyarrow as pa  # its zstd codec (the standard library has none before Python 3.14)

        raw = pa.PythonFile(self.f, mode="r")
        stream = pa.CompressedInputStream(raw, "zstd")
        out = bytearray()
        while True:
            try:  # small reads: a read that meets the end of a cut stream gives nothing of what it decompressed
                piece = stream.read(1 << 16)
            except OSError as exc:
                if "Truncated" not in str(exc):
                    raise self._corrupt(exc) from None
                self.truncated_at = self.done
                piece = b""
            if piece:
                out += piece
                self.done += len(piece)
            if len(out) >= self.chunk_bytes or (not piece and out):
                if self.on_position:
                    self.on_position(self.f.tell())
                yield bytes(out)
                out = bytearray()
            if not piece:
                return

    def _streams(self) -> Iterator[bytes]:
        make: Callable[[], Any] = lzma.LZMADecompressor if self.kind == "xz" else bz2.BZ2Decompressor
        d, data, started = make(), b"", False
        while True:
            if d.eof:  # another stream may follow (xz and pbzip2 write several): padding after the last is skipped
                data, d, started = d.unused_data, make(), False
                if not data.strip(b"\x00"):
                    data = b""
            if d.needs_input and not data:
                data = self.f.read(4 << 20)
                if not data:
                    break
                if not started and not data.strip(b"\x00"):
                    data = b""
                    continue
            try:
                out = d.decompress(data, self.chunk_bytes)
            except (lzma.LZMAError, OSError, EOFError, ValueError) as exc:
                raise self._corrupt(exc) from None
            data, started = b"", True
            if self.on_position:
                self.on_position(self.f.tell())
            if out:
                self.done += len(out)
                yield out
        if started and not d.eof:
            self.truncated_at = self.done


def decompressed(f: BinaryIO, path: str, kind: str, chunk_bytes: int, on_position: Callable[[int], None] | None) -> Any:
    """The decompressed chunks of the open file ``f`` of compression ``kind`` (``Inflate`` or ``Unpack``): iterate,
    then ``truncated_at`` says whether the stream ended early."""
    if kind == "gzip":
        return Inflate(f, path, chunk_bytes, on_position)
    return Unpack(f, path, kind, chunk_bytes, on_position)


class Inflate:
    """A gzip file's decompressed bytes (every member; zero padding after the last is skipped), in chunks of at most
    ``chunk_bytes`` (so a bomb, GiB of one byte, never sits in memory). Corrupt compressed data raises
    ``TraceFormatError``; a stream that ends early is not an error here: after the last chunk, ``truncated_at``
    holds the decompressed bytes there were (else None)."""

    def __init__(self, f: BinaryIO, path: str, chunk_bytes: int, on_position: Callable[[int], None] | None) -> None:
        self.f, self.path, self.chunk_bytes, self.on_position = f, path, chunk_bytes, on_position
        self.truncated_at: int | None = None

    def __iter__(self) -> Iterator[bytes]:
        f = self.f
        inflater = zlib.decompressobj(wbits=31)
        member_open = False
        done = 0
        data = b""  # compressed bytes the inflater has not taken yet
        while True:
            if not data:
                data = f.read(4 << 20)
                if not data:
                    break
            if not member_open and not data.strip(b"\x00"):
                data = b""
                continue  # zero padding after the last member
            member_open = True
            before = inflater.copy()  # (to say where the data goes bad, should it)
            try:
                out = inflater.decompress(data, self.chunk_bytes)
            except zlib.error as exc:
                where = f"decompressed byte {done + _good_bytes(before, data)}"
                raise TraceFormatError(self.path, where, f"corrupt gzip data ({exc})") from None
            data = inflater.unconsumed_tail
            if inflater.eof:
                data = inflater.unused_data
                inflater = zlib.decompressobj(wbits=31)
                member_open = False
            if self.on_position:
                self.on_position(f.tell() - len(data))
            if out:
                done += len(out)
                yield out
        if member_open:
            self.truncated_at = done


def _good_bytes(inflater: zlib._Decompress, data: bytes) -> int:
    """How many bytes ``inflater`` gives of ``data``, fed a kilobyte at a time, before the data goes bad: where the
    damage is, to within the little one kilobyte of compressed data holds."""
    good = 0
    for at in range(0, len(data), 1024):
        try:
            good += len(inflater.decompress(data[at : at + 1024]))
        except zlib.error:
            break
    return good


def _truncated(done: int, kind: str = "gzip") -> str:
    return f"{kind} stream ends early after {done} decompressed bytes"


def read_blocks(
    path: str,
    block_bytes: int,
    on_truncated: Callable[[str], None],
    on_position: Callable[[int], None] | None = None,
) -> Iterator[bytes]:
    """Yield the file's bytes in blocks, decompressing gzip (also multi-member) when its magic says so.

    A gzip stream that ends early is reported through ``on_truncated`` after every byte that could be
    decompressed has been yielded; corrupt compressed data raises ``TraceFormatError``.
    """
    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            f.seek(0)
            while block := f.read(block_bytes):
                if on_position:
                    on_position(f.tell())
                yield block
            return
        f.seek(0)
        stream = Inflate(f, path, block_bytes, on_position)
        out = bytearray()
        for chunk in stream:
            if not out and len(chunk) == block_bytes:  # the usual case: a whole block as inflated, not copied
                yield chunk
                continue
            out += chunk
            while len(out) >= block_bytes:
                yield bytes(out[:block_bytes])
                del out[:block_bytes]
        if out:
            yield bytes(out)
        if stream.truncated_at is not None:
            on_truncated(_truncated(stream.truncated_at))


def gunzip_to(
    path: str,
    dest: Path,
    on_truncated: Callable[[str], None],
    on_position: Callable[[int], None] | None = None,
    kind: str = "gzip",
) -> None:
    """Decompress the gzip file ``path`` (also multi-member; or a ``kind`` of ``compression``'s) into the file
    ``dest``, as ``read_blocks`` would read it (the same errors, and ``on_truncated`` where the stream ends early).
    The decompressing runs on this thread and the writing on another (both release the GIL): on two cores they
    overlap, and the file is written as fast as the slower of the two, not their sum. At most a few blocks wait
    between them."""
    chunks: queue.Queue[bytes | None] = queue.Queue(maxsize=2)
    failed: list[BaseException] = []

    def write() -> None:
        with open(dest, "wb") as out:
            while (chunk := chunks.get()) is not None:
                if not failed:
                    try:
                        out.write(chunk)
                    except BaseException as exc:  # raised below, on the caller's thread
                        failed.append(exc)

    writer = threading.Thread(target=write, name="lltrace-gunzip-write", daemon=True)
    writer.start()
    with open(path, "rb") as f:
        stream = decompressed(f, path, kind, BLOCK_BYTES, on_position)
        try:
            for chunk in stream:
                if failed:
                    break
                chunks.put(chunk)
        finally:
            chunks.put(None)
            writer.join()
    if failed:
        raise failed[0]
    if stream.truncated_at is not None:
        on_truncated(_truncated(stream.truncated_at, kind))


def read_head(path: str | Path, size: int = SNIFF_BYTES) -> bytes:
    """The first ``size`` bytes of a file, decompressed when it is gzip, zstd, xz or bzip2 (best effort for
    truncated files; for damaged ones, the bytes before the damage: its reader says where it is)."""
    with open(path, "rb") as f:
        raw = f.read(size)
        kind = compression_of(raw)
        if kind not in (None, "gzip"):
            f.seek(0)
            out = b""
            try:
                for chunk in decompressed(f, str(path), kind, size, None):
                    out += chunk
                    if len(out) >= size:
                        break
            except TraceFormatError:
                if not out:
                    raise
            return out[:size]
        if raw[:2] != b"\x1f\x8b":
            return raw
        inflater = zlib.decompressobj(wbits=31)
        out = b""
        while len(out) < size and raw:
            piece, raw = raw[:1024], raw[1024:]  # a kilobyte at a time: what comes before damage is kept
            try:
                out += inflater.decompress(inflater.unconsumed_tail + piece, size - len(out))
            except zlib.error as exc:
                if out:
                    return out
                raise TraceFormatError(str(path), "decompressed byte 0", f"corrupt gzip data ({exc})") from None
            raw = raw or f.read(size)
        return out


_CHECKED_BYTES = 256 << 20  # the largest compressed file of no format decompressed to its end to look for damage


def check_stream(path: str | Path, head: bytes) -> None:
    """A zstd, xz or bzip2 file whose head fits no format, decompressed to its end: damage in it (which these
    compressors may find only at a block's or frame's end, after giving garbage for its bytes) is said as damage,
    not as an unknown format. Not for gzip (deflate fails where its data does), a tar archive, or a file over
    ``_CHECKED_BYTES``."""
    if head[257:262] == b"ustar" or Path(path).stat().st_size > _CHECKED_BYTES:
        return
    with open(path, "rb") as f:
        kind = compression_of(f.read(6))
        if kind not in (None, "gzip"):
            f.seek(0)
            for _ in decompressed(f, str(path), kind, 4 << 20, None):
                pass

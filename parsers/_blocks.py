"""A file's bytes in blocks, gunzipped where its magic says gzip (also multi-member, zero padding after the
last member), never more than a block or two in memory; and a gzipped file decompressed into another file with
the inflating and the writing on two threads."""

from __future__ import annotations

import queue
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from lltrace.errors import TraceFormatError

BLOCK_BYTES = 16 << 20


def is_gzip(path: str | Path) -> bool:
    """Whether the file starts with gzip's magic bytes."""
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


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


def _truncated(done: int) -> str:
    return f"gzip stream ends early after {done} decompressed bytes"


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
) -> None:
    """Decompress the gzip file ``path`` (also multi-member) into the file ``dest``, as ``read_blocks`` would read it
    (the same errors, and ``on_truncated`` where the stream ends early). The inflating runs on this thread and the
    writing on another (both release the GIL): on two cores they overlap, and the file is written as fast as the
    slower of the two, not their sum. At most a few blocks wait between them."""
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
        stream = Inflate(f, path, BLOCK_BYTES, on_position)
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
        on_truncated(_truncated(stream.truncated_at))

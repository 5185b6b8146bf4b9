"""Parsers: sniff a file's first bytes, then stream it into the canonical tables (``lltrace.tables``).

One module per source family; each format it reads has one ``Format`` entry (``lltrace.parsers.format``) in
``engine_formats`` or ``client_formats``: its name, what it can attribute, the sniff and ingest functions, the
marker words that say a file was meant to be it, and any post-ingest step (the profiler's step detection).
Detection never trusts the file name alone.
"""

from __future__ import annotations

from pathlib import Path

from lltrace.errors import UnknownFormat
from lltrace.parsers._blocks import check_stream, read_head
from lltrace.parsers.client_formats import CLIENT_FORMATS
from lltrace.parsers.engine_formats import ENGINE_FORMATS
from lltrace.parsers.format import Format

__all__ = ["FORMATS", "Format", "by_name", "closest_formats", "detect", "read_head", "utf16_format"]

FORMATS: tuple[Format, ...] = ENGINE_FORMATS + CLIENT_FORMATS
"""Every format lltrace reads: the engines' first, then the clients' and workload sources'."""


def closest_formats(head: bytes, n: int = 3) -> list[str]:
    """Formats whose marker words the head shares most, for an error message (best first)."""
    scores = []
    for fmt in FORMATS:
        hits = sum(m in head for m in fmt.markers)
        if hits:
            scores.append((hits / len(fmt.markers), fmt.name))
    return [name for _, name in sorted(scores, reverse=True)[:n]]


def detect(path: str | Path) -> Format | None:
    """The format of a file judged from its first bytes, or None.

    Raises ``UnknownFormat`` when the head fits more than one format (ambiguous).
    """
    head = read_head(path)
    head = head[3:] if head.startswith(b"\xef\xbb\xbf") else head  # a byte-order mark: accepted everywhere
    hits = [fmt for fmt in FORMATS if fmt.sniff(head)]
    if len(hits) > 1:
        raise UnknownFormat(f"{path}: ambiguous: the file looks like {', '.join(f.name for f in hits)}")
    if not hits:
        check_stream(path, head)
    return hits[0] if hits else None


def utf16_format(head: bytes) -> Format | None:
    """The format a UTF-16 text would have in UTF-8 (PowerShell 5's ``>`` and Windows editors write UTF-16):
    judged from the head with a UTF-16 byte-order mark, or with NULs at every other byte of a text, else None."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        codec = "utf-16"
    elif len(head) >= 16 and head[1:32:2].count(0) == len(head[1:32:2]) and head[0:32:2].count(0) == 0:
        codec = "utf-16-le"
    elif len(head) >= 16 and head[0:32:2].count(0) == len(head[0:32:2]) and head[1:32:2].count(0) == 0:
        codec = "utf-16-be"
    else:
        return None
    text = head[: len(head) - len(head) % 2].decode(codec, errors="ignore").encode()
    hits = [fmt for fmt in FORMATS if fmt.sniff(text)]
    return hits[0] if len(hits) == 1 else None


def by_name(name: str) -> Format:
    """Look a format up by name."""
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise KeyError(name)

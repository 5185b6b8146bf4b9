"""Where in a file a damaged value sits, for the one-line error: the line of a literal, the byte where JSON
nesting passes a depth. Read only when an ingest has already failed, streamed (gzip too), never whole."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from lltrace.errors import TraceFormatError
from lltrace.parsers._blocks import read_blocks

_BLOCK = 1 << 20
_NL = b"\n"


def _blocks(path: Path) -> Iterator[bytes]:
    """The file's bytes, gunzipped where it is gzip (the profiler reader's own streaming)."""
    try:
        yield from read_blocks(str(path), _BLOCK, lambda _why: None)
    except TraceFormatError:  # a corrupt gzip stream: what was read is what there is
        return


def locate(path: Path, needle: bytes) -> str | None:
    """``line N`` of the first occurrence of ``needle`` (the file decompressed), else None."""
    line, carry = 1, b""
    for block in _blocks(path):
        data = carry + block
        at = data.find(needle)
        if at >= 0:
            return f"line {line + data.count(_NL, 0, at)}"
        keep = max(0, len(data) - len(needle) + 1)
        line += data.count(b"\n", 0, keep)
        carry = data[keep:]
    return None


def locate_depth(path: Path, depth: int) -> str | None:
    """``byte N`` (``line L``) where JSON brackets first nest deeper than ``depth`` outside strings, else None."""
    level, in_str, escaped, offset, line = 0, False, False, 0, 1
    for block in _blocks(path):
        for i, ch in enumerate(block):
            if in_str:
                if escaped:
                    escaped = False
                elif ch == 0x5C:  # backslash
                    escaped = True
                elif ch == 0x22:
                    in_str = False
            elif ch == 0x22:
                in_str = True
            elif ch in (0x5B, 0x7B):
                level += 1
                if level > depth:
                    return f"byte {offset + i} (line {line + block.count(_NL, 0, i)})"
            elif ch in (0x5D, 0x7D):
                level -= 1
        line += block.count(b"\n")
        offset += len(block)
    return None

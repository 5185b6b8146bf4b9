"""Line-oriented sources (JSON lines, logs) cut off mid-line: find the partial last line, read the rest."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from lltrace.errors import TraceFormatError

_TAIL = 1 << 20


def _is_json(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def partial_last_line(path: str, valid: Callable[[bytes], bool] = _is_json) -> tuple[int, int] | None:
    """``(line number, bytes)`` of a last line cut off by a truncated write, else None.

    A file cut mid-line does not end with a newline, and its last line does not parse (``valid``). Any
    other damage is left for the reader to report.
    """
    size = os.path.getsize(path)
    if size == 0:
        return None
    with open(path, "rb") as f:
        f.seek(max(0, size - _TAIL))
        tail = f.read()
        if tail.endswith(b"\n"):
            return None
        cut = tail.rfind(b"\n")
        if cut < 0 and size > _TAIL:
            return None  # one line over a megabyte: not a cut-off line of a line-oriented file
        last = tail[cut + 1 :]
        if not last.strip() or valid(last):
            return None
        f.seek(0)
        lines = sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 24), b""))
    return lines + 1, len(last)


def truncation_note(path: str, line: int, size: int) -> str:
    """The warning for a partial last line that was dropped."""
    return f"{path}: truncated: the file ends inside line {line}; kept the lines before it, dropped {size} bytes"


def without_cut_record(path: str, text: str, info: Any) -> str:
    """``text`` without a last line that has no line end, with the warning in ``info`` (a ``SourceInfo``).
    For logs: a logger ends every record with a line end, so a last line without one was cut by a truncated
    write or copy, and what it would have said is unknown."""
    if not text or text.endswith("\n"):
        return text
    start = text.rfind("\n") + 1
    line = text.count("\n") + 1
    info.truncated = f"partial line {line}"
    info.warnings.append(truncation_note(path, line, len(text[start:].encode())))
    return text[:start]


def without_last_line(path: str, size: int, folder: Path) -> str:
    """A copy of ``path`` without its last ``size`` bytes, in ``folder`` (for readers that take a file name)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"trimmed-{Path(path).name}"
    keep = os.path.getsize(path) - size
    with open(path, "rb") as src, open(out, "wb") as dst:
        while keep > 0:
            block = src.read(min(keep, 1 << 24))
            if not block:
                break
            dst.write(block)
            keep -= len(block)
    return str(out)


def read_text(path: str) -> str:
    """The file as UTF-8 text, without a leading byte-order mark (accepted in every format, as CSV readers
    do); invalid UTF-8 is the one-line error naming its byte offset."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, f"byte {exc.start}", "invalid UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


class DuplicateKey(ValueError):
    """An object names a key twice: which value the tool meant is unknown (one policy for every reader: the
    profiler reader rejects them too)."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"key {key!r} appears twice in one object")


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for ``json.loads``: a dict, or ``DuplicateKey`` when a key repeats."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        raise DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return out


def duplicate_at(text: str, key: str) -> str:
    """``line N`` of the repeat where ``key`` is named exactly twice in the text, else ``key 'k'`` (which of
    many objects repeats it is not worth a second parse)."""
    starts = [m.start() for m in re.finditer(re.escape(f'"{key}"') + r"\s*:", text)]
    if len(starts) != 2:
        return f"key {key!r}"
    return f"line {text.count(chr(10), 0, starts[1]) + 1}"


def json_lines(path: str, info: Any = None, what: str = "JSON line", text: str | None = None) -> list[Any]:
    """The JSON value of every non-empty line. With ``info`` (a ``SourceInfo``), a last line cut off by a
    truncated write is dropped with a warning, and so is a damaged line in the middle (only that line lost,
    counted; ``info.truncated`` set, so ``--strict`` rejects the file), unless most lines are bad (then it
    is not this format: the one-line error). Without ``info``, or for a key named twice, a bad line is the
    one-line error naming it. ``text``: the file's text when the caller has read it already."""
    lines = (read_text(path) if text is None else text).splitlines()
    if info is not None and (cut := partial_last_line(path)) is not None:
        lines = lines[:-1]
        info.truncated = f"partial line {cut[0]}"
        info.warnings.append(truncation_note(path, *cut))
    out = []
    bad: list[tuple[int, str]] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line, object_pairs_hook=unique_keys))
        except json.JSONDecodeError as exc:
            if info is None:
                raise TraceFormatError(path, f"line {n}", f"invalid {what} ({exc.msg})") from None
            bad.append((n, exc.msg))
        except DuplicateKey as exc:
            raise TraceFormatError(path, f"line {n}", f"invalid {what} ({exc})") from None
    if bad and len(bad) >= len(out):
        n, msg = bad[0]
        raise TraceFormatError(path, f"line {n}", f"invalid {what} ({msg})")
    if bad:
        info.dropped["damaged_lines"] = len(bad)
        info.truncated = info.truncated or f"damaged line {bad[0][0]}"
        info.warnings.append(
            f"{path}: line {bad[0][0]}: {len(bad)} damaged line(s) in the middle of the file ({bad[0][1]}): "
            "dropped, the rest read"
        )
    return out

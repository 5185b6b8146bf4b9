"""A compressed file of any format (gzip, zstd, xz, bzip2) read as its plain text is.

Logs, result files, scrapes and request records are compressed as often as profiler traces are (log rotation, an
artifact store, a bug report's attachment). Formats are told by their decompressed first bytes
(``parsers.read_head``), so a file's format never depends on its compression; the profiler trace reader streams
gzip itself, and every other reader (and the profiler trace reader, for the other compressions) is given the file
decompressed into the run's staging folder under the name it has without its compression's ending
(``server.log.gz`` or ``server.log.zst`` is read as ``server.log``: readers that name a client after its file name
it the same). What the reader says of that copy is said of the file the user gave: its path in
the source record, the warnings and the errors, and a byte offset there as a decompressed one (a line number is
the same in both). A stream that ends early is read as far as it goes, with a warning, as any cut file is.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError, said_of
from lltrace.parsers._blocks import compression, gunzip_to, without_suffix
from lltrace.source_info import SourceInfo


@contextmanager
def plain(
    path: Path, stage: Path, part: int, reads_gzip: bool, progress: Callable[[int], None] | None
) -> Iterator[tuple[Path, list[str]]]:
    """The file a reader is given for ``path`` (itself, unless it is gzip and the reader does not read gzip) and
    the warnings of its decompression (a stream that ends early). The copy is removed afterwards; an error a
    reader raises about the copy is raised about ``path``."""
    kind = compression(path)
    if kind is None or (reads_gzip and kind == "gzip"):
        yield path, []
        return
    folder = stage / f"_inflated_{part}"
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / without_suffix(path.name)
    cut: list[str] = []
    try:
        gunzip_to(str(path), copy, cut.append, progress, kind)
        try:
            yield copy, [f"{path}: {why}: read as far as it goes" for why in cut]
        except TraceFormatError as exc:
            raise type(exc)(str(path), _decompressed(exc.where), _said_of(exc.message, copy, path)) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def said_of_original(info: SourceInfo, copy: Path, path: Path) -> None:
    """``info`` as the reader of ``copy`` wrote it, said of ``path``: its path, and the copy's path wherever a
    warning or a detail names it."""
    if copy == path:
        return
    info.path = str(path)
    info.warnings = [_said_of(w, copy, path) for w in info.warnings]
    info.details = _said_of(info.details, copy, path)


def _decompressed(where: str) -> str:
    return f"decompressed {where}" if where.startswith("byte ") else where


def _said_of(value: Any, copy: Path, path: Path) -> Any:
    return said_of(value, [(f"{copy}: byte ", f"{path}: decompressed byte "), (str(copy), str(path))])

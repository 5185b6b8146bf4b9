"""Which files make a run: folders walked, each file's format sniffed, files of no known format listed as
skipped (with the closest formats), and the run's default name."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path

from lltrace.documents.vocabulary import SkipReason
from lltrace.errors import TraceFormatError, UnknownFormat
from lltrace.ingest.archives import archive_kind
from lltrace.parsers import FORMATS, Format, closest_formats, detect, read_head, utf16_format
from lltrace.parsers.beside import nothing_more
from lltrace.store import Skipped


def expand_inputs(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[tuple[Path, Format]], list[Skipped]]:
    """Resolve files and folders into (file, format) pairs; unknown files in folders are skipped."""
    found: list[tuple[Path, Format]] = []
    skipped: list[Skipped] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for f in sorted(x for x in p.rglob("*") if not x.is_dir()):
                if why := cannot_read(f):
                    skipped.append(Skipped(str(f), why, SkipReason.UNREADABLE))
                    continue
                if f.stat().st_size == 0:
                    skipped.append(Skipped(str(f), "empty file", SkipReason.EMPTY))
                    continue
                try:
                    fmt = detect(f)
                except OSError as exc:
                    skipped.append(
                        Skipped(str(f), f"cannot read ({exc.strerror or type(exc).__name__})", SkipReason.UNREADABLE)
                    )
                    continue
                except TraceFormatError as exc:
                    skipped.append(Skipped(str(f), exc.message, SkipReason.DAMAGED))
                    continue
                except UnknownFormat as exc:
                    skipped.append(Skipped(str(f), str(exc).split(": ", 1)[1], SkipReason.AMBIGUOUS))
                    continue
                if fmt is None and (kind := archive_kind(f)):
                    why = f"an archive ({kind}) inside the folder: give it as a path of its own to read what it holds"
                    skipped.append(Skipped(str(f), why, SkipReason.ARCHIVE))
                elif fmt is None and (wide := utf16_format(read_head(f))):
                    skipped.append(Skipped(str(f), _utf16_why(f, wide.name), SkipReason.WIDE_TEXT))
                elif fmt is None and (what := nothing_more(read_head(f))):
                    skipped.append(Skipped(str(f), what, SkipReason.BESIDE))
                elif fmt is None:
                    near = closest_formats(read_head(f))
                    named = looks_like(f)
                    why = "no known format" + (f" (closest: {', '.join(near)})" if near else "")
                    if named and not near:
                        why += f" (named like a {named})"
                    skipped.append(Skipped(str(f), why, SkipReason.NEAR if near or named else SkipReason.UNKNOWN))
                else:
                    found.append((f, fmt))
        elif p.is_file() or p.is_symlink() or p.exists():
            if why := cannot_read(p):
                raise TraceFormatError(str(p), "byte 0", why)
            try:
                fmt = detect(p) if p.stat().st_size else None
            except OSError as exc:
                why = f"cannot read ({exc.strerror or type(exc).__name__})"
                raise TraceFormatError(str(p), "byte 0", why) from None
            if fmt is None:
                if p.stat().st_size == 0:
                    raise TraceFormatError(str(p), "byte 0", "empty file: no JSON document")
                if wide := utf16_format(read_head(p)):
                    raise TraceFormatError(str(p), "byte 0", _utf16_why(p, wide.name))
                if what := nothing_more(read_head(p)):
                    raise UnknownFormat(f"{p}: not read: {what}")
                near = closest_formats(read_head(p))
                hint = f"closest: {', '.join(near)}" if near else f"known: {', '.join(f.name for f in FORMATS)}"
                raise UnknownFormat(f"{p}: not a format lltrace reads ({hint}; see `lltrace formats`)")
            found.append((p, fmt))
        else:
            raise UnknownFormat(f"{p}: no such file or folder")
    if not found:
        where = ", ".join(str(p) for p in paths)
        raise UnknownFormat(f"{where}: no file of a known format found (see `lltrace formats`)")
    return found, skipped


# file names the tools write: a file so named that does not sniff is likely a damaged part of the run
_NAMED = (
    (re.compile(r"\.pt\.trace\.json(\.gz|\.zst|\.xz|\.bz2)?$|trace.*\.json\.(gz|zst|xz|bz2)$"), "profiler trace"),
    (re.compile(r"\.otlp\.jsonl?$|traces?\.jsonl?$"), "span export"),
    (re.compile(r"\.prom$|metrics.*\.txt$"), "Prometheus scrape"),
    (re.compile(r"server.*\.log$|vllm.*\.log$|sglang.*\.log$"), "server log"),
    (re.compile(r"profile_export.*\.jsonl$|\.benchmarks\.json$"), "benchmark export"),
)


def looks_like(p: Path) -> str | None:
    """What the file's name says it is (a profiler trace, a span export, ...), else None."""
    return next((what for pattern, what in _NAMED if pattern.search(p.name)), None)


def cannot_read(p: Path) -> str | None:
    """Why a path that is named (or found in a folder) cannot be read as a file, else None: a dangling link or a
    link loop, a FIFO, a socket or a device (reading one would block or never end), no permission."""
    try:
        mode = p.stat().st_mode
    except OSError as exc:
        if p.is_symlink():
            return "cannot read: a symbolic link that leads nowhere (dangling, or a loop)"
        return f"cannot read ({exc.strerror or type(exc).__name__})"
    if not stat.S_ISREG(mode):
        return "cannot read: not a regular file (a FIFO, a socket or a device)"
    if not os.access(p, os.R_OK):
        return "cannot read (permission denied)"
    return None


def default_run_id(files: list[Path], digest: str, folder: Path | None = None) -> str:
    """``<name>-<digest>``: the name of the one folder given, else of the one file, else of its folder."""
    first = files[0]
    stem = folder.name if folder is not None else first.name if len(files) == 1 else (first.parent.name or first.name)
    stem = re.sub(r"(\.pt\.trace)?\.json(\.gz|\.zst|\.zstd|\.xz|\.bz2)?$|\.(gz|zst|zstd|xz|bz2)$", "", stem)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._")[:80] or "run"
    return f"{stem}-{digest[:8]}"


def _utf16_why(path: Path, fmt: str) -> str:
    """Why a UTF-16 file of a known format is not read, and the one command that makes it readable."""
    utf8 = path.with_name(f"{path.stem}.utf8{path.suffix}").name
    return (
        f"UTF-16 text (a {fmt} file by its content): lltrace reads UTF-8; iconv -f UTF-16 -t UTF-8 {path.name} > {utf8}"
    )

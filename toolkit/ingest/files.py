"""Which files make a run: folders walked, each file's format sniffed, files of no known format listed as
skipped (with the closest formats), and the run's default name."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from lltrace.errors import TraceFormatError, UnknownFormat
from lltrace.parsers import FORMATS, Format, closest_formats, detect, read_head
from lltrace.store import Skipped


def expand_inputs(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[tuple[Path, Format]], list[Skipped]]:
    """Resolve files and folders into (file, format) pairs; unknown files in folders are skipped."""
    found: list[tuple[Path, Format]] = []
    skipped: list[Skipped] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for f in sorted(x for x in p.rglob("*") if x.is_file()):
                if f.stat().st_size == 0:
                    skipped.append(Skipped(str(f), "empty file"))
                    continue
                try:
                    fmt = detect(f)
                except TraceFormatError as exc:
                    skipped.append(Skipped(str(f), exc.message))
                    continue
                except UnknownFormat as exc:
                    skipped.append(Skipped(str(f), str(exc).split(": ", 1)[1]))
                    continue
                if fmt is None:
                    near = closest_formats(read_head(f))
                    skipped.append(
                        Skipped(str(f), "no known format" + (f" (closest: {', '.join(near)})" if near else ""))
                    )
                else:
                    found.append((f, fmt))
        elif p.is_file():
            fmt = detect(p) if p.stat().st_size else None
            if fmt is None:
                if p.stat().st_size == 0:
                    raise TraceFormatError(str(p), "byte 0", "empty file: no JSON document")
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


def default_run_id(files: list[Path], digest: str, folder: Path | None = None) -> str:
    """``<name>-<digest>``: the name of the one folder given, else of the one file, else of its folder."""
    first = files[0]
    stem = folder.name if folder is not None else first.name if len(files) == 1 else (first.parent.name or first.name)
    stem = re.sub(r"(\.pt\.trace)?\.json(\.gz)?$|\.gz$", "", stem)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._")[:80] or "run"
    return f"{stem}-{digest[:8]}"

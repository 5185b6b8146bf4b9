"""An archive given as a run (a CI job's artifacts ``.zip``, an incident bundle ``.tar.gz``) read as the folder it
holds.

A zip file, or a tar file plain or compressed (gzip, zstd, xz, bzip2), named as one of a run's paths is unpacked
into a scratch folder named as the archive is without its endings (``bench-results.zip`` -> ``bench-results/``: the
run is named after it as after a folder), read as that folder, and removed after. What the readers say of the
unpacked files is said of the archive: a file in it is named ``<archive>/<member>`` in the sources, the skipped
files, the warnings and the errors. Members that would land outside the folder (an absolute name, ``..``), links
and devices are not unpacked, and said so; an archive that would unpack to more than the free space is refused
before a byte is written. An archive inside a folder (or inside the archive) is listed as skipped with how to read
it: as a path of its own.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
import warnings
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lltrace.errors import InputWarning, TraceFormatError, UnknownFormat, said_of
from lltrace.parsers import read_head
from lltrace.parsers._blocks import compression, gunzip_to, without_suffix

_TAR_MAGIC_AT = 257  # POSIX ustar and GNU tar headers: "ustar" at byte 257 of the first header


def archive_kind(path: Path) -> str | None:
    """``zip`` or ``tar`` (the tar plain or compressed), from the file's first (decompressed) bytes, else None."""
    with open(path, "rb") as f:
        first = f.read(4)
    if first in (b"PK\x03\x04", b"PK\x05\x06"):  # a member's local header; an empty archive's end record
        return "zip"
    try:
        head = read_head(path, 512)
    except TraceFormatError:
        return None
    return "tar" if head[_TAR_MAGIC_AT : _TAR_MAGIC_AT + 5] == b"ustar" else None


def _folder_name(path: Path) -> str:
    name = without_suffix(path.name)
    for ending in (".zip", ".tar", ".tgz", ".tbz2", ".txz"):
        if name.lower().endswith(ending):
            return name[: -len(ending)] or "archive"
    return name or "archive"


def _safe(name: str) -> bool:
    """Whether a member's name stays inside the folder it is unpacked into."""
    parts = Path(name).parts
    return bool(parts) and not Path(name).is_absolute() and ".." not in parts and not name.startswith(("/", "\\"))


def _room(path: Path, into: Path, unpacked: int) -> None:
    free = shutil.disk_usage(into).free
    if unpacked > free:
        why = f"the archive unpacks to {unpacked / 1e9:,.1f} GB, more than the {free / 1e9:,.1f} GB free at {into}"
        raise TraceFormatError(str(path), "byte 0", why)


def _unzip(path: Path, into: Path) -> list[str]:
    left_out = []
    try:
        with zipfile.ZipFile(path) as z:
            members = z.infolist()
            _room(path, into.parent, sum(m.file_size for m in members))
            for m in members:
                if m.is_dir():
                    continue
                if not _safe(m.filename):
                    left_out.append(m.filename)
                    continue
                z.extract(m, into)
    except zipfile.BadZipFile as exc:
        raise TraceFormatError(str(path), "byte 0", f"not a readable zip archive ({exc})") from None
    return left_out


def _untar(path: Path, into: Path) -> list[str]:
    kind = compression(path)
    plain = path
    if kind == "zstd":  # tarfile reads gzip, bzip2 and xz itself, not zstd
        plain = into.parent / "_archive.tar"
        cut: list[str] = []
        gunzip_to(str(path), plain, cut.append, None, "zstd")
        if cut:
            raise TraceFormatError(str(path), "end of file", f"{cut[0]}: the archive is cut short")
    left_out = []
    try:
        with tarfile.open(plain, "r:*") as t:
            members = t.getmembers()
            _room(path, into.parent, sum(m.size for m in members if m.isfile()))
            for m in members:
                if m.isdir():
                    continue
                if not m.isfile() or not _safe(m.name):  # links, devices, names outside the folder
                    left_out.append(m.name)
                    continue
                if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: the standard library's own check too
                    t.extract(m, into, filter="data")
                else:
                    t.extract(m, into)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise TraceFormatError(str(path), "byte 0", f"not a readable tar archive ({exc})") from None
    finally:
        if plain != path:
            plain.unlink(missing_ok=True)
    return left_out


@contextmanager
def unpacked(paths: Sequence[str | os.PathLike[str]]) -> Iterator[tuple[list[str], Callable[[Any], Any]]]:
    """The run's paths with each archive among them replaced by the folder it unpacks to, and ``shown``: what is
    said of a path in those folders said of the archive (text, or dicts and lists of it). Removed afterwards."""
    archives = [(p, kind) for p in map(Path, paths) if p.is_file() and (kind := archive_kind(p))]
    if not archives:
        yield [str(p) for p in paths], lambda x: x
        return
    scratch = Path(tempfile.mkdtemp(prefix="lltrace-archive-"))
    given: dict[str, str] = {}
    out = []
    try:
        by_path = dict(archives)
        for i, raw in enumerate(paths):
            p = Path(raw)
            if p not in by_path:
                out.append(str(p))
                continue
            into = scratch / str(i) / _folder_name(p)
            into.mkdir(parents=True)
            left_out = _unzip(p, into) if by_path[p] == "zip" else _untar(p, into)
            if left_out:
                warnings.warn(
                    f"{p}: {len(left_out)} member(s) not unpacked (a link, a device, or a name outside the archive's "
                    f"folder), e.g. {left_out[0]!r}",
                    InputWarning,
                    stacklevel=3,
                )
            if not any(x.is_file() for x in into.rglob("*")):
                raise UnknownFormat(f"{p}: the archive holds no file")
            given[str(into)] = str(p)
            out.append(str(into))

        yield out, lambda x: said_of(x, list(given.items()))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

"""A file format lltrace reads: the record each parser module registers (``engine_formats``, ``client_formats``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lltrace.source_info import SourceInfo


@dataclass(frozen=True)
class Format:
    """A file format lltrace reads."""

    name: str
    family: str
    description: str
    tables: tuple[str, ...]
    attributes: str
    sniff: Callable[[bytes], bool]
    ingest: Callable[..., SourceInfo]  # (path, stage, part, *, keep_python, progress) -> SourceInfo
    markers: tuple[bytes, ...] = ()  # words that say a file was meant to be this format ("closest formats")
    # the versions / variants read, each with what it was checked on: "real file" (a file the tool wrote in
    # someone's run, in sample_traces) or "fixture from source" (built field by field from the
    # tool's schema and source at that version)
    versions: tuple[str, ...] = ()
    post_ingest: Callable[[Path, int], dict] | None = None  # (stage, part) -> what the metadata records
    saved_by_client: bool = False  # its rows are a client's record of the engine's own figures (the join pairs them)
    reads_gzip: bool = False  # its reader streams a gzipped file itself (else it is given the file decompressed)

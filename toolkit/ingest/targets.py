"""What a command's run argument names: a stored run's id, or the paths (files and folders) of one run.

Every command that takes a run takes what ``analyze`` takes; ``open_run`` turns it into the stored ``Run``,
ingesting the files first when they are not stored yet (a re-ingest of the same files reuses the run).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from lltrace.errors import UnknownFormat
from lltrace.ingest.pipeline import ProgressFn, ingest
from lltrace.store import Run, Store

Target = Run | str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
"""A run: a ``Run``, a stored run's id, one path, or several paths that make one run."""


def as_store(store: Store | str | os.PathLike[str] | None) -> Store:
    """A ``Store`` from a store or its location (default: ``$LLTRACE_STORE`` or ``./.lltrace``)."""
    return store if isinstance(store, Store) else Store(store)


def stored_run(target: Target, store: Store) -> Run | None:
    """The stored run a target names by id (a single argument that is not a path), else None."""
    if isinstance(target, Run):
        return target
    items = [target] if isinstance(target, (str, os.PathLike)) else list(target)
    if len(items) == 1:
        name = str(items[0])
        if not Path(name).exists() and store.has_run(name):
            return Run(name, store)
    return None


def open_run(
    target: Target,
    store: Store | str | os.PathLike[str] | None = None,
    *,
    run: str | None = None,
    keep_python: bool = False,
    strict: bool = False,
    progress: ProgressFn | None = None,
) -> Run:
    """The run a target names: a stored run by id, or the run its paths ingest into (reused when stored).

    A single argument that is neither a path nor a stored run is an ``UnknownFormat`` error naming both.
    """
    st = as_store(store)
    found = stored_run(target, st)
    if found is not None:
        return found
    paths = [target] if isinstance(target, (str, os.PathLike)) else list(target)
    if len(paths) == 1 and not Path(paths[0]).exists():
        known = ", ".join(st.run_ids()[:10]) or "none"
        raise UnknownFormat(
            f"{paths[0]}: no such file or folder, and no stored run of that id in {st.root} (runs: {known})"
        )
    return ingest(paths, store=st, run=run, keep_python=keep_python, strict=strict, progress=progress)

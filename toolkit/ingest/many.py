"""Ingest many runs at once: each file or run folder its own run, in parallel (a local process pool or Ray).

A fleet's week is thousands of profiler traces and request logs. ``ingest_each`` expands folders and globs
into items (a file, or a folder holding one run's files), ingests every item into the same store with
:func:`lltrace.ingest` in worker processes, and returns what was ingested, reused, skipped and why.
Each worker commits its own run atomically, so a failure or a kill leaves the other runs whole.
"""

from __future__ import annotations

import glob
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lltrace.documents.vocabulary import SkipReason
from lltrace.errors import LltraceError, UnknownFormat
from lltrace.ingest.pipeline import ingest
from lltrace.store import Run, Skipped, Store

EXECUTORS = ("local", "ray")

BatchProgress = Callable[[int, int], None]
"""Called as ``progress(bytes_done, bytes_total)`` as items finish."""


@dataclass
class Outcome:
    """One item of a batch: its run id, or the one-line error that stopped it."""

    item: str
    run_id: str | None = None
    reused: bool = False
    error: str | None = None
    skipped: list[Skipped] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class BatchResult:
    """What a batch ingest did, item by item (in the order the items were given)."""

    store: Store
    outcomes: list[Outcome]
    skipped: list[Skipped]

    @property
    def runs(self) -> list[Run]:
        """The runs ingested or reused."""
        return [Run(o.run_id, self.store, o.skipped, o.reused) for o in self.outcomes if o.run_id]

    @property
    def all_skipped(self) -> list[Skipped]:
        """Everything left out: names that matched nothing, files of no known format, files inside run folders."""
        return self.skipped + [s for o in self.outcomes for s in o.skipped]

    @property
    def failed(self) -> list[Outcome]:
        """Items that did not ingest, each with its one-line error."""
        return [o for o in self.outcomes if o.error]


def batch_items(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[Path], list[Skipped]]:
    """The runs a batch names: a file is one run; a folder's entries (files and sub-folders) are one run
    each; a glob (``'traces/*.json.gz'``) is expanded, each match one run. Hidden entries are skipped."""
    items: list[Path] = []
    skipped: list[Skipped] = []
    for raw in paths:
        text = str(raw)
        if not Path(text).exists() and any(c in text for c in "*?["):
            matches = sorted(glob.glob(text, recursive=True))
            if not matches:
                skipped.append(Skipped(text, "the pattern matches nothing", SkipReason.NO_MATCH))
            items.extend(Path(m) for m in matches)
            continue
        p = Path(text)
        if p.is_dir():
            for child in sorted(p.iterdir()):
                if child.name.startswith("."):
                    skipped.append(Skipped(str(child), "hidden", SkipReason.HIDDEN))
                else:
                    items.append(child)
        elif p.exists():
            items.append(p)
        else:
            skipped.append(Skipped(text, "no such file or folder", SkipReason.MISSING))
    return items, skipped


def _size(item: Path) -> int:
    if item.is_dir():
        return sum(f.stat().st_size for f in item.rglob("*") if f.is_file())
    return item.stat().st_size


def ingest_one(item: str, store: str, keep_python: bool, force: bool, strict: bool) -> Outcome:
    """Ingest one item into ``store``: the unit of work a worker runs (a plain function, so it pickles).

    Bad input is an outcome, not an exception: the one-line error is kept and the batch goes on.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            run = ingest([item], store=store, keep_python=keep_python, force=force, strict=strict)
        except UnknownFormat as exc:  # not a trace of any kind (a README beside the traces): skipped
            reason = str(exc).removeprefix(f"{item}: ")
            return Outcome(item, skipped=[Skipped(item, reason)], warnings=[str(w.message) for w in caught])
        except LltraceError as exc:
            return Outcome(item, error=str(exc), warnings=[str(w.message) for w in caught])
        except OSError as exc:
            return Outcome(item, error=f"{item}: {exc.strerror or exc}", warnings=[str(w.message) for w in caught])
        except Exception as exc:  # a bug, not bad input: reported on the item, the batch goes on
            error = f"{item}: internal error ({type(exc).__name__}: {exc}); please report it"
            return Outcome(item, error=error, warnings=[str(w.message) for w in caught])
    return Outcome(item, run.id, run.reused, None, run.skipped, [str(w.message) for w in caught])


def _local(calls: list[tuple[Any, ...]], jobs: int, done: Callable[[int, Outcome], None]) -> None:
    if jobs <= 1 or len(calls) <= 1:
        for k, args in enumerate(calls):
            done(k, ingest_one(*args))
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # spawn: a fresh interpreter per worker, no DuckDB or thread state inherited from this process
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(ingest_one, *args): k for k, args in enumerate(calls)}
        for fut in as_completed(futures):
            done(futures[fut], fut.result())


def _ray(calls: list[tuple[Any, ...]], jobs: int, done: Callable[[int, Outcome], None]) -> None:
    try:
        import ray
    except ImportError:
        raise LltraceError("--executor ray needs Ray: pip install 'lltrace[ray]'") from None
    started = not ray.is_initialized()
    if started:
        import logging

        ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    try:
        task = ray.remote(num_cpus=1)(ingest_one)
        pending = {task.remote(*args): k for k, args in enumerate(calls)}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                done(pending.pop(ref), ray.get(ref))
    finally:
        if started:
            ray.shutdown()


def ingest_each(
    paths: Sequence[str | os.PathLike[str]],
    *,
    store: Store | str | os.PathLike[str] | None = None,
    jobs: int | None = None,
    executor: str = "local",
    keep_python: bool = False,
    force: bool = False,
    strict: bool = False,
    progress: BatchProgress | None = None,
) -> BatchResult:
    """Ingest every item of ``paths`` (see :func:`batch_items`) as its own run, ``jobs`` at a time.

    ``executor`` is ``"local"`` (a process pool on this machine; ``jobs`` defaults to its CPU count) or
    ``"ray"`` (Ray tasks, on the cluster ``ray.init`` connects to, or a local Ray started for the batch).
    Every worker writes the same store layout; the result equals a serial ingest of the same items.
    """
    if executor not in EXECUTORS:
        raise LltraceError(f"unknown executor {executor!r}; known: {', '.join(EXECUTORS)}")
    st = store if isinstance(store, Store) else Store(store)
    items, skipped = batch_items(paths)
    jobs = max(1, jobs or os.cpu_count() or 1)
    sizes = [_size(i) for i in items]
    total = sum(sizes)
    outcomes: list[Outcome | None] = [None] * len(items)
    finished = 0

    def done(k: int, outcome: Outcome) -> None:
        nonlocal finished
        outcomes[k] = outcome
        finished += sizes[k]
        if progress is not None:
            progress(finished, total)

    calls = [(str(i), str(st.root), keep_python, force, strict) for i in items]
    (_ray if executor == "ray" else _local)(calls, jobs, done)
    return BatchResult(st, [o for o in outcomes if o is not None], skipped)

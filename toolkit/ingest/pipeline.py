"""``ingest``: the files of one run into the store, whole or not at all.

Each file is sniffed and read by its format's parser (``lltrace.parsers``), then its format's post-ingest step
runs (the profiler's step detection); the run's files are joined into one ``requests`` table on one clock
(``join``), log times placed (``clocks``) and client TTFTs split where no engine measured them
(``estimates``) and the engine's settings resolved (``engine``). The run metadata, written last, commits
the run.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb

from lltrace.arrow_rows import IntegerOverflow
from lltrace.errors import InputWarning, TraceFormatError, TruncatedInput, UnexpectedContent, UnknownFormat
from lltrace.ingest import counters, engine
from lltrace.ingest.archives import unpacked
from lltrace.ingest.checks import check_stage, warnings_for
from lltrace.ingest.clocks import outside_window, place_log_times
from lltrace.ingest.estimates import SERVER_SPLIT, estimate_server_prefill, estimate_ttft_split
from lltrace.ingest.files import default_run_id, expand_inputs
from lltrace.ingest.gzipped import plain, said_of_original
from lltrace.ingest.join import PROVENANCE, assemble_requests
from lltrace.ingest.locate import locate, locate_depth
from lltrace.ingest.log_requests import add_log_requests
from lltrace.ingest.repeats import drop_repeated_results
from lltrace.parsers.kineto import NAME as KINETO
from lltrace.store import Run, Skipped, Store, check_run_id
from lltrace.version import __version__

ProgressFn = Callable[[str, int, int], None]
"""Called as ``progress(path, bytes_done, bytes_total)`` while a file is read."""


# Timings a reader records in its source's details (parsers/kineto.py): moved to the run's ``source_seconds``.
_SOURCE_TIMINGS = ("reader_seconds", "tables_seconds")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    buf = bytearray(1 << 20)  # one buffer, read into again and again: no fresh megabyte (zeroed pages) per read
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def _digest(hashes: list[str], keep_python: bool) -> str:
    return hashlib.sha256(json.dumps([hashes, {"keep_python": keep_python}], sort_keys=True).encode()).hexdigest()


class _Hashing:
    """The files' sha256, computed on a thread of its own (hashlib releases the GIL)."""

    def __init__(self, files: list[Path]) -> None:
        self._hashes: list[str] = []
        self.seconds: list[float] = []  # each file's hashing, on the hash's thread (wall, beside the reading)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(files,), name="lltrace-sha256", daemon=True)
        self._thread.start()

    def _run(self, files: list[Path]) -> None:
        if sys.platform.startswith("linux"):  # there a thread id names the thread alone (elsewhere, a process)
            try:  # the readers come first: the hash takes the cores they leave idle
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
            except OSError:
                pass
        try:
            for f in files:
                clock = time.perf_counter()
                self._hashes.append(_sha256(f))
                self.seconds.append(round(time.perf_counter() - clock, 3))
        except BaseException as exc:  # raised in the caller by result()
            self._error = exc

    def result(self) -> list[str]:
        """The hashes, in file order (waits for them)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._hashes


def _may_be_stored(st: Store, run: str | None, files: list[Path], folder: Path | None) -> bool:
    """Whether the store holds a run these files could be a re-ingest of (by name; the hashes decide)."""
    if run:
        return st.has_run(run)
    prefix = default_run_id(files, "", folder)  # "<name>-"
    return any(r.startswith(prefix) for r in st.run_ids())


def ingest(
    paths: Sequence[str | os.PathLike[str]],
    *,
    store: Store | str | os.PathLike[str] | None = None,
    run: str | None = None,
    keep_python: bool = False,
    force: bool = False,
    strict: bool = False,
    progress: ProgressFn | None = None,
) -> Run:
    """Sniff and ingest the files of one run into the store; returns the committed ``Run``.

    Re-ingesting the same files (same content hashes and options) reuses the stored run unless
    ``force``. A truncated file is read as far as it is valid with a ``TruncatedInput`` warning, or,
    with ``strict``, rejected. An archive (zip, tar) among the paths is read as the folder it holds
    (``archives``). Raises ``UnknownFormat``, ``TraceFormatError`` or ``StoreError``; nothing is left in
    the store when it raises.
    """
    options: dict[str, Any] = {"run": run, "keep_python": keep_python, "force": force, "strict": strict}
    with unpacked(paths) as (given, shown):
        if given == [str(p) for p in paths]:
            return _ingest(paths, store, progress=progress, **options)
        said = (lambda p, done, total: progress(shown(p), done, total)) if progress else None
        caught: list[warnings.WarningMessage] = []
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                return _ingest(given, store, progress=said, shown=shown, **options)
        except TraceFormatError as exc:
            raise type(exc)(shown(exc.path), exc.where, shown(exc.message)) from None
        except UnknownFormat as exc:
            raise UnknownFormat(shown(str(exc))) from None
        finally:  # what was warned of the unpacked files, said of the archive
            for w in caught:
                warnings.warn(shown(str(w.message)), w.category, stacklevel=3)


def _ingest(
    paths: Sequence[str | os.PathLike[str]],
    store: Store | str | os.PathLike[str] | None,
    *,
    run: str | None,
    keep_python: bool,
    force: bool,
    strict: bool,
    progress: ProgressFn | None,
    shown: Callable[[Any], Any] = lambda x: x,
) -> Run:
    st = store if isinstance(store, Store) else Store(store)
    files, skipped = expand_inputs(paths)
    folder = Path(paths[0]) if len(paths) == 1 and Path(paths[0]).is_dir() else None
    if run:
        check_run_id(run)
    # The content hashes decide the run id and whether the stored run is reused. Where no stored run could
    # be this one (a new name), they are computed beside the ingest instead of before it.
    hashing = _Hashing([f for f, _ in files])
    ident: dict[str, str] = {}

    def identify() -> str:
        if not ident:
            digest = _digest(hashing.result(), keep_python)
            ident["digest"] = digest
            ident["run_id"] = run or default_run_id([f for f, _ in files], digest, folder)
        return ident["run_id"]

    if not force and _may_be_stored(st, run, [f for f, _ in files], folder):
        run_id = identify()
        if st.has_run(run_id) and st.metadata(run_id).get("input_digest") == ident["digest"]:
            return Run(run_id, st, [Skipped(shown(k.path), shown(k.reason), k.kind) for k in skipped], reused=True)
    started = time.time()
    seconds: dict[str, float] = dict.fromkeys(("read", "steps", "assemble", "checks", "hash_wait"), 0.0)
    took: list[dict[str, Any]] = []  # per source: the timings its reader recorded (_SOURCE_TIMINGS), its hash
    sources: list[dict[str, Any]] = []
    detection: list[dict[str, Any]] = []
    with st.write_run(identify) as stage:
        for part, (path, fmt) in enumerate(files):
            size = path.stat().st_size
            cb = (lambda done, _p=str(path), _s=size: progress(_p, done, _s)) if progress else None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", InputWarning)
                try:
                    clock = time.perf_counter()
                    with plain(path, stage, part, fmt.reads_gzip, cb) as (readable, cut):
                        given = cb if readable == path else None  # (the copy's offsets are not the file's)
                        info = fmt.ingest(str(readable), stage, part, keep_python=keep_python, progress=given)
                        said_of_original(info, readable, path)
                    if cut:
                        info.warnings.extend(cut)
                        info.truncated = info.truncated or "gzip stream ends early"
                    seconds["read"] += time.perf_counter() - clock
                except IntegerOverflow as exc:
                    where = locate(path, str(exc.value).encode()) or f"record {exc.row + 1}"
                    raise TraceFormatError(str(path), where, f"{exc.value} does not fit a 64-bit integer") from None
                except RecursionError:
                    where = locate_depth(path, _MAX_DEPTH) or "content"
                    why = f"JSON nested deeper than {_MAX_DEPTH} levels (no tool writes one)"
                    raise TraceFormatError(str(path), where, why) from None
                except _UNEXPECTED as exc:
                    # a structure the parser did not expect: still one line, and nothing stored
                    raise UnexpectedContent(str(path), "content", _not_readable(fmt.name, exc)) from None
            if strict and info.truncated:
                raise TraceFormatError(str(path), "end of file", f"truncated trace ({info.truncated})")
            for w in info.warnings:
                warnings.warn(w, TruncatedInput if info.truncated else InputWarning, stacklevel=2)
            src = info.to_dict() | {"part": part, "sha256": None, "size_bytes": size}
            src.setdefault("rows", {})
            # how long its reading took goes with the run's timings, not with what was read (a source is the same
            # whoever reads it, and when)
            took.append({k.removesuffix("_seconds"): src.pop(k) for k in _SOURCE_TIMINGS if k in src})
            if fmt.post_ingest is not None:  # e.g. the profiler's step detection
                clock = time.perf_counter()
                summary = fmt.post_ingest(stage, part)
                seconds["steps"] += time.perf_counter() - clock
                src["rows"].update(summary.pop("rows", {}))
                detection.append({"part": part, **summary})
            sources.append(src)
        try:  # the run's assembly reads what every parser wrote: a value no check caught fails here, in one line
            clock = time.perf_counter()
            merged, conflicting = counters.merge_samples(stage)
            if conflicting:
                warnings.warn(
                    f"{conflicting} values of one sample differ between files (overlapping exports?): NULL",
                    InputWarning,
                    stacklevel=2,
                )
            resets = counters.stitch(stage)
            if resets:
                warnings.warn(
                    f"{sum(resets.values())} counter resets between files (a server restart): later files read on "
                    "top of the value before the reset",
                    InputWarning,
                    stacklevel=2,
                )
            for w in drop_repeated_results(stage, sources):
                warnings.warn(w, InputWarning, stacklevel=2)
            join = assemble_requests(stage, sources)
            log_clock = place_log_times(stage)
            from_log = add_log_requests(stage)
            split = estimate_ttft_split(stage)
            server_split = estimate_server_prefill(stage)
            detected = _detected(sources)
            engine.write(stage, engine.resolve(sources, detected["gpu"], stage))
            seconds["assemble"] = time.perf_counter() - clock
            clock = time.perf_counter()
            checks = check_stage(stage, sources, strict=strict)
            far = outside_window(stage, sources)
            seconds["checks"] = time.perf_counter() - clock
        except _UNEXPECTED as exc:
            where = str(folder or files[0][0])
            text = str(exc).splitlines()[0][:120] if str(exc) else ""
            why = f"the files hold values lltrace cannot put together ({type(exc).__name__}: {text})"
            raise UnexpectedContent(where, "assembling the run", why) from None
        alignment: list[dict[str, Any]] = [
            {"part": s["part"], "source": s["path"], "method": "profiler clock (epoch ns), as written"}
            for s in sources
            if s["format"] == KINETO
        ]
        if join:
            alignment.extend(join.get("clocks") or [])
        if log_clock:
            alignment.append(log_clock)
        for w in warnings_for(checks):
            warnings.warn(w, InputWarning, stacklevel=2)
        for o in far:
            why = (
                f"{o['source'] or 'a source'}: {o['rows']:,} rows dated far outside the run's window (up to "
                f"{o['furthest_days']:,} days from its median): another run's data, or a clock that jumped?"
            )
            warnings.warn(why, InputWarning, stacklevel=2)
        clock = time.perf_counter()
        run_id = identify()  # the content hashes, computed beside the reading: what is left of them is waited for
        seconds["hash_wait"] = time.perf_counter() - clock
        for src, sha, hashed, timing in zip(sources, hashing.result(), hashing.seconds, took, strict=True):
            src["sha256"] = sha
            timing["sha256"] = hashed
        meta = {
            "run_id": run_id,
            "name": run or run_id,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "ingest_seconds": round(time.time() - started, 3),
            "seconds": {k: round(v, 3) for k, v in seconds.items()},
            "source_seconds": took,  # per source, in their order: its reader's phases, its hash (on its own thread)
            "lltrace_version": __version__,
            "input_digest": ident["digest"],
            "options": {"keep_python": keep_python},
            "sources": sources,
            "skipped": [{"path": s.path, "reason": s.reason, "kind": str(s.kind)} for s in skipped],
            "clock": {
                "run_clock": "epoch nanoseconds (profiler ts + baseTimeNanoseconds where given)",
                "alignment": alignment,
                "outside_window": far,
                "note": "profiler ranks' clocks are per host and not synchronised"
                if sum(s["format"] == KINETO for s in sources) > 1
                else None,
            },
            "detected": detected,
            "step_detection": detection,
            "join": join,
            "log_requests": from_log,
            "checks": checks,
            "counter_resets_between_files": resets,
            "samples_merged_across_files": merged,
            "ttft_split": split,
            "server_prefill_estimated": {"requests": server_split, "basis": SERVER_SPLIT} if server_split else None,
            "provenance": {
                "engine_steps.kind": "derived from step markers, else attention input shapes, else kernels (kind_from)",
                "engine_steps.decode_tokens": "measured from markers; SGLang DECODE = bs x 1 (derived)",
                "engine_steps.gpu_busy_s": "derived: union of attributed GPU op intervals",
                "kernels.kernel_class": "derived: parsers/kernel_classes.csv rules",
            }
            | (PROVENANCE if join or log_clock else {}),
        }
        # strict JSON, readable by any parser: a non-finite number a source wrote is kept as text ("inf")
        meta = shown(meta)  # (an archive's files named as in it)
        (stage / "run.json").write_text(json.dumps(_finite(meta), indent=2, default=str, allow_nan=False))
    return Run(run_id, st, [Skipped(shown(k.path), shown(k.reason), k.kind) for k in skipped])


_UNEXPECTED = (
    KeyError,
    TypeError,
    AttributeError,
    IndexError,
    ValueError,
    ArithmeticError,
    RecursionError,
    duckdb.Error,
)
_MAX_DEPTH = 512  # deeper than any file a tool writes, shallower than Python's recursion limit


def _finite(x: Any) -> Any:
    """``x`` with every non-finite float as text (``inf``, ``-inf``, ``nan``), for strict JSON."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def _not_readable(what: str, exc: BaseException) -> str:
    text = str(exc).splitlines()[0][:120] if str(exc) else ""
    return f"not a {what} file lltrace can read ({type(exc).__name__}: {text})"


def _detected(sources: list[dict[str, Any]]) -> dict[str, Any]:
    """Engine, GPU and model as far as the sources tell them, with where each came from."""
    engine = gpu = None
    for s in sources:
        tm = s.get("trace_metadata") or {}
        if "vllm_version" in tm and engine is None:
            engine = {"name": "vllm", "version": tm["vllm_version"], "origin": s["path"]}
        used = {d.get("id") for d in s.get("devices") or []}
        devs = s.get("devices") or []
        if devs and gpu is None and used:
            gpu = {
                "name": devs[0].get("name"),
                "memory_bytes": devs[0].get("totalGlobalMem"),
                "origin": f"{s['path']} deviceProperties",
            }
    return {"engine": engine, "gpu": gpu, "model": None}

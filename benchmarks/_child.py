"""Measured runs in fresh Python processes: a piece of code (``run_child``: seconds with its imports not timed), or
an ``lltrace`` command as a user types it (``run_command``: from the launch to the exit); each with the CPU-seconds
it used (all its threads) and its peak RSS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

# the process's own peak: VmHWM is reset by exec, while ru_maxrss keeps the parent's peak at the fork (a
# benchmark that built its input in memory would see that peak in every step)
_PEAK = """
def peak():
    try:
        for line in open('/proc/self/status'):
            if line.startswith('VmHWM:'):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
"""


def run_child(imports: str, work: str, variables: dict[str, object]) -> dict:
    """Execute ``imports``, bind ``variables``, time ``work``; returns {seconds, cpu_seconds, peak_rss} or {error}."""
    bindings = "".join(f"{k} = {v!r}\n" for k, v in variables.items())
    code = (
        "import json, resource, time\n"
        + _PEAK
        + imports
        + bindings
        + "t = time.perf_counter()\nc = time.process_time()\n"
        + work
        + "dt = time.perf_counter() - t\ndc = time.process_time() - c\n"
        "print(json.dumps({'seconds': dt, 'cpu_seconds': dc, 'peak_rss': peak()}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compile_bytecode() -> None:
    """Write lltrace's bytecode cache, as ``pip install`` does: a command run afterwards (``run_command``) then
    starts as it does for a user, even where ``PYTHONDONTWRITEBYTECODE`` is set in this shell."""
    import compileall

    import lltrace

    for folder in {Path(m.__path__[0]) for m in _packages(lltrace)}:
        compileall.compile_dir(folder, quiet=1, maxlevels=0)


def _packages(root: object) -> list:
    import importlib
    import pkgutil

    out = [root]
    for info in pkgutil.iter_modules(root.__path__, root.__name__ + "."):  # type: ignore[attr-defined]
        if info.ispkg:
            out.extend(_packages(importlib.import_module(info.name)))
    return out


def run_command(args: list[str], prefix: list[str] | None = None) -> dict:
    """``lltrace ARGS`` as a user types it (its console script's entry point, in a fresh interpreter): the wall
    seconds from the launch to the exit, the CPU-seconds of all its threads, and its peak RSS; or {error}.
    ``prefix``: a command that runs it (a profiler), counted with it."""
    code = (
        "import atexit, resource, sys\n"
        + _PEAK
        + "atexit.register(lambda: print('PEAK', peak(), file=sys.stderr, flush=True))\n"
        + f"sys.argv = ['lltrace', *{args!r}]\n"
        + "from lltrace.cli import main\nmain()\n"
    )
    clock = time.perf_counter()
    argv = [*(prefix or []), sys.executable, "-c", code]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - clock
    proc.returncode = os.waitstatus_to_exitcode(status)
    lines = err.strip().splitlines()
    if proc.returncode != 0 or not lines or not lines[-1].startswith("PEAK "):
        return {"error": ([ln for ln in lines if not ln.startswith("PEAK ")] or ["failed"])[-1]}
    return {"seconds": seconds, "cpu_seconds": usage.ru_utime + usage.ru_stime, "peak_rss": int(lines[-1].split()[1])}

"""The cores lltrace's readers and DuckDB use: the ones this process may run on, not a fixed number.

``os.sched_getaffinity`` counts the cores a process may run on (a ``taskset`` or a container's cpuset
narrows it; ``os.cpu_count`` counts the machine's). ``LLTRACE_THREADS`` sets the number outright. Each
reader holds a block of events, its columns and its Parquet writers' row groups at a time (about 19 MB
more peak memory per reader, measured on a 2 GB trace: 398 MB with 2, 433 MB with 4, 510 MB with 8), so the
count is capped where the readers' memory stays within a 2 GB trace's 0.25x budget.
"""

from __future__ import annotations

import os
import warnings

MAX_CORES = 6  # at most (each reader ~19 MB: see the module docstring)


def usable_cores() -> int:
    """The cores to use: ``LLTRACE_THREADS`` if set (a positive integer; anything else is warned about and not
    taken), else the ones this process may run on, at most ``MAX_CORES``; at least 1."""
    env = os.environ.get("LLTRACE_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n >= 1:
            return n
        warnings.warn(f"LLTRACE_THREADS={env!r} is not a positive integer: it is not taken", stacklevel=2)
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_CORES))

"""The cores lltrace's readers and DuckDB use: the ones this process may run on, not a fixed number.

``os.sched_getaffinity`` counts the cores a process may run on (a ``taskset`` or a container's cpuset
narrows it; ``os.cpu_count`` counts the machine's). ``LLTRACE_THREADS`` sets the number outright. Each
reader holds a block of events, its columns and its Parquet writers' row groups, and each DuckDB thread its
own buffers, so peak memory grows with the count (a 2 GB trace, sampled by phase: 421 MB with 2, 454 MB with
4, 483 MB with 6, the peak in the DuckDB phases after the reading): the count is capped at 4, which keeps a
2 GB trace within 0.23x of its size, under the 0.25x budget with room for a machine's variance.
"""

from __future__ import annotations

import os
import warnings

MAX_CORES = 4  # at most (memory grows with the count: see the module docstring)


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

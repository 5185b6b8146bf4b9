"""A benchmark's docs page: its tables, as it prints them, written under docs/performance/ with the machine they were
measured on.

Each performance benchmark prints Markdown (tables, and short lines each a paragraph or a list item) from one
function. ``publish`` runs that function; with ``--write PATH`` it also writes what it printed as a page: a header
comment naming the command that writes it, a title, what is measured against which baseline, the machine, and the
tables. What ``progress`` prints (building inputs, work folders) shows on the terminal and stays off the page.

    publish(tables, args.write, title="Profiler traces", about="...")
"""

from __future__ import annotations

import contextlib
import io
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

_screen: TextIO | None = None  # the terminal, while a page's text is captured


def progress(*parts: object) -> None:
    """Print a line on the terminal that is not part of the page (building the inputs, a work folder)."""
    print(*parts, file=_screen or sys.stdout, flush=True)


class _Tee(io.StringIO):
    """Keeps what is printed, and shows it as it comes (a long benchmark is not silent until its end)."""

    def __init__(self, screen: TextIO) -> None:
        super().__init__()
        self.screen = screen

    def write(self, text: str) -> int:
        self.screen.write(text)
        self.screen.flush()
        return super().write(text)


def cpu_model() -> str:
    """The CPU's model name, as /proc/cpuinfo gives it (or the platform's word for it)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def load() -> str:
    """The cores other work kept busy during the second before the benchmark started (/proc/stat): it slows it."""

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return fields[3] + fields[4], sum(fields[:8])  # idle and I/O wait; all but guest time (counted in user)

    with contextlib.suppress(OSError, ValueError, IndexError):
        idle0, total0 = sample()
        time.sleep(1.0)
        idle1, total1 = sample()
        return f"{(1 - (idle1 - idle0) / max(total1 - total0, 1)) * (os.cpu_count() or 1):.1f}"
    return "unknown"


def machine(load_before: str) -> str:
    """One line: the CPU, its cores, Python, lltrace, the date, and the load the benchmark found."""
    from lltrace.version import __version__

    return (
        f"{cpu_model()}, {os.cpu_count()} cores ({load_before} of them busy with other work when it started); "
        f"Python {platform.python_version()}; lltrace {__version__}; {time.strftime('%Y-%m-%d')}"
    )


def command() -> str:
    """The command line that writes the page: this script and its options as given (``--write`` among them)."""
    script = Path(sys.argv[0]).resolve()
    with contextlib.suppress(ValueError):
        script = script.relative_to(Path.cwd())
    return shlex.join(["python", str(script), *sys.argv[1:]])


def publish(tables: Callable[[], None], write: Path | None, *, title: str, about: str) -> None:
    """Run ``tables`` (it prints Markdown); with ``write``, also write what it printed as that docs page."""
    global _screen
    if write is None:
        tables()
        return
    load_before = load()
    tee = _Tee(sys.stdout)
    _screen = sys.stdout
    try:
        with contextlib.redirect_stdout(tee):
            tables()
    finally:
        _screen = None
    write.parent.mkdir(parents=True, exist_ok=True)
    write.write_text(
        PAGE.format(
            command=command(),
            title=title,
            about=about.strip(),
            machine=machine(load_before),
            tables=tee.getvalue().strip(),
        )
    )
    progress(f"wrote {write}")


PAGE = """<!-- written by `{command}`: rerun it -->

# {title}

{about}

Measured on {machine}.
Read the ratios against the baseline measured in the same run, not the seconds: how the benchmarks measure is in
[Performance](../performance.md).

{tables}
"""

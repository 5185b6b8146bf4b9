"""The compiled Kineto reader alone, on one core: the measure its changes are judged by.

Builds a compact trace from a real one (``ingest.build_trace``: its events repeated), cuts its event array into
the blocks the pipeline reads (``kineto_fast.BLOCK_BYTES``) and parses them with ``read_events`` on one thread, the best
of several passes. Beside it, in the same run, a named baseline that touches the same bytes once
(``bytes.count``, the least any parser does): read the ratio, not the MB/s, on a shared machine.

With ``--instructions`` (valgrind installed), it also counts the instructions the reader executes per byte on a
smaller file (callgrind, collecting inside ``read_events`` only): a count this machine's noise cannot move.

    python benchmarks/reader.py                     # 100 MB from the H100 trace, 7 passes
    python benchmarks/reader.py --instructions      # and the instructions per byte on 20 MB
    python benchmarks/reader.py --instructions --write docs/performance/reader.md
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _page import progress, publish  # noqa: E402
from ingest import DEFAULT_SOURCE, build_trace  # noqa: E402


def _blocks(data: bytes, size: int) -> list[memoryview]:
    """The event array cut where the reader cuts it: each block ends where the previous call stopped consuming."""
    from lltrace.parsers import _kineto_fast as k

    start = data.index(b"[", data.index(b'"traceEvents"')) + 1
    end = data.rindex(b"]")
    view, out, pos, first = memoryview(data), [], start, True
    while pos < end:
        stop = min(pos + size, end)
        consumed, *_ = k.read_events(view[pos:stop], first, stop == end, False, "External id", 0, 1 << 24)
        out.append(view[pos : pos + consumed])
        pos, first = pos + consumed, False
        if consumed == 0:
            raise SystemExit(f"the reader stopped at byte {pos}: not a trace it reads whole")
    return out


def parse_seconds(blocks: list[memoryview], passes: int) -> float:
    """The fastest of ``passes`` parses of the blocks (results freed as they go, as in the pipeline)."""
    from lltrace.parsers import _kineto_fast as k

    best = float("inf")
    for _ in range(passes):
        clock = time.perf_counter()
        for i, b in enumerate(blocks):
            k.read_events(b, i == 0, i == len(blocks) - 1, False, "External id", 0, 1 << 24)
        best = min(best, time.perf_counter() - clock)
    return best


def baseline_seconds(blocks: list[memoryview], passes: int) -> float:
    best = float("inf")
    for _ in range(passes):
        clock = time.perf_counter()
        for b in blocks:
            bytes(b).count(b"{")
        best = min(best, time.perf_counter() - clock)
    return best


def instructions_per_byte(path: Path) -> float | None:
    """Instructions executed inside ``read_events`` (callees included) per byte of the event array, by callgrind."""
    if shutil.which("valgrind") is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        code = (
            "import sys; sys.path.insert(0, sys.argv[2]); import reader; data = open(sys.argv[1], 'rb').read(); "
            "blocks = reader._blocks(data, reader.block_size()); reader.parse_seconds(blocks, 1); "
            "print('BYTES', sum(len(b) for b in blocks))"
        )
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--toggle-collect=read_events",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-c",
                code,
                str(path),
                str(Path(__file__).resolve().parent),
            ],
            capture_output=True,
            text=True,
        )
        bytes_line = re.search(r"^BYTES (\d+)", done.stdout, re.MULTILINE)
        total = re.search(r"^summary: (\d+)", out.read_text(), re.MULTILINE) if out.exists() else None
        if done.returncode != 0 or not bytes_line or not total:
            return None
        # two parses are collected: the one that cuts the blocks, and the one timed
        return int(total.group(1)) / 2 / int(bytes_line.group(1))


def block_size() -> int:
    """The bytes the pipeline hands the reader per call."""
    from lltrace.parsers import kineto_fast

    return kineto_fast.BLOCK_BYTES


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="real trace to repeat")
    ap.add_argument("--size-mb", type=float, default=100, help="size of the compact trace parsed (MB)")
    ap.add_argument("--passes", type=int, default=7, help="passes over the blocks; the fastest is kept")
    ap.add_argument("--instructions", action="store_true", help="also count instructions per byte (valgrind)")
    ap.add_argument("--workdir", type=Path, default=None, help="where to write (and keep) the generated traces")
    ap.add_argument("--write", type=Path, help="also write the table as this docs page (docs/performance/reader.md)")
    args = ap.parse_args()
    publish(lambda: tables(args), args.write, title="The compiled reader alone", about=ABOUT)


ABOUT = """
`benchmarks/reader.py` builds a compact trace from the real H100 trace's events (repeated with shifted timestamps and
fresh correlation ids), cuts its event array into the blocks the ingest pipeline hands the compiled reader, and parses
them with `read_events` on one core, the fastest of several passes. The baseline, in the same run, touches the same
bytes once (`bytes.count`, the least any parser does). With `--instructions`, callgrind counts the instructions
executed inside `read_events` per byte of a 20 MB trace: a measure the machine's noise cannot move.
"""


def tables(args: argparse.Namespace) -> None:
    """Print the table (Markdown)."""
    from lltrace.parsers import _kineto_fast as k

    work = Path(args.workdir or tempfile.mkdtemp(prefix="lltrace-reader-"))
    work.mkdir(parents=True, exist_ok=True)
    big = work / f"reader-{int(args.size_mb)}mb-compact.json"
    if not big.exists():
        progress(f"building {big}")
        build_trace(args.source, big, args.size_mb, compact=True)
    blocks = _blocks(big.read_bytes(), block_size())
    size = sum(len(b) for b in blocks)
    parse = parse_seconds(blocks, args.passes)
    base = baseline_seconds(blocks, args.passes)
    print("| measure | figure |")
    print("|---|---|")
    print(f"| events parsed | {size / 1e6:,.0f} MB in {len(blocks)} blocks, from `{args.source.name}` |")
    print(f"| SIMD path of the string scan | {k.SIMD} |")
    print(f"| baseline: `bytes.count`, one pass over the same bytes | {size / 1e6 / base:,.0f} MB/s |")
    print(
        f"| compiled reader, one core (fastest of {args.passes} passes) | {size / 1e6 / parse:,.0f} MB/s, "
        f"{parse / base:.1f}x the baseline's time |"
    )
    if args.instructions:
        small = work / "reader-20mb-compact.json"
        if not small.exists():
            progress(f"building {small}")
            build_trace(args.source, small, 20, compact=True)
        ipb = instructions_per_byte(small)
        figure = f"{ipb:.2f}" if ipb is not None else "not measured (valgrind missing or failed)"
        print(f"| instructions per byte (callgrind, 20 MB, inside `read_events`) | {figure} |")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

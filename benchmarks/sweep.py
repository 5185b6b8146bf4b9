"""Read a folder of real files from elsewhere the way a user would, and say per file what lltrace made of it.

For checking that lltrace generalises beyond ``sample_traces/``: each file is analysed by ``lltrace analyze FILE
--json`` in a fresh process (its own store), and one line per file says the format it was read as, which reader
read a profiler trace (``compiled``; ``compiled, pieces with DuckDB`` where some were declined: the run's metadata,
``readers``, says which and why), the rows of each table, the steps found and their kinds, the verdict, how many
warning lines it printed, and the seconds it took; a file lltrace refuses shows its one-line error. Nothing is
judged here: read the lines against the files' own tools.

    python benchmarks/sweep.py FOLDER [FOLDER ...]           # every file under the folders
    python benchmarks/sweep.py FOLDER --glob '*.json.gz'     # only these names
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _summary(doc: dict[str, Any], meta: dict[str, Any]) -> str:
    """One file's line: its sources' formats and readers, rows, steps and verdict."""
    parts = []
    for src in meta.get("sources") or []:
        reader = src.get("reader")
        parts.append(f"{src.get('format')}" + (f" ({reader})" if reader else ""))
        rows = {k: v for k, v in (src.get("rows") or {}).items() if v}
        if rows:
            parts.append("rows " + " ".join(f"{k}={v:,}" for k, v in rows.items()))
    steps = doc.get("steps") or {}
    if steps.get("count"):
        kinds = {k: v for k, v in (steps.get("count_by_kind") or {}).items() if v}
        undecided = sum(u.get("steps") or 0 for u in steps.get("undecided") or [])
        parts.append(
            f"steps {steps['count']:,} {kinds or ''}"
            + (f" ({undecided} without a kind)" if undecided else "")
            + f" from {', '.join(steps.get('detection') or []) or steps.get('source')}"
        )
    label = (doc.get("classification") or {}).get("label")
    if label:
        parts.append(f"verdict {label}")
    return " · ".join(parts)


def sweep(path: Path, store: Path) -> str:
    """Analyse one file in a fresh process; its line."""
    shutil.rmtree(store, ignore_errors=True)
    clock = time.perf_counter()
    cmd = [sys.executable, "-m", "lltrace.cli", "analyze", str(path), "--store", str(store), "--quiet", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    took = time.perf_counter() - clock
    err = [line for line in done.stderr.splitlines() if line.strip()]
    if done.returncode:
        return f"exit {done.returncode} in {took:.1f} s: {err[-1] if err else '(no message)'}"
    from lltrace import Store

    st = Store(store)
    meta = st.metadata(st.run_ids()[0])
    try:
        doc = json.loads(done.stdout)
    except json.JSONDecodeError:
        doc = {}
    return f"{_summary(doc, meta)} · {len(err)} warning lines · {took:.1f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path, help="folders of files to read")
    ap.add_argument("--glob", default="*", help="which file names (default: every file)")
    args = ap.parse_args()
    files = sorted(p for folder in args.folders for p in folder.rglob(args.glob) if p.is_file())
    if not files:
        sys.exit(f"no file matches {args.glob!r} under {', '.join(map(str, args.folders))}")
    with tempfile.TemporaryDirectory(prefix="lltrace-sweep-") as tmp:
        for p in files:
            print(f"{p}: {sweep(p, Path(tmp) / 'store')}", flush=True)


if __name__ == "__main__":
    main()

"""Arrival-trace ingest throughput: lltrace vs polars read_csv + a Python row loop, in one run.

Generates an Azure-2024-style trace (``YYYY-MM-DD HH:MM:SS.ffffff+00:00``, some rows without a fraction,
as in the real files) of N rows by resampling the real Azure 2023 conversation trace's prompt/output
lengths with Poisson arrivals, then measures in fresh processes:

- ``polars+loop``  polars.read_csv, then a Python loop turning each row into a request (timestamp parsed
                   with datetime.fromisoformat) — what a quick in-house script does;
- ``lltrace``      lltrace.ingest of the same file (CSV → Parquet run store).

Prints rows/s and peak RSS for each and the ratio. Read ratios: these machines are noisy.

    python benchmarks/workloads.py                 # 10 million rows
    python benchmarks/workloads.py --rows 2000000
    python benchmarks/workloads.py --write docs/performance/workloads.md
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
from _child import run_child  # noqa: E402
from _page import progress, publish  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "sample_traces" / "serving" / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv"


def build(out: Path, rows: int, rate: float = 45.0, seed: int = 7) -> None:
    """Write an Azure-2024-style CSV of ``rows`` requests at ``rate`` req/s (Poisson)."""
    with SOURCE.open() as f:
        real = [(int(r["ContextTokens"]), int(r["GeneratedTokens"])) for r in csv.DictReader(f)]
    lens = np.array(real)
    rng = np.random.default_rng(seed)
    start = np.datetime64("2024-05-12T00:00:00", "us")
    with out.open("w") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        t_us = 0.0
        chunk = 1_000_000
        for lo in range(0, rows, chunk):
            n = min(chunk, rows - lo)
            t = t_us + np.cumsum(rng.exponential(1e6 / rate, n))
            t_us = float(t[-1])
            stamps = np.datetime_as_string(start + t.astype("timedelta64[us]"), unit="us")
            pick = lens[rng.integers(0, len(lens), n)]
            lines = []
            for s, (i, o) in zip(stamps.tolist(), pick.tolist(), strict=True):
                s = s.replace("T", " ")
                if s.endswith(".000000"):  # the real 2024 files drop an all-zero fraction
                    s = s[:-7]
                lines.append(f"{s}+00:00,{i},{o}\n")
            f.write("".join(lines))


_CHILD = {
    "polars+loop": (
        "import polars as pl\nfrom datetime import datetime\n",
        "df = pl.read_csv(PATH)\n"
        "out = []\n"
        "for ts, i, o in df.iter_rows():\n"
        "    out.append({'arrival_s': datetime.fromisoformat(ts).timestamp(), 'input_tokens': i, "
        "'output_tokens': o})\n",
    ),
    "lltrace": (
        "import tempfile, lltrace\n",
        "with tempfile.TemporaryDirectory() as d:\n    lltrace.ingest([PATH], store=d)\n",
    ),
}


def measure(what: str, path: Path) -> dict:
    imports, work = _CHILD[what]
    return run_child(imports, work, {"PATH": str(path)})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--write", type=Path, help="also write the table as this docs page (docs/performance/workloads.md)")
    args = ap.parse_args()
    about = f"""
`benchmarks/workloads.py` generates an arrival trace of {args.rows:,} rows in the Azure 2024 style
(`YYYY-MM-DD HH:MM:SS.ffffff+00:00`, some rows without a fraction, as in the real files) by resampling the real Azure
2023 conversation trace's prompt and output lengths with Poisson arrivals, then reads it, each in a fresh process,
with polars `read_csv` and a Python loop turning each row into a request (the timestamp parsed with
`datetime.fromisoformat`: what a quick in-house script does, the baseline) and with `lltrace.ingest` (CSV to the
Parquet run store). Targets: at least 1 M rows/s and 5x the baseline.
"""
    publish(lambda: tables(args), args.write, title="Arrival traces", about=about)


def tables(args: argparse.Namespace) -> None:
    """Print the table (Markdown)."""
    work = args.workdir or Path(tempfile.mkdtemp(prefix="lltrace-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"azure2024-style-{args.rows}.csv"
    try:
        if not path.exists():
            t = time.perf_counter()
            build(path, args.rows)
            progress(
                f"built {path.name}: {args.rows:,} rows, {path.stat().st_size / 1e6:,.0f} MB in "
                f"{time.perf_counter() - t:.0f} s"
            )
        size = path.stat().st_size
        print(f"The trace: {args.rows:,} rows, {size / 1e6:,.0f} MB.\n")
        print("| reader | rows/s | seconds | peak RSS MB |")
        print("|---|---|---|---|")
        res = {}
        for what, label in (
            ("polars+loop", f"polars {importlib.metadata.version('polars')} `read_csv` + Python row loop (baseline)"),
            ("lltrace", "lltrace ingest"),
        ):
            r = measure(what, path)
            res[what] = r
            if "error" in r:
                print(f"| {label} | failed: {r['error']} | | |")
                continue
            print(f"| {label} | {args.rows / r['seconds']:,.0f} | {r['seconds']:.1f} | {r['peak_rss'] / 1e6:,.0f} |")
        if all("seconds" in r for r in res.values()):
            print(
                f"\nlltrace = {res['polars+loop']['seconds'] / res['lltrace']['seconds']:.1f}x polars+loop "
                f"(target >= 5x), {args.rows / res['lltrace']['seconds'] / 1e6:.2f} M rows/s (target >= 1 M)."
            )
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

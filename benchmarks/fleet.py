"""Fleet scale: ingest 1,000 runs with 1 and 2 processes, then the weekly report over all of them.

Generates N runs (default 1,000), each of M requests (default 1,000) resampled from the real
``llm_request`` OTLP spans of the vLLM CPU runs A, B and B2 in sample_traces/vllm_cpu (each span keeps
its latencies and sizes; its offset within its own run is kept and moved to the new run's start), with
run starts spread evenly over 8 weeks and fresh request, trace and span ids. Each run is one OTLP JSON-lines
file, as the collector's file exporter writes them. Then, in one run of this script:

- ``ingest_each(jobs=1)`` over the first K runs (default 200) into one store: the baseline;
- ``ingest_each(jobs=2)`` over all N runs into another store;
- ``lltrace.weekly`` over that store (all N runs) and its HTML.

It prints runs/s and MB/s for both ingests, their ratio (target: 2 processes >= 1.7x one), and the weekly
report's seconds (target: under 30 s for 1,000 runs). These machines are noisy: read the ratio.

    python benchmarks/fleet.py
    python benchmarks/fleet.py --runs 200 --baseline-runs 50
    python benchmarks/fleet.py --write docs/performance/fleet.md
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import lltrace
from lltrace.analysis.weekly import weekly
from lltrace.documents import checked
from lltrace.ingest.many import ingest_each
from lltrace.reports.weekly_html import write_weekly_html as write_weekly

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _page import progress, publish  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "sample_traces" / "vllm_cpu"
WEEK_S = 7 * 86400


def real_spans() -> list[tuple[float, dict, dict]]:
    """Every llm_request span of runs A, B and B2: (offset from its run's first span, span, resource)."""
    out = []
    for run in ("A_baseline", "B_kvpressure", "B2_kv2x"):
        spans = []
        for line in (DATA / run / "otlp" / "traces.otlp.jsonl").read_text().splitlines():
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    spans += [(sp, rs["resource"]) for sp in ss["spans"] if sp["name"] == "llm_request"]
        first = min(int(sp["startTimeUnixNano"]) for sp, _ in spans)
        out += [((int(sp["startTimeUnixNano"]) - first) / 1e9, sp, res) for sp, res in spans]
    return out


def write_fleet(folder: Path, runs: int, requests: int, weeks: float, seed: int = 0) -> int:
    """Write ``runs`` OTLP files of ``requests`` resampled spans each; returns the bytes written."""
    rng = random.Random(seed)
    pool = real_spans()
    t0 = 1_790_000_000.0  # run starts from here, spread over ``weeks``
    total = 0
    for k in range(runs):
        start_ns = int((t0 + k * weeks * WEEK_S / runs + rng.uniform(0, 600)) * 1e9)
        picked = sorted((rng.choice(pool) for _ in range(requests)), key=lambda x: x[0])
        lines = []
        for c in range(0, requests, 250):
            spans = []
            for i, (offset, sp, _) in enumerate(picked[c : c + 250], start=c):
                s0, s1 = int(sp["startTimeUnixNano"]), int(sp["endTimeUnixNano"])
                begin = start_ns + int(offset * 1e9)
                rid = f"fleet-{k:04d}-{i:04d}"
                attrs = [
                    a if a["key"] != "gen_ai.request.id" else {"key": a["key"], "value": {"stringValue": rid}}
                    for a in sp["attributes"]
                ]
                spans.append(
                    sp
                    | {
                        "traceId": f"{rng.getrandbits(128):032x}",
                        "spanId": f"{rng.getrandbits(64):016x}",
                        "startTimeUnixNano": str(begin),
                        "endTimeUnixNano": str(begin + s1 - s0),
                        "attributes": attrs,
                    }
                )
            resource = picked[c][2]
            doc = {
                "resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {"name": "vllm"}, "spans": spans}]}]
            }
            lines.append(json.dumps(doc, separators=(",", ":")))
        path = folder / f"run-{k:04d}.otlp.jsonl"
        path.write_text("\n".join(lines) + "\n")
        total += path.stat().st_size
    return total


def timed_ingest(label: str, items: list[Path], store: Path, jobs: int) -> float:
    size = sum(p.stat().st_size for p in items)
    t0 = time.perf_counter()
    result = ingest_each(items, store=store, jobs=jobs)
    wall = time.perf_counter() - t0
    if result.failed:
        sys.exit(f"{label}: {len(result.failed)} runs failed, first: {result.failed[0].error}")
    print(
        f"| {label} | {len(items):,} | {size / 1e6:,.1f} | {wall:.1f} | {len(items) / wall:.2f} | "
        f"{size / 1e6 / wall:.2f} |"
    )
    return len(items) / wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--weeks", type=float, default=8.0)
    ap.add_argument("--baseline-runs", type=int, default=200, help="runs ingested by one process (the baseline)")
    ap.add_argument("--keep", type=Path, help="work here and keep the files and stores")
    ap.add_argument("--write", type=Path, help="also write the table as this docs page (docs/performance/fleet.md)")
    args = ap.parse_args()
    about = f"""
`benchmarks/fleet.py` makes {args.runs:,} runs of {args.requests:,} requests each from the real `llm_request` spans of
the vLLM CPU runs A, B and B2 (each span keeps its latencies and sizes; fresh request, trace and span ids), their
starts spread over {args.weeks:g} weeks, one OTLP JSON-lines file per run as the collector's file exporter writes
them. It ingests them with `ingest --each`: one process over the first {args.baseline_runs:,} runs (the baseline),
then two processes over all of them, and runs `weekly` over that store with its HTML. Targets: two processes at
least 1.7x one, and the weekly report under 30 s for 1,000 runs.
"""
    publish(lambda: tables(args), args.write, title="Many runs", about=about)


def tables(args: argparse.Namespace) -> None:
    """Print the table (Markdown)."""
    work = args.keep or Path(tempfile.mkdtemp(prefix="lltrace-fleet-"))
    fleet = work / "fleet"
    fleet.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        size = write_fleet(fleet, args.runs, args.requests, args.weeks)
        took = time.perf_counter() - t0
        progress(f"generated {args.runs} runs x {args.requests} requests, {size / 1e6:.0f} MB, in {took:.0f} s")
        items = sorted(fleet.iterdir())
        print("| step | runs | MB | seconds | runs/s | MB/s |")
        print("|---|---|---|---|---|---|")
        one = timed_ingest("`ingest --each`, 1 process (baseline)", items[: args.baseline_runs], work / "store-1", 1)
        two = timed_ingest("`ingest --each`, 2 processes", items, work / "store-2", jobs=2)
        print(f"\n2 processes / 1 process: {two / one:.2f}x (target >= 1.7x).")
        t0 = time.perf_counter()
        doc = weekly(store=work / "store-2")
        write_weekly(checked(doc, "weekly"), work / "weekly.html")  # as `lltrace weekly` writes it
        wall = time.perf_counter() - t0
        n = len(lltrace.Store(work / "store-2").run_ids())
        print(
            f"\n`lltrace weekly` over {n:,} runs ({sum(w['requests'] for w in doc['windows']):,} requests, "
            f"{len(doc['windows'])} windows of one {doc['window']}) and its HTML: {wall:.1f} s (target < 30 s)."
        )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

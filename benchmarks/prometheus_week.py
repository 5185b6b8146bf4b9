"""A Prometheus server's week: query_range answers resampled from the real scrapes, through ingest, analyze and weekly.

Builds the export an SRE would pull for the weekly review (issue 18): every vLLM series of run A's, B's and
D's timed scrapes in sample_traces/vllm_cpu (gauges, counters, histogram sums, counts and buckets), one
replica per run, resampled onto a 15 s step over ``--days`` days (the scrapes' own values repeated in order;
each counter carried on from where its previous pass ended, so counters only grow), one file per day as a
server's 11,000-points-per-series limit requires. Then, in one run of this script:

- the baseline: ``json.loads`` of every file (what any reader of the answers pays first);
- ``lltrace.ingest`` of the folder into a throw-away store;
- ``lltrace.analyze`` of the run (the stored run, reused);
- ``weekly`` of the store (one window a day, from the engine's histograms and gauges).

Each step runs in a fresh process; it prints seconds, samples/s, MB/s and peak RSS, and each step's time as a
multiple of the baseline (these machines are noisy: read the ratios). The issue's target: a week of three
replicas through ``weekly`` in under 30 s (ingest and weekly together).

    python benchmarks/prometheus_week.py              # 7 days, 3 replicas
    python benchmarks/prometheus_week.py --days 1
    python benchmarks/prometheus_week.py --write docs/performance/prometheus_week.md
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _child import run_child  # noqa: E402
from _page import publish  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "sample_traces" / "vllm_cpu"
RUNS = {"A_baseline": "metrics_rate4", "B_kvpressure": "metrics", "D_chunked": "metrics"}
STEP_S = 15.0
DAY_S = 86_400.0
_SAMPLE = re.compile(r"^(vllm:[\w:]+)(?:\{([^}]*)\})? (\S+)$", re.M)


def replica_series(run: str, folder: str) -> list[tuple[dict, list[float], bool]]:
    """(labels, values in scrape order, is a counter) of every vLLM series of a run's timed scrapes."""
    by_key: dict[tuple, list[float]] = {}
    for path in sorted((DATA / run / folder).glob("*.prom")):
        for name, labels, value in _SAMPLE.findall(path.read_text()):
            lab = {"__name__": name, **dict(re.findall(r'(\w+)="([^"]*)"', labels))}
            by_key.setdefault(tuple(sorted(lab.items())), []).append(float(value))
    out = []
    for key, values in by_key.items():
        lab = dict(key)
        counter = lab["__name__"].endswith(("_total", "_sum", "_count", "_bucket"))
        out.append((lab, values, counter))
    return out


def write_week(folder: Path, days: int) -> tuple[int, int]:
    """One query_range answer per day; returns (samples, bytes)."""
    t0 = 1_790_000_000.0
    steps_per_day = int(DAY_S / STEP_S)
    replicas = {f"{run.lower()}:8000": replica_series(run, sub) for run, sub in RUNS.items()}
    samples = size = 0
    for day in range(days):
        result = []
        for instance, series in replicas.items():
            for lab, values, counter in series:
                # a counter's pass p is read on top of the sum of the passes before it, carried by repeated
                # addition so that float rounding never makes it fall (a fall is a reset to the reader)
                offsets = [0.0]
                while len(offsets) * len(values) < days * steps_per_day:
                    offsets.append(offsets[-1] + (values[-1] if counter else 0.0))
                points = []
                for i in range(steps_per_day):
                    k = day * steps_per_day + i
                    passes, at = divmod(k, len(values))
                    t = t0 + k * STEP_S
                    points.append([int(t) if t.is_integer() else t, repr(offsets[passes] + values[at])])
                samples += len(points)
                result.append({"metric": {**lab, "instance": instance, "job": "vllm"}, "values": points})
        path = folder / f"day_{day + 1}.json"
        answer = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        path.write_text(json.dumps(answer, separators=(",", ":")))  # compact, as the server writes it
        size += path.stat().st_size
    return samples, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument(
        "--write", type=Path, help="also write the tables as this docs page (docs/performance/prometheus_week.md)"
    )
    args = ap.parse_args()
    about = f"""
`benchmarks/prometheus_week.py` makes the export an SRE would pull from a Prometheus server for a weekly review, from
the real timed scrapes of the vLLM CPU runs A, B and D: every vLLM series (gauges, counters, histogram sums, counts and
buckets), one replica per run, resampled onto a 15 s step over {args.days} days (counters carried on, so they only
grow), one `query_range` answer per day, written compact as the server writes it. Each step runs in a fresh process
and is timed against the baseline, `json.loads` of every file: `lltrace ingest` of the folder, `lltrace analyze` of
the stored run, and `weekly` of the store (one window a day). Target: a week of three replicas through ingest and
`weekly` in under 30 s.
"""
    publish(lambda: tables(args.days), args.write, title="A Prometheus server's week", about=about)


def tables(days: int) -> None:
    """Print the tables (Markdown)."""
    tmp = Path(tempfile.mkdtemp(prefix="lltrace-promweek-"))
    try:
        export = tmp / "export"
        export.mkdir()
        samples, size = write_week(export, days)
        shape = f"{days} days x {len(RUNS)} replicas at {STEP_S:g} s"
        print(f"Export: {shape}: {samples:,} samples, {size / 1e6:,.0f} MB.\n")
        files = [str(p) for p in sorted(export.glob("*.json"))]
        steps = {
            "baseline `json.loads`": ("import json\n", "for f in files:\n    json.loads(open(f).read())\n"),
            "`lltrace ingest`": ("import lltrace\n", "lltrace.ingest([folder], store=store)\n"),
            "`lltrace analyze`": ("import lltrace\n", "lltrace.analyze([folder], store=store)\n"),
            "`lltrace weekly`": ("from lltrace.analysis.weekly import weekly\n", "weekly(store=store)\n"),
        }
        print("| step | seconds | samples/s | MB/s | peak RSS MiB | against the baseline |")
        print("|---|---|---|---|---|---|")
        base = None
        seconds = {}
        for name, (imports, work) in steps.items():
            r = run_child(imports, work, {"files": files, "folder": str(export), "store": str(tmp / "store")})
            if "error" in r:
                print(f"| {name} | failed: {r['error']} | | | | |")
                continue
            base = base or r["seconds"]
            seconds[name] = r["seconds"]
            print(
                f"| {name} | {r['seconds']:.2f} | {samples / r['seconds']:,.0f} | {size / 1e6 / r['seconds']:.1f} | "
                f"{r['peak_rss'] / 2**20:,.0f} | x{r['seconds'] / base:.2f} |"
            )
        if "`lltrace ingest`" in seconds and "`lltrace weekly`" in seconds:
            both = seconds["`lltrace ingest`"] + seconds["`lltrace weekly`"]
            print(f"\nIngest and weekly together: {both:.1f} s (target: under 30 s for a week of three replicas).")
        # what the timed weekly said: one window a day, each with the replicas' requests and the TTFT p90
        from lltrace.analysis.weekly import weekly

        doc = weekly(store=str(tmp / "store"), window="day")
        print(f"\nWhat `weekly` said: {len(doc['windows'])} windows of one day ({doc['figures']}).\n")
        print("| window start (UTC) | requests | preemptions | peak KV | TTFT p90, s | TTFT p90 bucket |")
        print("|---|---|---|---|---|---|")
        for w in doc["windows"]:
            start = time.strftime("%Y-%m-%d %H:%M", time.gmtime(w["window_start_s"]))
            print(
                f"| {start} | {w['requests']:,.0f} | {w['preemptions']:,.0f} | {w['peak_kv_usage']:.2f} | "
                f"{w['ttft_p90']:.2f} | {w['ttft_p90_bucket']} |"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

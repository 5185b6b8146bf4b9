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
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _child import run_child  # noqa: E402

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
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lltrace-promweek-"))
    try:
        export = tmp / "export"
        export.mkdir()
        samples, size = write_week(export, args.days)
        shape = f"{args.days} days x {len(RUNS)} replicas at {STEP_S:g} s"
        print(f"export: {shape}: {samples:,} samples, {size / 1e6:,.0f} MB")
        files = [str(p) for p in sorted(export.glob("*.json"))]
        steps = {
            "baseline json.loads": ("import json\n", "for f in files:\n    json.loads(open(f).read())\n"),
            "lltrace ingest": ("import lltrace\n", "lltrace.ingest([folder], store=store)\n"),
            "lltrace analyze": ("import lltrace\n", "lltrace.analyze([folder], store=store)\n"),
            "lltrace weekly": ("from lltrace.analysis.weekly import weekly\n", "weekly(store=store)\n"),
        }
        base = None
        for name, (imports, work) in steps.items():
            r = run_child(imports, work, {"files": files, "folder": str(export), "store": str(tmp / "store")})
            if "error" in r:
                print(f"{name:22s} failed: {r['error']}")
                continue
            base = base or r["seconds"]
            print(
                f"{name:22s} {r['seconds']:8.2f} s  {samples / r['seconds']:>12,.0f} samples/s  "
                f"{size / 1e6 / r['seconds']:7.1f} MB/s  peak {r['peak_rss'] / 2**20:7.0f} MiB  "
                f"x{r['seconds'] / base:.1f} the baseline"
            )
        # what the timed weekly said: one window a day, each with the replicas' requests and the TTFT p90
        from lltrace.analysis.weekly import weekly

        doc = weekly(store=str(tmp / "store"), window="day")
        print(f"weekly: {len(doc['windows'])} windows of one day ({doc['figures']}):")
        for w in doc["windows"]:
            print(
                f"  {w['window_start_s']:.0f}: {w['requests']:,.0f} requests, {w['preemptions']:,.0f} preemptions, "
                f"peak KV {w['peak_kv_usage']:.2f}, TTFT p90 {w['ttft_p90']:.2f} s (bucket {w['ttft_p90_bucket']})"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

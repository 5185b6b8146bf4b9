"""What each pair run measured, read from its raw files alone (not by lltrace): the clients' own latencies (every
`bench/*.json` that `vllm bench serve --save-detailed` wrote: mean TTFT and e2e over all their requests, mean TPOT
over requests of more than one output token), the server's iteration count and its decode-only steps' median
elapsed time at batch 1 to 4 (the host's speed: `Iteration(k)` lines), and the preemptions of the final scrape.

    python truth.py [RUN_DIR ...]      (default: every run folder beside this file)
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

ITERATION = re.compile(
    r"Iteration\(\d+\): (\d+) context requests, (\d+) context tokens, (\d+) generation requests, (\d+) generation "
    r"tokens, iteration elapsed time: ([\d.]+) ms"
)


def truth(run: Path) -> dict[str, Any]:
    """The run's measured figures, from its raw files."""
    ttft, e2e, tpot = [], [], []
    for f in sorted((run / "bench").glob("*.json")):
        d = json.loads(f.read_text())
        for t, lat, n in zip(d["ttfts"], d["latencies"], d["output_lens"], strict=True):
            ttft.append(t)
            e2e.append(lat)
            if n > 1:
                tpot.append((lat - t) / (n - 1))
    steps, decode = 0, {b: [] for b in (1, 2, 3, 4)}
    for line in (run / "server.log").read_text(errors="replace").splitlines():
        m = ITERATION.search(line)
        if not m:
            continue
        steps += 1
        ctx_reqs, _, gen_reqs, _, ms = m.groups()
        if int(ctx_reqs) == 0 and int(gen_reqs) in decode:
            decode[int(gen_reqs)].append(float(ms) / 1e3)
    scrape = (run / "metrics_final.prom").read_text()
    found = re.search(r"^vllm:num_preemptions_total\{[^}]*\} ([\d.e+]+)", scrape, re.M)
    return {
        "requests": len(ttft),
        "ttft_mean_s": statistics.fmean(ttft),
        "tpot_mean_s": statistics.fmean(tpot),
        "e2e_mean_s": statistics.fmean(e2e),
        "iterations": steps,
        "decode_step_median_s": {b: statistics.median(v) if v else None for b, v in decode.items()},
        "preemptions": float(found.group(1)) if found else None,
    }


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    runs = [Path(a) for a in sys.argv[1:]] or sorted(p for p in here.iterdir() if (p / "server.log").exists())
    for run in runs:
        t = truth(run)
        steps = ", ".join(f"{b}: {v * 1e3:.2f} ms" for b, v in t["decode_step_median_s"].items() if v is not None)
        print(
            f"{run.name}: {t['requests']} requests, mean TTFT {t['ttft_mean_s'] * 1e3:.1f} ms, TPOT "
            f"{t['tpot_mean_s'] * 1e3:.2f} ms, e2e {t['e2e_mean_s']:.3f} s; {t['iterations']:,} iterations, "
            f"decode-only step medians by batch {steps}; preemptions {t['preemptions']}"
        )

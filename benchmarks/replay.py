"""Replay speed: requests simulated per second, against the step-by-step path, in one run.

Traces: the real Azure 2023 conversation trace (19,366 requests, as recorded) and a trace of N requests
(default 1,000,000) made by resampling its prompt/output lengths with Poisson arrivals at a rate that keeps
the batch full. Step cost: the Llama-2-7B-on-A100 reference (``lltrace.replay.cost.reference_step_cost``: weights
read once per step, KV read per decode token, prefill FLOPs): an estimate, fine for timing the simulator.
Engine: 16-token blocks, KV from 0.9 of the A100's 80 GB less the weights, max 256 sequences, 8,192 budget.

Prints requests/s (one core: the simulator is single-threaded Python), the speed against the traces' own
duration, and the same for the step-by-step path (``fast_forward=False``) on the Azure trace as the baseline.

    python benchmarks/replay.py
    python benchmarks/replay.py --requests 200000
    python benchmarks/replay.py --write docs/performance/replay.md
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import lltrace
from lltrace.replay.cost import StepCost, reference_step_cost
from lltrace.replay.scheduler import EngineConfig, simulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _page import publish  # noqa: E402

AZURE = Path(__file__).resolve().parents[1] / "sample_traces" / "serving" / "azure_llm_2023"
AZURE = AZURE / "AzureLLMInferenceTrace_conv.csv"


def _azure() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The trace read by lltrace's own Azure parser (into a throw-away store; not timed)."""
    with tempfile.TemporaryDirectory() as store:
        q = lltrace.ingest([AZURE], store=store).table("requests").sort("arrival_s")
    t = q["arrival_s"].to_numpy()
    return t - t.min(), q["input_tokens"].to_numpy(), np.maximum(q["output_tokens"].to_numpy(), 1)


def _reference(mean_context: float) -> tuple[StepCost, EngineConfig]:
    cost, blocks, _ = reference_step_cost("llama-2-7b", "A100-80GB", mean_context=mean_context)
    return cost, EngineConfig(num_blocks=blocks, block_size=16, max_num_seqs=256, max_num_batched_tokens=8192)


def _time(
    label: str,
    arrival: np.ndarray,
    inp: np.ndarray,
    out: np.ndarray,
    cost: StepCost,
    cfg: EngineConfig,
    fast: bool = True,
) -> float:
    t0 = time.perf_counter()
    res = simulate(arrival, inp, out, cfg, cost, fast_forward=fast)
    wall = time.perf_counter() - t0
    span = float(np.nanmax(res.requests["e2e_s"].to_numpy() + arrival) - arrival.min())
    print(
        f"| {label} | {len(arrival):,} | {wall:.2f} | {len(arrival) / wall:,.0f} | {span / wall:,.0f}x | "
        f"{res.steps:,} | {res.max_running} |"
    )
    return len(arrival) / wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--write", type=Path, help="also write the table as this docs page (docs/performance/replay.md)")
    args = ap.parse_args()
    about = f"""
`benchmarks/replay.py` replays the real Azure 2023 conversation trace (19,366 requests) and a trace of
{args.requests:,} requests resampled from its prompt and output lengths with Poisson arrivals (at a rate that keeps
the batch full), against the Llama-2-7B-on-A100 reference step cost (16-token blocks, KV from 0.9 of the A100's 80 GB
less the weights, 256 sequences, an 8,192-token budget). The baseline, in the same run, is the Azure trace replayed
through the step-by-step path (`fast_forward=False`). The simulator is single-threaded Python: one core.
[Replay](../replay.md#the-simulator-and-what-it-keeps) says why the fast path is fast and how it is checked against
the step-by-step one.
"""
    publish(lambda: tables(args.requests), args.write, title="Replay speed", about=about)


def tables(requests: int) -> None:
    """Print the table (Markdown)."""
    arrival, inp, out = _azure()
    cost, cfg = _reference(float(inp.mean() + out.mean() / 2))
    print(
        f"Reference step: {cost.c0 * 1e3:.2f} ms + {cost.c_prefill * 1e6:.1f} us/prefill token + "
        f"{cost.c_decode * 1e6:.1f} us/decode token; `{cfg}`.\n"
    )
    print("| trace | requests | seconds | requests/s | against real time | steps | max batch |")
    print("|---|---|---|---|---|---|---|")
    fast = _time("Azure conversation trace, fast-forward", arrival, inp, out, cost, cfg)
    slow = _time("Azure conversation trace, step by step (baseline)", arrival, inp, out, cost, cfg, fast=False)
    rng = np.random.default_rng(0)
    pick = rng.integers(0, len(inp), requests)
    # full batches: offered load at ~1.2x what the batch the KV cache holds decodes per second
    batch = min(cfg.max_num_seqs, cfg.num_blocks * cfg.block_size / float(inp.mean() + out.mean()))
    step = cost.c0 + cost.c_decode * batch
    rate = 1.2 * batch / (step * float(out.mean()))
    big = np.cumsum(rng.exponential(1 / rate, requests))
    _time(f"resampled, Poisson {rate:.0f} req/s", big, inp[pick], out[pick], cost, cfg)
    print(f"\nFast-forward / step by step, on the Azure trace: {fast / slow:.1f}x.")


if __name__ == "__main__":
    main()

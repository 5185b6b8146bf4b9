"""Replay core: a continuous-batching model of a vLLM-V1-style scheduler, with a step cost fitted on the run.

This is the simulation kernel that ``lltrace replay`` (issue 6) is built on. It models, per engine step:

* a FCFS waiting queue; running requests are served first, in admission order;
* a token budget per step (``max_num_batched_tokens``) shared by decodes (1 token each) and prefill chunks
  (chunked prefill: a prompt may be split across steps);
* ``max_num_seqs`` running sequences;
* KV capacity in blocks of ``block_size`` tokens. When a running request cannot get the block its next
  tokens need, the most recently admitted running request is preempted (recompute: its blocks are freed,
  it goes back to the front of the queue and later re-prefills prompt + tokens generated so far), as vLLM
  V1 does. No new request is admitted in a step that preempted.

Step time is ``StepCost``: ``c0 + c_prefill * prefill_tokens + c_decode * decode_tokens + c_ctx * context``
(context = tokens already in KV for the requests in the step), fitted by least squares to the run's own
``engine_steps`` (:func:`fit_step_cost`). Every output of a replay is a model estimate.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import polars as pl

__all__ = ["EngineConfig", "StepCost", "ReplayResult", "fit_step_cost", "simulate"]


@dataclass(frozen=True)
class EngineConfig:
    """Scheduler limits of the engine being replayed."""

    num_blocks: int
    block_size: int = 16
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    chunked_prefill: bool = True


@dataclass(frozen=True)
class StepCost:
    """Linear step-time model, seconds. ``r2`` and ``mape`` describe the fit on the calibration steps.

    ``overhead`` is time between steps that the steps' own elapsed times do not include (scheduling,
    detokenisation, output processing), measured from the run's step spacing while the engine was busy.
    """

    c0: float
    c_prefill: float
    c_decode: float
    c_ctx: float = 0.0
    overhead: float = 0.0
    steps: int = 0
    r2: float | None = None
    mape: float | None = None

    def __call__(self, prefill_tokens: int, decode_tokens: int, context_tokens: int) -> float:
        """Predicted wall time of one step."""
        per_token = self.c_prefill * prefill_tokens + self.c_decode * decode_tokens + self.c_ctx * context_tokens
        return self.c0 + self.overhead + per_token


def fit_step_cost(steps: pl.DataFrame) -> StepCost:
    """Fit :class:`StepCost` (without the context term) to ``engine_steps`` rows.

    The per-step ``overhead`` is the mean gap between back-to-back steps beyond their elapsed times.
    Uses rows with ``prefill_tokens``, ``decode_tokens`` and ``wall_s`` all known and ``wall_s > 0``.
    Coefficients are constrained to be non-negative (a negative per-token cost would make the replay
    reward bigger batches with shorter steps); a coefficient that least squares drives negative is set to
    zero and the rest refitted.
    """
    rows = steps.filter(
        pl.col("prefill_tokens").is_not_null() & pl.col("decode_tokens").is_not_null() & (pl.col("wall_s") > 0)
    )
    if rows.height < 3:
        raise ValueError(
            f"need at least 3 engine steps with token counts and wall time for a step cost, got {rows.height}"
        )
    p = rows["prefill_tokens"].to_numpy().astype(float)
    d = rows["decode_tokens"].to_numpy().astype(float)
    y = rows["wall_s"].to_numpy().astype(float)
    cols = [np.ones_like(y), p, d]
    active = [True, True, True]
    coef = np.zeros(3)
    for _ in range(3):
        x = np.column_stack([c for c, a in zip(cols, active, strict=True) if a])
        sol, *_ = np.linalg.lstsq(x, y, rcond=None)
        coef = np.zeros(3)
        coef[[i for i, a in enumerate(active) if a]] = sol
        negative = [i for i in range(3) if active[i] and coef[i] < 0]
        if not negative:
            break
        for i in negative:
            active[i] = False
    pred = coef[0] + coef[1] * p + coef[2] * d
    ss_res = float(((y - pred) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else None
    mape = float(np.mean(np.abs(pred - y) / y))
    return StepCost(float(coef[0]), float(coef[1]), float(coef[2]), 0.0, _busy_overhead(rows), rows.height, r2, mape)


def _busy_overhead(rows: pl.DataFrame, busy_gap_s: float = 0.5) -> float:
    """Mean per-step time not covered by ``wall_s``, over back-to-back steps (next start < ``busy_gap_s``)."""
    if "start_s" not in rows.columns:
        return 0.0
    spaced = (
        rows.sort("start_s")
        .with_columns((pl.col("start_s").shift(-1) - pl.col("start_s")).alias("interval"))
        .filter(pl.col("interval").is_not_null() & (pl.col("interval") < busy_gap_s))
    )
    if spaced.height == 0:
        return 0.0
    extra = float(spaced["interval"].sum()) - float(spaced["wall_s"].sum())
    return max(0.0, extra / spaced.height)


@dataclass
class ReplayResult:
    """Per-request outcome of a replay (seconds, from the trace's own clock) and engine totals."""

    requests: pl.DataFrame
    steps: int
    preemptions: int
    busy_s: float
    max_running: int
    max_waiting: int
    peak_kv_blocks: int
    notes: list[str] = field(default_factory=list)


def simulate(
    arrival_s: np.ndarray | list[float],
    input_tokens: np.ndarray | list[int],
    output_tokens: np.ndarray | list[int],
    config: EngineConfig,
    cost: StepCost,
) -> ReplayResult:
    """Replay requests through the scheduler model; returns per-request queue, TTFT, TPOT and e2e.

    ``arrival_s`` may be on any clock (only differences matter); results are on the same clock.
    A request whose prompt + output can never fit the KV capacity is rejected (status ``rejected``)
    rather than preempting forever.
    """
    arr = np.asarray(arrival_s, dtype=float)
    inp = np.asarray(input_tokens, dtype=np.int64)
    out = np.asarray(output_tokens, dtype=np.int64)
    n = arr.size
    if not (inp.size == n and out.size == n):
        raise ValueError("arrival_s, input_tokens and output_tokens must have the same length")
    order = np.argsort(arr, kind="stable")
    bs = config.block_size
    cap = config.num_blocks
    budget_max = config.max_num_batched_tokens

    # per-request state (python lists are faster than numpy scalars in the step loop)
    prompt = inp.tolist()
    gen_target = out.tolist()
    computed = [0] * n  # tokens whose KV is in cache
    generated = [0] * n  # output tokens produced
    blocks = [0] * n
    first_sched = [math.nan] * n
    first_token = [math.nan] * n
    finished = [math.nan] * n
    preempted = [0] * n
    status = ["ok"] * n

    arrivals = order.tolist()
    arr_l = arr.tolist()
    nxt = 0
    waiting: deque[int] = deque()
    running: list[int] = []
    free = cap
    t = arr_l[arrivals[0]] if n else 0.0
    steps = preemptions = max_running = max_waiting = 0
    busy = 0.0
    peak_blocks = 0
    done = 0
    notes: list[str] = []

    while done < n:
        while nxt < n and arr_l[arrivals[nxt]] <= t:
            waiting.append(arrivals[nxt])
            nxt += 1
        if not running and not waiting:
            t = arr_l[arrivals[nxt]]
            continue
        budget = budget_max
        p_tokens = d_tokens = ctx = 0
        scheduled: list[tuple[int, int]] = []
        preempted_now = False
        i = 0
        while i < len(running) and budget > 0:
            r = running[i]
            target = prompt[r] + generated[r]  # tokens that must be in KV before the next token is sampled
            need = target - computed[r] if computed[r] < target else 1
            if need > 1 and not config.chunked_prefill and need > budget:
                break
            take = min(need, budget)
            want_blocks = -(-(computed[r] + take) // bs) - blocks[r]
            while want_blocks > free:
                victim = running.pop()
                free += blocks[victim]
                blocks[victim] = 0
                computed[victim] = 0
                preempted[victim] += 1
                preemptions += 1
                preempted_now = True
                waiting.appendleft(victim)
                if victim == r:
                    break
            if r not in running[i : i + 1]:
                break  # r itself was preempted
            free -= want_blocks
            blocks[r] += want_blocks
            scheduled.append((r, take))
            ctx += computed[r]
            if need > 1:
                p_tokens += take
            else:
                d_tokens += 1
            budget -= take
            i += 1
        if not preempted_now:
            while waiting and budget > 0 and len(running) < config.max_num_seqs:
                r = waiting[0]
                target = prompt[r] + generated[r]
                if -(-(prompt[r] + gen_target[r]) // bs) > cap:
                    waiting.popleft()
                    status[r] = "rejected"
                    done += 1
                    continue
                take = min(target, budget)
                if not config.chunked_prefill and take < target:
                    break
                want_blocks = -(-take // bs)
                if want_blocks > free:
                    break
                waiting.popleft()
                free -= want_blocks
                blocks[r] = want_blocks
                running.append(r)
                if math.isnan(first_sched[r]):
                    first_sched[r] = t
                scheduled.append((r, take))
                p_tokens += take
                budget -= take
        if not scheduled:
            if preempted_now:
                continue  # the queue head is admitted next step
            if nxt < n and not running:
                t = max(t, arr_l[arrivals[nxt]])
                continue
            notes.append(f"scheduler stalled at t={t:.3f}s with {len(waiting)} waiting")
            for r in list(waiting) + running:
                status[r] = "stalled"
                done += 1
            break
        dt = cost(p_tokens, d_tokens, ctx)
        t += dt
        busy += dt
        steps += 1
        for r, take in scheduled:
            computed[r] += take
            if computed[r] >= prompt[r] + generated[r]:
                generated[r] += 1
                if math.isnan(first_token[r]):
                    first_token[r] = t
                if generated[r] >= gen_target[r]:
                    finished[r] = t
                    free += blocks[r]
                    blocks[r] = 0
                    running.remove(r)
                    done += 1
        used = cap - free
        if used > peak_blocks:
            peak_blocks = used
        if len(running) > max_running:
            max_running = len(running)
        if len(waiting) > max_waiting:
            max_waiting = len(waiting)

    fs = np.array(first_sched)
    ft = np.array(first_token)
    fin = np.array(finished)
    out_f = out.astype(float)
    frame = pl.DataFrame(
        {
            "index": np.arange(n),
            "arrival_s": arr,
            "input_tokens": inp,
            "output_tokens": out,
            "queue_s": fs - arr,
            "ttft_s": ft - arr,
            "e2e_s": fin - arr,
            "tpot_s": np.where(out_f > 1, (fin - ft) / np.maximum(out_f - 1, 1), np.nan),
            "num_preemptions": np.array(preempted, dtype=np.int64),
            "status": status,
        }
    ).with_columns(pl.col(pl.Float64).fill_nan(None))
    return ReplayResult(frame, steps, preemptions, busy, max_running, max_waiting, peak_blocks, notes)

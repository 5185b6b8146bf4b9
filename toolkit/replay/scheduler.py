"""The scheduler model the replay runs: one engine (``lltrace.replay.engine_model``), or several data-parallel
engines behind vLLM's load balancer, over the run's arrivals (``simulate``).

Data parallelism (``data_parallel_size``): each engine has the run's limits and KV blocks of its own, and each request
goes, as it arrives, to the engine vLLM 0.32's load balancer picks (``DPLBAsyncMPClient.get_core_engine_for_request``
with one API server): the fewest requests in flight, plus 6 x waiting x the KV cache's use above half, ties to the
next engine in turn.

Step time is a ``StepCost`` (``lltrace.replay.cost``). Every output is a model estimate.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl

from lltrace.replay.cost import StepCost
from lltrace.replay.engine_model import OPTIONAL, EngineConfig, EngineModel

__all__ = ["OPTIONAL", "EngineConfig", "ReplayResult", "simulate"]


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
    prefill_tokens: int = 0  # prompt tokens computed (prefix-cache hits excluded, recomputation included)
    prompt_steps: int = 0  # steps that computed prompt tokens (a chunk or a whole prompt)


def _route(models: list[EngineModel], order: list[int], arrival: list[float], fast_forward: bool) -> list[int]:
    """Send each request, as it arrives, to the engine vLLM's load balancer picks (module docstring); returns each
    request's engine. Every engine is stepped to the arrival first: what has left it by then is what the router sees."""
    engine = [0] * len(arrival)
    start = 0  # the scan's first engine, turning after each request (vLLM's tie-break)
    for r in order:
        t = arrival[r]
        best, best_score = 0, np.inf
        for i in range(len(models)):
            k = (start + i) % len(models)
            models[k].run(fast_forward, until=t)
            waiting, kv = models[k].load()
            score = models[k].in_flight(t) + waiting * 6.0 * max(0.0, kv - 0.5)
            if score < best_score:
                best, best_score = k, score
        models[best].arrivals.append(r)
        engine[r] = best
        start = (start + 1) % len(models)
    return engine


def simulate(
    arrival_s: np.ndarray | list[float],
    input_tokens: np.ndarray | list[int],
    output_tokens: np.ndarray | list[int],
    config: EngineConfig,
    cost: StepCost,
    *,
    cached_tokens: np.ndarray | list[int] | None = None,
    pauses: list[tuple[float, float]] | None = None,
    fast_forward: bool = True,
) -> ReplayResult:
    """Replay requests through the scheduler model; returns per-request queue, TTFT, TPOT and e2e.

    As in vLLM V1's engine core, a request that arrives while a step runs is taken into the queue when the
    step ends (``wait_s`` after it arrived): its queue time counts from there (the engine's ``queued`` time),
    its TTFT and e2e from arrival.

    ``cached_tokens`` (prefix-cache hits) skips that many prompt tokens of a request's first prefill (at
    least one prompt token is always computed); their KV blocks are still allocated to the request (a
    conservative reading of vLLM's shared, ref-counted blocks). A re-prefill after preemption recomputes all.

    With ``fast_forward`` decoding requests are kept in aggregate and a run of identical decode-only steps is
    applied at once (same result as stepping request by request, up to float rounding of the clock); the
    request-by-request path is kept for checking that.

    ``pauses`` are ``(start, end)`` intervals on the arrival clock in which the engine starts no step (stalls
    measured in the run: a profiler flushing its trace, a long GC): a step running at ``start`` finishes.

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
    cached = None if cached_tokens is None else np.maximum(np.asarray(cached_tokens, dtype=np.int64), 0).tolist()
    if cached is not None and len(cached) != n:
        raise ValueError("cached_tokens must have one value per request")
    notes = []
    if config.drafting:
        slots = f", each scheduled request {config.draft_slots:g} more for its drafter" if config.draft_slots else ""
        # speculative decoding: each decode step verifies the draft tokens, which the step cost prices as prompt
        # tokens (as it was fitted: lltrace.replay.cost._step_tokens)
        cost = replace(cost, c_decode=cost.c_decode + config.draft_tokens_per_decode_step * cost.c_prefill)
        notes.append(
            f"speculative decoding: each decoding request gains {config.tokens_per_decode_step:.2f} tokens a step and "
            f"verifies {config.draft_tokens_per_decode_step:.2f} draft tokens in it (the run's own counts), taking "
            f"{1 + config.draft_tokens_per_decode_step:.2f} tokens of the step's budget and KV for them" + slots
        )
    fast = fast_forward and not config.drafting
    stalls = list(pauses or [])
    engines = max(1, config.data_parallel_size)
    if engines == 1:
        models = [EngineModel(arr, inp, out, config, cost, cached, stalls)]
        models[0].run(fast)
        which = np.zeros(n, dtype=np.int64)
    else:  # each engine steps to each arrival, which then goes where vLLM's load balancer sends it
        models = [EngineModel(arr, inp, out, config, cost, cached, stalls, arrivals=[]) for _ in range(engines)]
        which = np.array(_route(models, np.argsort(arr, kind="stable").tolist(), arr.tolist(), fast), dtype=np.int64)
        for m in models:
            m.run(fast)
        served_by = " / ".join(str(len(m.arrivals)) for m in models)
        notes.append(
            f"data parallel: {engines} engines, each with the limits and KV blocks above; each request sent as it "
            f"arrives to the one with the fewest requests in flight (vLLM's load balancer): {served_by} requests; a "
            "measured stall pauses all"
        )
    served = (which, np.arange(n))

    def per_request(attr: str) -> np.ndarray:
        return np.array([getattr(m, attr) for m in models], dtype=float)[served]

    fs, qd, ft, fin = (per_request(a) for a in ("first_sched", "queued", "first_token", "finished"))
    out_f = out.astype(float)
    frame = pl.DataFrame(
        {
            "index": np.arange(n),
            "arrival_s": arr,
            "input_tokens": inp,
            "output_tokens": out,
            "queue_s": fs - qd,
            "wait_s": qd - arr,
            "ttft_s": ft - arr,
            "e2e_s": fin - arr,
            "tpot_s": np.where(out_f > 1, (fin - ft) / np.maximum(out_f - 1, 1), np.nan),
            "num_preemptions": per_request("preempted").astype(np.int64),
            "status": [models[e].status[r] for r, e in enumerate(which.tolist())],
        }
    ).with_columns(pl.col(pl.Float64).fill_nan(None))
    return ReplayResult(
        frame,
        sum(m.steps for m in models),
        sum(m.preemptions for m in models),
        sum(m.busy for m in models),
        max(m.max_running for m in models),
        max(m.max_waiting for m in models),
        max(m.peak_blocks for m in models),
        notes + [note for m in models for note in m.notes],
        sum(m.prefill_tokens for m in models),
        sum(m.prompt_steps for m in models),
    )

"""Replay core: a continuous-batching model of a vLLM-V1-style scheduler, with a step cost fitted on the run.

``simulate`` is the kernel ``lltrace replay`` is built on; ``replay`` configures, calibrates and validates it
on a stored run and answers the what-ifs. The model, per engine step:

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
``engine_steps`` (:func:`fit_step_cost`; engine stalls left out and replayed as pauses), or to the requests'
own decode times, or taken from the catalog's roofline (:func:`reference_step_cost`). Every output of a
replay is a model estimate.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from lltrace.catalog import BYTES_PER_PARAM
from lltrace.errors import AnalysisError

__all__ = [
    "EngineConfig",
    "StepCost",
    "ReplayResult",
    "fit_step_cost",
    "simulate",
    "replay",
    "replay_cases",
    "replay_notes",
    "validation_rows",
    "WHAT_IF_KEYS",
]


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


def _mean_concurrency(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For each interval [start_i, end_i]: the time-averaged number of the intervals open during it."""
    edges = np.concatenate([start, end])
    delta = np.concatenate([np.ones_like(start), -np.ones_like(end)])
    order = np.argsort(edges, kind="stable")
    t, count = edges[order], np.cumsum(delta[order])
    area = np.concatenate([[0.0], np.cumsum(count[:-1] * np.diff(t))])  # integral of count up to t[k]

    def integral(x: np.ndarray) -> np.ndarray:
        k = np.searchsorted(t, x, side="right") - 1
        k = np.clip(k, 0, len(t) - 1)
        return area[k] + count[k] * (x - t[k])

    width = end - start
    return np.where(width > 0, (integral(end) - integral(start)) / np.where(width > 0, width, 1), 1.0)


def _fit_quality(y: np.ndarray, pred: np.ndarray) -> tuple[float | None, float]:
    """R² (None when ``y`` is constant) and mean absolute percentage error of a fit."""
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - pred) ** 2).sum()) / ss_tot if ss_tot > 0 else None
    return r2, float(np.mean(np.abs(pred - y) / y))


def _nonneg_lstsq(cols: list[np.ndarray], y: np.ndarray) -> np.ndarray:
    """Least squares with every coefficient >= 0: a column whose coefficient comes out negative is dropped."""
    active = [True] * len(cols)
    coef = np.zeros(len(cols))
    for _ in range(len(cols)):
        x = np.column_stack([c for c, a in zip(cols, active, strict=True) if a])
        sol, *_ = np.linalg.lstsq(x, y, rcond=None)
        coef = np.zeros(len(cols))
        coef[[i for i, a in enumerate(active) if a]] = sol
        negative = [i for i in range(len(cols)) if active[i] and coef[i] < 0]
        if not negative:
            break
        for i in negative:
            active[i] = False
    return coef


def fit_step_cost_from_requests(requests: pl.DataFrame) -> StepCost:
    """Fit :class:`StepCost` to per-request times when the engine logged no steps.

    A request's decode time is the sum of the steps it decoded in: ``(out - 1)`` steps, each
    ``c0 + c_decode * batch`` plus ``c_prefill`` for every prompt token prefilled meanwhile. With ``batch``
    the time-averaged number of requests decoding over its decode window and the prompt tokens whose prefill
    ended inside the window (both from the same requests' measured times), non-negative least squares over
    all requests gives ``c0``, ``c_decode`` and ``c_prefill`` together. Gaps between steps are inside these
    times, so ``overhead`` is 0. ``r2`` and ``mape`` describe the fit of decode times.
    """
    need = ("first_token_s", "decode_s", "prefill_s", "input_tokens", "output_tokens")
    if not set(need) <= set(requests.columns):
        raise AnalysisError("calibrating from requests needs their prefill and decode times (engine spans)")
    every = requests.drop_nulls(list(need))
    rows = every.filter((pl.col("output_tokens") > 1) & (pl.col("decode_s") > 0))
    if rows.height < 10:
        raise AnalysisError(f"calibrating from requests needs 10 with prefill and decode times, got {rows.height}")
    start = rows["first_token_s"].to_numpy()
    end = start + rows["decode_s"].to_numpy()
    batch = _mean_concurrency(start, end)
    # prompt tokens whose prefill finished inside each decode window (prefix sums over prefill end times)
    done_at = every["first_token_s"].to_numpy()
    order = np.argsort(done_at)
    done_sorted = done_at[order]
    tokens = np.concatenate([[0.0], np.cumsum(every["input_tokens"].to_numpy()[order].astype(float))])
    prefilled = (
        tokens[np.searchsorted(done_sorted, end, "right")] - tokens[np.searchsorted(done_sorted, start, "right")]
    )
    steps_n = rows["output_tokens"].to_numpy().astype(float) - 1
    y = rows["decode_s"].to_numpy()
    c0, c_decode, c_prefill = _nonneg_lstsq([steps_n, steps_n * batch, prefilled], y)
    r2, mape = _fit_quality(y, c0 * steps_n + c_decode * steps_n * batch + c_prefill * prefilled)
    return StepCost(float(c0), float(c_prefill), float(c_decode), 0.0, 0.0, 0, r2, mape)


def _step_tokens(rows: pl.DataFrame) -> tuple[pl.Expr, pl.Expr]:
    """A logged step's prefill-like tokens and decoding sequences, the quantities :class:`StepCost` prices.

    vLLM's iteration line counts a request resumed after preemption among the *generation* requests with all
    the tokens it recomputes, so generation tokens beyond one per generation request are recomputed prompt:
    they are priced as prefill, and each generation request as one decode. Without request counts the
    generation tokens are taken as decodes.
    """
    if "decode_reqs" not in rows.columns:
        return pl.col("prefill_tokens"), pl.col("decode_tokens")
    reqs = pl.col("decode_reqs")
    recomputed = pl.when(reqs.is_null()).then(0).otherwise((pl.col("decode_tokens") - reqs).clip(lower_bound=0))
    return pl.col("prefill_tokens") + recomputed, pl.coalesce(reqs, pl.col("decode_tokens"))


def fit_step_cost(steps: pl.DataFrame) -> StepCost:
    """Fit :class:`StepCost` (without the context term) to ``engine_steps`` rows.

    Prefill tokens and decodes per step as :func:`_step_tokens` reads them (recomputed tokens of resumed
    requests priced as prefill). The per-step ``overhead`` is the mean gap between back-to-back steps beyond
    their elapsed times.
    Uses rows with ``prefill_tokens``, ``decode_tokens`` and ``wall_s`` all known and ``wall_s > 0``.
    Coefficients are constrained to be non-negative (a negative per-token cost would make the replay
    reward bigger batches with shorter steps); a coefficient that least squares drives negative is set to
    zero and the rest refitted.
    """
    rows = steps.filter(
        pl.col("prefill_tokens").is_not_null() & pl.col("decode_tokens").is_not_null() & (pl.col("wall_s") > 0)
    )
    if rows.height < 3:
        raise AnalysisError(
            f"need at least 3 engine steps with token counts and wall time for a step cost, got {rows.height}"
        )
    prefill, decodes = _step_tokens(rows)
    p = rows.select(prefill).to_series().to_numpy().astype(float)
    d = rows.select(decodes).to_series().to_numpy().astype(float)
    y = rows["wall_s"].to_numpy().astype(float)
    coef = _nonneg_lstsq([np.ones_like(y), p, d], y)
    r2, mape = _fit_quality(y, coef[0] + coef[1] * p + coef[2] * d)
    return StepCost(float(coef[0]), float(coef[1]), float(coef[2]), 0.0, _busy_overhead(rows), rows.height, r2, mape)


def engine_stalls(steps: pl.DataFrame, cost: StepCost, *, ratio: float = 10.0, excess_s: float = 0.1) -> pl.DataFrame:
    """Steps in which the engine stalled: wall time over ``ratio`` x the fitted step time and ``excess_s`` beyond it.

    Such a step carries time the step-cost model cannot explain from its tokens (a profiler writing its trace
    from inside a step, a long GC pause, a swap storm). Columns: ``step_id``, ``start_s``, ``wall_s``,
    ``predicted_s``, ``excess_s`` (wall - predicted) and ``row`` (its row number in ``steps``).
    """
    rows = steps.with_row_index("row").filter(
        pl.col("prefill_tokens").is_not_null() & pl.col("decode_tokens").is_not_null() & (pl.col("wall_s") > 0)
    )
    prefill, decodes = _step_tokens(rows)
    predicted = cost.c0 + cost.c_prefill * prefill + cost.c_decode * decodes
    return (
        rows.select("step_id", "start_s", "wall_s", predicted.alias("predicted_s"), "row")
        .with_columns((pl.col("wall_s") - pl.col("predicted_s")).alias("excess_s"))
        .filter((pl.col("wall_s") > ratio * pl.col("predicted_s")) & (pl.col("excess_s") > excess_s))
        .sort("start_s")
    )


def fit_step_cost_without_stalls(steps: pl.DataFrame) -> tuple[StepCost, pl.DataFrame]:
    """:func:`fit_step_cost` on the steps that are not stalls (:func:`engine_stalls` of a first fit); the stalls."""
    first = fit_step_cost(steps)
    stalls = engine_stalls(steps, first)
    if stalls.height == 0:
        return first, stalls
    clean = steps.with_row_index("row").filter(~pl.col("row").is_in(stalls["row"].implode())).drop("row")
    cost = fit_step_cost(clean)
    return cost, engine_stalls(steps, cost)


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


def _steps_before(span: float, dt: float) -> int:
    """How many steps of ``dt`` start within the next ``span`` seconds (0 when ``span`` <= 0)."""
    ahead = span / dt
    return max(0, math.ceil(ahead) if ahead != int(ahead) else int(ahead))


class _Scheduler:
    """State of one replay and its step rules.

    Running requests are kept two ways. *Individuals* (prefilling, just admitted, or re-prefilling after a
    preemption) carry their own token and block counts. *Decoders* (prefill done: one token per step) are
    kept in aggregate against ``decode_steps``, the number of steps in which every decoder decoded: a
    decoder's tokens are its tokens when it joined plus the decode steps since, the blocks it takes next
    step follow from where that count sits in its block (``phase``), and finishing is a heap keyed by the
    decode step of its last token. A step in which every running request is scheduled and the KV blocks
    suffice then costs time in the number of individuals, not the batch. Any other step (preemption, a
    budget that starves a request) turns every decoder back into an individual and runs the rules request
    by request; ``_fast_step`` and ``_exact_step`` give the same result, which the tests check against the
    request-by-request path (``fast_forward=False``).
    """

    def __init__(
        self,
        arrival: np.ndarray,
        inp: np.ndarray,
        out: np.ndarray,
        config: EngineConfig,
        cost: StepCost,
        cached: list[int] | None,
        pauses: list[tuple[float, float]],
    ) -> None:
        n = arrival.size
        self.n = n
        self.config = config
        self.cost = cost
        self.bs = config.block_size
        # per-request state (python lists are faster than numpy scalars in the step loop)
        self.arrivals = np.argsort(arrival, kind="stable").tolist()
        self.arr = arrival.tolist()
        self.prompt = inp.tolist()
        self.gen_target = out.tolist()
        self.cached = cached
        self.computed = [0] * n  # tokens whose KV is in cache
        self.generated = [0] * n  # output tokens produced
        self.blocks = [0] * n
        self.first_sched = [math.nan] * n
        self.first_token = [math.nan] * n
        self.finished = [math.nan] * n
        self.preempted = [0] * n
        self.status = ["ok"] * n
        self.running: list[int] = []
        self.waiting: deque[int] = deque()
        self.individuals: list[int] = []  # running requests not in the decoder aggregate, in running order
        self.free = config.num_blocks
        self.t = self.arr[self.arrivals[0]] if n else 0.0
        self.nxt = 0
        self.pauses = sorted(pauses)  # (start, end): no step starts inside
        self.next_pause = 0
        self.done = self.steps = self.preemptions = self.max_running = self.max_waiting = self.peak_blocks = 0
        self.busy = 0.0
        self.notes: list[str] = []
        # decoder aggregate
        self.decode_steps = 0
        self.decoders = 0
        self.phase = [0] * self.bs  # decoders needing a new block when decode_steps % bs == k
        self.ctx_base = 0  # sum over decoders of (tokens at join - decode_steps at join)
        self.finish_heap: list[tuple[int, int]] = []  # (decode step of the last token, request)
        self.joined_at = [-1] * n
        self.tokens_at_join = [0] * n
        self.generated_at_join = [0] * n

    # -- the decoder aggregate --------------------------------------------------------------------------

    def _join(self, r: int) -> None:
        d = self.decode_steps
        c = self.computed[r]
        self.joined_at[r] = d
        self.tokens_at_join[r] = c
        self.generated_at_join[r] = self.generated[r]
        self.decoders += 1
        self.phase[(d - c) % self.bs] += 1
        self.ctx_base += c - d
        heapq.heappush(self.finish_heap, (d + self.gen_target[r] - self.generated[r], r))

    def _regroup(self) -> None:
        """After a request-by-request step: decoders join the aggregate, the rest stay individuals."""
        prompt, generated, computed, first_token = self.prompt, self.generated, self.computed, self.first_token
        self.individuals = []
        for r in self.running:
            if computed[r] == prompt[r] + generated[r] - 1 and not math.isnan(first_token[r]):
                self._join(r)
            else:
                self.individuals.append(r)

    def _dissolve(self) -> None:
        """Every decoder back to an individual with its own counts."""
        bs = self.bs
        for r in self.running:
            j = self.joined_at[r]
            if j >= 0:
                k = self.decode_steps - j
                self.computed[r] = self.tokens_at_join[r] + k
                self.generated[r] = self.generated_at_join[r] + k
                self.blocks[r] = -(-self.computed[r] // bs)
                self.joined_at[r] = -1
        self.decoders = self.ctx_base = 0
        self.phase = [0] * bs
        self.finish_heap = []
        self.individuals = list(self.running)

    # -- step rules -------------------------------------------------------------------------------------

    def _admit(self, budget: int, scheduled: list[tuple[int, int]]) -> tuple[int, int]:
        """Admit from the queue head while the budget, ``max_num_seqs`` and free blocks allow."""
        cfg, bs, cached = self.config, self.bs, self.cached
        waiting, running, prompt = self.waiting, self.running, self.prompt
        p_tokens = 0
        while waiting and budget > 0 and len(running) < cfg.max_num_seqs:
            r = waiting[0]
            target = prompt[r] + self.generated[r]
            if -(-(prompt[r] + self.gen_target[r]) // bs) > cfg.num_blocks:
                waiting.popleft()
                self.status[r] = "rejected"
                self.done += 1
                continue
            hit = min(cached[r], target - 1) if cached is not None and math.isnan(self.first_sched[r]) else 0
            take = min(target - hit, budget)
            if not cfg.chunked_prefill and take < target - hit:
                break
            want = -(-(hit + take) // bs)
            if want > self.free:
                break
            waiting.popleft()
            self.free -= want
            self.blocks[r] = want
            self.computed[r] = hit
            running.append(r)
            self.individuals.append(r)
            if math.isnan(self.first_sched[r]):
                self.first_sched[r] = self.t
            scheduled.append((r, take))
            p_tokens += take
            budget -= take
        return budget, p_tokens

    def _advance(self, r: int, take: int) -> int:
        """After the step: ``take`` more tokens of ``r`` computed. 0 still prefilling, 1 sampled, 2 finished."""
        self.computed[r] += take
        if self.computed[r] < self.prompt[r] + self.generated[r]:
            return 0
        self.generated[r] += 1
        if math.isnan(self.first_token[r]):
            self.first_token[r] = self.t
        if self.generated[r] < self.gen_target[r]:
            return 1
        self.finished[r] = self.t
        self.free += self.blocks[r]
        self.blocks[r] = 0
        self.running.remove(r)
        self.done += 1
        return 2

    def _run_step(self, p_tokens: int, d_tokens: int, ctx: int) -> float:
        dt = self.cost(p_tokens, d_tokens, ctx)
        self.t += dt
        self.busy += dt
        self.steps += 1
        # occupancy while the step runs, before finished requests free their blocks
        self.peak_blocks = max(self.peak_blocks, self.config.num_blocks - self.free)
        self.max_running = max(self.max_running, len(self.running))
        return dt

    def _exact_step(self) -> str:
        """One step, request by request, preempting when blocks run out.

        Returns ``"stepped"``, ``"preempted"`` (blocks were freed, nothing ran: the queue head goes next) or
        ``"idle"`` (nothing could be scheduled).
        """
        cfg, bs = self.config, self.bs
        running, waiting = self.running, self.waiting
        prompt, generated, computed, blocks = self.prompt, self.generated, self.computed, self.blocks
        budget = cfg.max_num_batched_tokens
        p_tokens = d_tokens = ctx = 0
        scheduled: list[tuple[int, int]] = []
        preempted_now = False
        i = 0
        while i < len(running) and budget > 0:
            r = running[i]
            target = prompt[r] + generated[r]  # tokens that must be in KV before the next token is sampled
            need = target - computed[r] if computed[r] < target else 1
            if need > 1 and not cfg.chunked_prefill and need > budget:
                break
            take = min(need, budget)
            want = -(-(computed[r] + take) // bs) - blocks[r]
            while want > self.free:
                victim = running.pop()
                self.free += blocks[victim]
                blocks[victim] = 0
                computed[victim] = 0
                self.preempted[victim] += 1
                self.preemptions += 1
                preempted_now = True
                waiting.appendleft(victim)
                if victim == r:
                    break
            if r not in running[i : i + 1]:
                break  # r itself was preempted
            self.free -= want
            blocks[r] += want
            scheduled.append((r, take))
            ctx += computed[r]
            if need > 1:
                p_tokens += take
            else:
                d_tokens += 1
            budget -= take
            i += 1
        if not preempted_now:
            budget, admitted = self._admit(budget, scheduled)
            p_tokens += admitted
        if not scheduled:
            return "preempted" if preempted_now else "idle"
        self._run_step(p_tokens, d_tokens, ctx)
        for r, take in scheduled:
            self._advance(r, take)
        return "stepped"

    def _fast_step(self) -> bool:
        """One step with decoders in aggregate; False (and nothing changed) when it needs ``_exact_step``."""
        bs, free = self.bs, self.free
        running, individuals = self.running, self.individuals
        prompt, generated, computed, blocks = self.prompt, self.generated, self.computed, self.blocks
        budget = self.config.max_num_batched_tokens
        n_dec = self.decoders
        want_total = self.phase[self.decode_steps % bs] if n_dec else 0
        ctx = self.ctx_base + n_dec * self.decode_steps
        p_tokens, d_tokens = 0, n_dec
        plan: list[tuple[int, int, int]] = []
        seen = 0  # decoders ahead of the individual being planned
        for k, r in enumerate(individuals):
            ahead = running.index(r) - k - seen
            if ahead > budget:
                return False  # the budget runs out among decoders
            budget -= ahead
            seen += ahead
            if budget <= 0:
                return False
            target = prompt[r] + generated[r]
            need = target - computed[r] if computed[r] < target else 1
            if need > 1 and not self.config.chunked_prefill and need > budget:
                return False
            take = min(need, budget)
            want = -(-(computed[r] + take) // bs) - blocks[r]
            want_total += want
            plan.append((r, take, want))
            ctx += computed[r]
            if need > 1:
                p_tokens += take
            else:
                d_tokens += 1
            budget -= take
        rest = n_dec - seen  # decoders after the last individual
        if rest > budget or want_total > free:
            return False
        budget -= rest
        # every running request is scheduled and the blocks suffice: no preemption in this step
        self.free = free - want_total
        for r, _, want in plan:
            blocks[r] += want
        scheduled = [(r, take) for r, take, _ in plan]
        budget, admitted = self._admit(budget, scheduled)
        p_tokens += admitted
        dt = self._run_step(p_tokens, d_tokens, ctx)
        completed = False
        if n_dec:
            self.decode_steps += 1
            d = self.decode_steps
            heap = self.finish_heap
            while heap and heap[0][0] <= d:
                _, r = heapq.heappop(heap)
                j, c0 = self.joined_at[r], self.tokens_at_join[r]
                c = c0 + d - j
                self.free += -(-c // bs)
                computed[r], generated[r], blocks[r] = c, self.gen_target[r], 0
                self.finished[r] = self.t
                running.remove(r)
                self.done += 1
                completed = True
                self.decoders -= 1
                self.phase[(j - c0) % bs] -= 1
                self.ctx_base -= c0 - j
                self.joined_at[r] = -1
        for r, take in scheduled:
            state = self._advance(r, take)
            if state:
                individuals.remove(r)
                if state == 1:
                    self._join(r)
                else:
                    completed = True
        if p_tokens == 0 and not completed and not individuals and self.cost.c_ctx == 0:
            self._skip_decode_steps(dt)
        return True

    def _skip_decode_steps(self, dt: float) -> None:
        """Apply at once the run of identical decode-only steps that follows a decode-only step.

        They repeat until a request finishes, an arrival could be admitted, or blocks run short.
        """
        jump = self.finish_heap[0][0] - self.decode_steps - 1
        if not self.waiting and self.nxt < self.n:
            jump = min(jump, _steps_before(self.arr[self.arrivals[self.nxt]] - self.t, dt))
        if self.next_pause < len(self.pauses):
            jump = min(jump, _steps_before(self.pauses[self.next_pause][0] - self.t, dt))
        if jump <= 0:
            return
        # blocks needed by j more steps: the decoders whose phase comes up in those steps
        bs, n_dec, phase, d = self.bs, self.decoders, self.phase, self.decode_steps
        cycles = min(jump // bs, self.free // n_dec)
        steps, used = cycles * bs, cycles * n_dec
        while steps < jump:
            more = phase[(d + steps) % bs]
            if used + more > self.free:
                break
            used += more
            steps += 1
        if steps:
            self.decode_steps += steps
            self.free -= used
            self.t += steps * dt
            self.busy += steps * dt
            self.steps += steps

    def run(self, fast_forward: bool) -> None:
        n, arr, arrivals, pauses = self.n, self.arr, self.arrivals, self.pauses
        while self.done < n:
            if self.next_pause < len(pauses) and self.t >= pauses[self.next_pause][0]:
                self.t = max(self.t, pauses[self.next_pause][1])
                self.next_pause += 1
                continue
            while self.nxt < n and arr[arrivals[self.nxt]] <= self.t:
                self.waiting.append(arrivals[self.nxt])
                self.nxt += 1
            if not self.running and not self.waiting:
                self.t = arr[arrivals[self.nxt]]
                continue
            if not (fast_forward and self.running and self._fast_step()):
                if self.decoders:
                    self._dissolve()
                outcome = self._exact_step()
                if fast_forward:
                    self._regroup()
                else:
                    self.individuals.clear()
                if outcome == "preempted":
                    continue
                if outcome == "idle":
                    if self.nxt < n and not self.running:
                        self.t = max(self.t, arr[arrivals[self.nxt]])
                        continue
                    self.notes.append(f"scheduler stalled at t={self.t:.3f}s with {len(self.waiting)} waiting")
                    for r in list(self.waiting) + self.running:
                        self.status[r] = "stalled"
                        self.done += 1
                    break
            self.max_waiting = max(self.max_waiting, len(self.waiting))


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
    s = _Scheduler(arr, inp, out, config, cost, cached, list(pauses or []))
    s.run(fast_forward)

    fs = np.array(s.first_sched)
    ft = np.array(s.first_token)
    fin = np.array(s.finished)
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
            "num_preemptions": np.array(s.preempted, dtype=np.int64),
            "status": s.status,
        }
    ).with_columns(pl.col(pl.Float64).fill_nan(None))
    return ReplayResult(frame, s.steps, s.preemptions, s.busy, s.max_running, s.max_waiting, s.peak_blocks, s.notes)


# -- replaying a stored run: configuration, calibration, validation, what-ifs ---------------------------------

# --what-if keys: DESIGN.md's spellings, and the shorter ones lltrace first used (aliases).
WHAT_IF_KEYS = (
    "gpu",
    "weights",
    "kv_dtype",
    "tp",
    "max_num_seqs",
    "max_num_batched_tokens",
    "chunked_prefill",
    "kv_blocks",
    "kv_memory_gb",
    "block_size",
    "rate_scale",
    "prefix_caching",
    "quant",
    "rate",
    "prefix_cache",
)
WHAT_IF_ALIASES = {"quant": "weights", "rate": "rate_scale", "prefix_cache": "prefix_caching"}
HARDWARE_WHAT_IFS = ("gpu", "weights", "quant", "kv_dtype")  # valued by a name (a GPU, a precision)
_SWITCH = {"on": True, "off": False, "true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


def _switch(key: str, value: float | str) -> bool:
    word = str(int(value)) if isinstance(value, float) and value in (0.0, 1.0) else str(value).strip().lower()
    if word not in _SWITCH:
        raise AnalysisError(f"--what-if {key}={value}: expected on or off")
    return _SWITCH[word]


def _number(key: str, value: float | str) -> float:
    try:
        return float(value)
    except ValueError:
        raise AnalysisError(f"--what-if {key}={value}: expected a number") from None


def _kv_memory(model: Any, gpu: Any, quant: str, tp: int = 1, memory_fraction: float = 0.9) -> float:
    """Bytes left for the KV cache: ``memory_fraction`` of ``tp`` GPUs' memory less the weights at ``quant``."""
    return tp * gpu.memory_gb * 1e9 * memory_fraction - model.params_b * 1e9 * BYTES_PER_PARAM[quant]


def _kv_blocks_moved(
    blocks: int,
    model: Any,
    here: tuple[Any, str, str, int],
    there: tuple[Any, str, str, int],
    memory_fraction: float = 0.9,
) -> tuple[int, str]:
    """The run's KV blocks at another (GPU, weights, KV dtype, TP degree): scaled by the KV bytes the memory
    left after the weights holds, there against here. Without the model only a KV dtype change is known."""
    (g0, q0, kv0, tp0), (g1, q1, kv1, tp1) = here, there
    kv_ratio = BYTES_PER_PARAM[kv0] / BYTES_PER_PARAM[kv1]
    if model is None or g0 is None:
        if (g0, q0, tp0) == (g1, q1, tp1):
            return int(blocks * kv_ratio), f"blocks x {kv_ratio:g} (KV bytes per element {kv0} -> {kv1})"
        return blocks, "kept: the model is unknown (--model), so the memory its weights leave is unknown"

    def free(g: Any, q: str, tp: int) -> float:
        return _kv_memory(model, g, q, tp, memory_fraction)

    if free(g1, q1, tp1) <= 0:
        raise AnalysisError(f"{model.name} at {q1} does not fit in {tp1} x {g1.name}")
    ratio = free(g1, q1, tp1) / free(g0, q0, tp0) * kv_ratio
    return int(blocks * ratio), (
        f"blocks x {ratio:.3f}: (TP x memory x {memory_fraction} - weights) / KV bytes per token, "
        f"{tp1} x {g1.name} {q1}/{kv1} over {tp0} x {g0.name} {q0}/{kv0}"
    )


def transfer_tensor_parallel(cost: StepCost, model: Any, gpu: Any, tp_from: int, tp_to: int) -> tuple[StepCost, dict]:
    """Move a step cost to another tensor-parallel degree (an estimate).

    Weight reads, prefill FLOPs and KV reads split over the GPUs (x ``tp_from / tp_to``); each token's
    activations are all-reduced twice per layer (ring: ``2 (tp - 1) / tp`` of ``hidden`` x 2 bytes each way
    over the GPU's link). Only the bandwidth term: NCCL's per-call latency (microseconds per all-reduce) is
    not in the catalog, so communication is a lower bound.
    """
    if tp_to < 1:
        raise AnalysisError(f"--what-if tp={tp_to}: expected a degree of 1 or more")
    if tp_to > 1 and not gpu.link_gbps:
        raise AnalysisError(f"--what-if tp: the catalog has no GPU-to-GPU bandwidth for {gpu.name}")

    def comm(tp: int) -> float:
        if tp == 1:
            return 0.0
        return model.layers * 2 * 2 * (tp - 1) / tp * model.hidden * 2 / (gpu.link_gbps * 1e9)

    split = tp_from / tp_to
    new = StepCost(
        c0=cost.c0 * split,
        c_prefill=max(0.0, (cost.c_prefill - comm(tp_from)) * split + comm(tp_to)),
        c_decode=max(0.0, (cost.c_decode - comm(tp_from)) * split + comm(tp_to)),
        c_ctx=cost.c_ctx * split,
        overhead=cost.overhead,
        steps=cost.steps,
        r2=cost.r2,
        mape=cost.mape,
    )
    return new, {"per_step": split, "all_reduce_s_per_token": comm(tp_to), "tp_from": tp_from, "tp_to": tp_to}


def reference_step_cost(
    model: str,
    gpu: str,
    *,
    quant: str = "bf16",
    kv_dtype: str = "bf16",
    mean_context: float = 1024.0,
    block_size: int = 16,
    memory_fraction: float = 0.9,
) -> tuple[StepCost, int, dict[str, Any]]:
    """A step cost and KV capacity for ``model`` on ``gpu`` from the catalog's roofline (an estimate).

    Per step: every weight read once at the GPU's achievable bandwidth (the catalog's A100 fractions are
    fitted to real Llama-2-7B operator timings, shared/data/gpu_op_profiles). Per prefill token: 2 FLOPs
    per active parameter at achievable FLOP/s. Per decode token: its KV cache of ``mean_context`` tokens
    read once (memory-bound decode, valid below the roofline's ridge batch). KV blocks: ``memory_fraction``
    of the GPU's memory less the weights, divided by the KV bytes of a block.
    """
    from lltrace.catalog import gpu_or_error, model_or_error

    for q in (quant, kv_dtype):
        if q not in BYTES_PER_PARAM:
            raise AnalysisError(f"unknown precision {q!r}; known: {', '.join(BYTES_PER_PARAM)}")
    m, g = model_or_error(model), gpu_or_error(gpu)
    bw = g.hbm_gbps * 1e9 * g.achievable_bw_fraction
    flops = g.peak_flops(quant) * g.achievable_flops_fraction
    weight_bytes = m.active_params_b * 1e9 * BYTES_PER_PARAM[quant]
    kv_token = m.kv_bytes_per_token(BYTES_PER_PARAM[kv_dtype])
    cost = StepCost(
        c0=weight_bytes / bw, c_prefill=2 * m.active_params_b * 1e9 / flops, c_decode=kv_token * mean_context / bw
    )
    free = _kv_memory(m, g, quant, 1, memory_fraction)
    if free <= 0:
        raise AnalysisError(f"{m.name} at {quant} does not fit in {g.name}'s {g.memory_gb:g} GB")
    blocks = int(free // (kv_token * block_size))
    info = {"model": m.name, "gpu": g.name, "quant": quant, "kv_dtype": kv_dtype, "mean_context_tokens": mean_context}
    return cost, blocks, info


def transfer_step_cost(
    cost: StepCost,
    gpu_from: Any,
    gpu_to: Any,
    *,
    quant_from: str = "bf16",
    quant_to: str = "bf16",
    kv_from: str = "bf16",
    kv_to: str = "bf16",
) -> tuple[StepCost, dict[str, float]]:
    """Move a calibrated step cost to another GPU / precision with the roofline (an estimate).

    The per-step term (every weight read once) scales with achievable HBM bandwidth and bytes per
    parameter; the per-decode-token term (its KV read) with bandwidth and bytes per KV element; the
    per-prefill-token term (matmul FLOPs) with achievable FLOP/s at the weight precision. The overhead
    between steps (CPU side) is kept. Returns the new cost and the three ratios applied.
    """
    for q in (quant_from, quant_to, kv_from, kv_to):
        if q not in BYTES_PER_PARAM:
            raise AnalysisError(f"unknown precision {q!r}; known: {', '.join(BYTES_PER_PARAM)}")
    bw = (gpu_from.hbm_gbps * gpu_from.achievable_bw_fraction) / (gpu_to.hbm_gbps * gpu_to.achievable_bw_fraction)
    fl = (gpu_from.peak_flops(quant_from) * gpu_from.achievable_flops_fraction) / (
        gpu_to.peak_flops(quant_to) * gpu_to.achievable_flops_fraction
    )
    weights = bw * BYTES_PER_PARAM[quant_to] / BYTES_PER_PARAM[quant_from]
    kv = bw * BYTES_PER_PARAM[kv_to] / BYTES_PER_PARAM[kv_from]
    new = StepCost(
        c0=cost.c0 * weights,
        c_prefill=cost.c_prefill * fl,
        c_decode=cost.c_decode * kv,
        c_ctx=cost.c_ctx * kv,
        overhead=cost.overhead,
        steps=cost.steps,
        r2=cost.r2,
        mape=cost.mape,
    )
    return new, {"per_step": weights, "per_prefill_token": fl, "per_decode_token": kv}


_METRICS = ("queue_s", "ttft_s", "tpot_s", "e2e_s")


def _setting(value: Any, origin: str) -> dict[str, Any]:
    return {"value": value, "origin": origin}


def engine_config_for(run: Any, steps: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """The replayed engine's limits, each with where it came from (log, inferred or vLLM default)."""
    logged: dict[str, Any] = {}
    for src in run.metadata.get("sources", []):
        logged.update(src.get("engine_config") or {})
    out: dict[str, dict[str, Any]] = {}
    kv_tokens = logged.get("kv_cache_tokens")
    blocks = logged.get("num_gpu_blocks_override")
    if "block_size" in logged:
        out["block_size"] = _setting(logged["block_size"], "server log args")
    elif kv_tokens and blocks:
        out["block_size"] = _setting(kv_tokens // blocks, "server log: KV cache tokens / blocks")
    else:
        out["block_size"] = _setting(16, "vLLM default (not in the sources)")
    bs = out["block_size"]["value"]
    if blocks:
        out["kv_blocks"] = _setting(blocks, "server log args")
    elif kv_tokens:
        out["kv_blocks"] = _setting(kv_tokens // bs, "server log: KV cache size")
    else:
        out["kv_blocks"] = _setting(None, "unknown")
    out["max_num_seqs"] = (
        _setting(logged["max_num_seqs"], "server log args")
        if "max_num_seqs" in logged
        else _setting(256, "vLLM default (not in the sources)")
    )
    if "max_num_batched_tokens" in logged:
        out["max_num_batched_tokens"] = _setting(logged["max_num_batched_tokens"], "server log args")
    elif steps.height >= 100:  # a long step log: the budget must have bound at least once under load
        largest = int((steps["prefill_tokens"].fill_null(0) + steps["decode_tokens"].fill_null(0)).max() or 0)
        # the budget is a power of two in every vLLM default; the largest step is at most the budget
        budget = 1 << max(largest - 1, 1).bit_length()
        out["max_num_batched_tokens"] = _setting(budget, f"inferred: largest step had {largest} tokens")
    else:
        out["max_num_batched_tokens"] = _setting(8192, "vLLM default (not in the sources)")
    if "enable_chunked_prefill" in logged:
        out["chunked_prefill"] = _setting(bool(logged["enable_chunked_prefill"]), "server log args")
    else:
        out["chunked_prefill"] = _setting(True, "vLLM V1 default (not in the sources)")
    tp = logged.get("tensor_parallel_size")
    out["tp"] = _setting(int(tp), "server log args") if tp else _setting(1, "assumed: the sources name no TP degree")
    return out


def _run_model(run: Any, model: str | None, reference_model: str | None) -> tuple[Any, str | None]:
    """The catalog model of the run: the option, the reference, else the model the server log names."""
    from lltrace.catalog import find_model, model_or_error

    if model:
        return model_or_error(model), "option --model"
    if reference_model:
        return model_or_error(reference_model), "reference"
    for src in run.metadata.get("sources", []):
        named = (src.get("engine_config") or {}).get("model")
        if named:
            found = find_model(named) or find_model(named.rstrip("/").rsplit("/", 1)[-1])
            if found:
                return found, f"server log args: {named}"
    return None, None


def _summary(frame: pl.DataFrame) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for m in _METRICS:
        col = frame[m].drop_nulls() if m in frame.columns else pl.Series([], dtype=pl.Float64)
        out[m] = {
            "mean": float(col.mean()) if col.len() else None,  # type: ignore[arg-type]
            "p50": float(col.median()) if col.len() else None,  # type: ignore[arg-type]
            "p90": float(col.quantile(0.9, "linear")) if col.len() else None,  # type: ignore[arg-type]
        }
    return out


def _measured(run: Any) -> pl.DataFrame:
    q = run.table("requests")
    need = {"arrival_s", "input_tokens", "output_tokens"}
    if q.height == 0 or not need <= set(q.columns):
        raise AnalysisError("replay needs requests with arrival time, input and output tokens; this run has none")
    q = q.filter(
        pl.col("arrival_s").is_not_null() & pl.col("input_tokens").is_not_null() & (pl.col("output_tokens") > 0)
    ).sort("arrival_s")
    tpot = pl.when(pl.col("output_tokens") > 1).then(
        (pl.col("e2e_s") - pl.col("ttft_s")) / (pl.col("output_tokens") - 1)
    )
    return q.with_columns(tpot.alias("tpot_s"))


def _prefix_hits(run: Any, measured: pl.DataFrame) -> tuple[np.ndarray | None, str | None]:
    """Prompt tokens served from the prefix cache per request, and how that is known.

    The engine's own ``cached_tokens`` where the sources give them; else, from per-request prefix block
    hashes (Mooncake ``hash_ids``), the leading blocks already seen in an earlier request — an upper bound
    that assumes the cache kept every block. None where the sources say nothing about reuse.
    """
    if "cached_tokens" in measured.columns and measured["cached_tokens"].null_count() < measured.height:
        return measured["cached_tokens"].fill_null(0).to_numpy(), "measured (engine cached tokens)"
    if "prefix_block_ids" not in measured.columns or measured["prefix_block_ids"].null_count() == measured.height:
        return None, None
    block = next(
        (int(src["prefix_block_tokens"]) for src in run.metadata.get("sources", []) if src.get("prefix_block_tokens")),
        None,
    )
    if not block:
        return None, None
    seen: set[int] = set()
    hits = np.zeros(measured.height, dtype=np.int64)
    for i, ids in enumerate(measured["prefix_block_ids"].to_list()):
        ids = ids or []
        lead = 0
        while lead < len(ids) and ids[lead] in seen:
            lead += 1
        hits[i] = lead * block
        seen.update(ids)
    return hits, f"estimated: leading {block}-token prefix blocks seen in earlier requests (cache keeps all)"


def _counted_preemptions(run: Any) -> float | None:
    """The engine's cumulative preemption counter at its last reading (metrics or stats log), else NULL."""
    stats = run.table("engine_stats")
    if stats.height and "preemptions_total" in stats.columns and stats["preemptions_total"].null_count() < stats.height:
        return float(stats["preemptions_total"].max())  # type: ignore[arg-type]
    return None


def _decoding_at(times: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """How many of the windows [start, end) are open at each of ``times``."""
    return (np.searchsorted(np.sort(start), times, "right") - np.searchsorted(np.sort(end), times, "right")).astype(
        float
    )


@dataclass(frozen=True)
class Outside:
    """Time a request spends outside the engine: ``pre + per_decoding * (requests decoding when it arrives)``
    before its first token, ``post`` after its last one (medians / least squares over the run's requests)."""

    pre: float = 0.0
    per_decoding: float = 0.0
    post: float = 0.0


def _outside_engine(requests: pl.DataFrame) -> Outside:
    """Fit :class:`Outside` to measured requests; zeros where the sources do not measure it.

    Client-measured TTFT and e2e include the HTTP/frontend path (tokenisation, detokenisation, streaming)
    that the scheduler model does not simulate. Where the frontend shares CPUs with the engine it slows
    with load, so the time before the first token is regressed on the number of requests decoding (and so
    streaming tokens through the frontend) when the request arrived.
    """
    cols = {"ttft_s", "queue_s", "prefill_s", "e2e_s", "decode_s", "first_token_s", "arrival_s"}
    if not cols <= set(requests.columns):
        return Outside()
    rows = requests.drop_nulls(list(cols))
    if rows.height < 10:
        return Outside()
    pre = (rows["ttft_s"] - rows["queue_s"] - rows["prefill_s"]).to_numpy()
    post = (rows["e2e_s"] - rows["ttft_s"] - rows["decode_s"]).to_numpy()
    start = rows["first_token_s"].to_numpy()
    decoding = _decoding_at(rows["arrival_s"].to_numpy(), start, start + rows["decode_s"].to_numpy())
    a, b = _nonneg_lstsq([np.ones_like(pre), decoding], pre)
    return Outside(float(a), float(b), max(0.0, float(np.median(post))))


def _rates(cost: StepCost) -> dict[str, float | None]:
    """A step cost read as the figures people quote: one decode step of one request, and prefill tokens/s."""
    return {
        "decode_s_per_token_batch1": cost.c0 + cost.overhead + cost.c_decode,
        "prefill_tokens_per_s": 1.0 / cost.c_prefill if cost.c_prefill > 0 else None,
    }


def _makespan(frame: pl.DataFrame) -> float | None:
    """First arrival to last finish of a replay, seconds (None when nothing finished)."""
    ends = (frame["arrival_s"] + frame["e2e_s"]).drop_nulls()
    return None if ends.len() == 0 else float(ends.max()) - float(frame["arrival_s"].min())  # type: ignore[arg-type]


def _overload_note(frame: pl.DataFrame, factor: float = 1.5) -> list[str]:
    """A note when the engine could not keep up: the last request finishes long after the last arrival."""
    arrivals = float(frame["arrival_s"].max()) - float(frame["arrival_s"].min())  # type: ignore[arg-type]
    span = _makespan(frame)
    if span is None or arrivals <= 0 or span < factor * arrivals:
        return []
    return [
        f"overloaded: the last request finishes {span:,.0f} s after the first arrival, {span / arrivals:.1f}x the "
        f"{arrivals:,.0f} s over which requests arrive; the queue grows through the run and latencies are backlog "
        "(serve this trace with more engines, or replay a slice of it)"
    ]


def _mape(pred: float | None, real: float | None) -> float | None:
    # a relative error against a measured value under a millisecond is noise, not accuracy
    if pred is None or real is None or abs(real) < 1e-3:
        return None
    return abs(pred - real) / abs(real)


def replay(
    path_or_run: Any,
    *,
    what_ifs: dict[str, float | str] | list[tuple[str, float | str]] | None = None,
    store: Any = None,
    holdout: float = 0.3,
    gpu: str | None = None,
    quant: str = "bf16",
    kv_dtype: str = "bf16",
    reference: str | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """The replay document (``lltrace replay --json``): calibration, validation, baseline, what-ifs.

    Calibration fits :class:`StepCost` to the run's ``engine_steps`` from the engine log, or without one to
    the requests' own prefill and decode times. Validation fits on the first ``1 - holdout`` of the requests
    (by arrival) only, replays every request (so the queue the
    held-out requests meet builds up as it did) and scores the held-out requests against their measured
    latencies. The baseline and each what-if use the fit on all steps; what-if figures are estimates.
    ``what_ifs`` is a ``{key: value}`` dict or ``(key, value)`` pairs (a key may repeat: one case each); keys
    are :data:`WHAT_IF_KEYS`. ``model`` (else the reference's, else the model the server log names, when the
    catalog knows it) lets ``gpu``, ``weights``, ``kv_dtype`` and ``tp`` move the KV capacity with the memory
    the weights leave, and is needed by ``tp`` and ``kv_memory_gb``.
    Engine stalls in the step log (:func:`engine_stalls`: a step far slower than its tokens explain, such as
    a profiler writing its trace) are left out of the fit and replayed as pauses at their measured times in
    the baseline and what-ifs; the validation uses only those before the split.
    The document is kept in the store as the run's latest replay (``lltrace report`` shows it).
    ``gpu`` (else the GPU detected in the run), ``quant`` and ``kv_dtype`` describe the recorded run; the
    ``gpu``, ``quant`` and ``kv_dtype`` what-ifs move its step cost with :func:`transfer_step_cost`.
    ``reference`` (``"MODEL@GPU"``) replaces calibration with :func:`reference_step_cost` — for arrival
    traces with no timings (Azure, Mooncake, BurstGPT); the validation then scores it where the run has
    measured latencies, and is absent where it has none.
    """
    from lltrace.report import run_of
    from lltrace.store import Store

    run = run_of(path_or_run, store if isinstance(store, Store) else Store(store))
    cases = list(what_ifs.items()) if isinstance(what_ifs, dict) else list(what_ifs or [])
    unknown = sorted({k for k, _ in cases} - set(WHAT_IF_KEYS))
    if unknown:
        raise AnalysisError(f"what-if keys not modelled yet: {', '.join(unknown)} (known: {', '.join(WHAT_IF_KEYS)})")
    steps = run.table("engine_steps")
    if steps.height and "source" in steps.columns:
        steps = steps.filter(pl.col("source") == "log")
    from_log = steps.height >= 3 and "wall_s" in steps.columns
    measured = _measured(run)
    settings = engine_config_for(run, steps)
    ref = None
    if reference:
        ref_model, at, ref_gpu = reference.partition("@")
        if not at:
            raise AnalysisError(f"--reference {reference!r}: expected MODEL@GPU, e.g. llama-2-7b@A100-80GB")
        inp, outp = measured["input_tokens"].cast(pl.Float64), measured["output_tokens"].cast(pl.Float64)
        context = float(inp.mean() + outp.mean() / 2)  # type: ignore[operator]
        ref = reference_step_cost(
            ref_model,
            ref_gpu,
            quant=quant,
            kv_dtype=kv_dtype,
            mean_context=context,
            block_size=int(settings["block_size"]["value"]),
        )
        gpu = gpu or ref[2]["gpu"]
        if settings["kv_blocks"]["value"] is None:
            settings["kv_blocks"] = _setting(ref[1], f"reference: {ref[2]['gpu']} memory x 0.9 less the weights")
    elif not from_log and ("decode_s" not in measured.columns or measured["decode_s"].drop_nulls().len() < 10):
        raise AnalysisError(
            "this run has no engine timings to calibrate on (no step log, no per-request decode times); "
            "give a reference, e.g. --reference llama-2-7b@A100-80GB"
        )
    if settings["kv_blocks"]["value"] is None:
        raise AnalysisError("replay needs the KV cache size (server log 'KV cache size' or num_gpu_blocks_override)")

    def config(overrides: dict[str, Any]) -> EngineConfig:
        v = {k: s["value"] for k, s in settings.items()} | overrides
        return EngineConfig(
            num_blocks=int(v["kv_blocks"]),
            block_size=int(v["block_size"]),
            max_num_seqs=int(v["max_num_seqs"]),
            max_num_batched_tokens=int(v["max_num_batched_tokens"]),
            chunked_prefill=bool(v["chunked_prefill"]),
        )

    arrival = measured["arrival_s"].to_numpy()
    lengths = (measured["input_tokens"].to_numpy(), measured["output_tokens"].to_numpy())

    t0 = float(arrival.min())
    # the first (1 - holdout) of the requests by arrival calibrate; the rest are held out
    split = float(arrival[min(len(arrival) - 1, int(round((1 - holdout) * len(arrival))))])
    stalls = early_stalls = None
    if ref is not None:
        early = cost = ref[0]
        source = f"reference {ref[2]['model']} on {ref[2]['gpu']} (roofline, not fitted to this run)"
    elif from_log:
        early, early_stalls = fit_step_cost_without_stalls(steps.filter(pl.col("start_s") < split))
        cost, stalls = fit_step_cost_without_stalls(steps)
        source = "engine_steps (server log iteration lines)"
    else:
        early = fit_step_cost_from_requests(measured.filter(pl.col("arrival_s") < split))
        cost = fit_step_cost_from_requests(measured)
        source = "per-request decode times (no step log): decode steps, mean decode batch, prompts prefilled meanwhile"
    before = measured.filter(pl.col("arrival_s") < split)
    outside_early = _outside_engine(before)
    outside = _outside_engine(measured)

    hits, hits_basis = _prefix_hits(run, measured)

    def pauses(found: pl.DataFrame | None) -> list[tuple[float, float]]:
        # a measured stall is replayed at its time: the engine starts no step for its excess
        if found is None:
            return []
        return [(s, s + e) for s, e in zip(found["start_s"].to_list(), found["excess_s"].to_list(), strict=True)]

    def run_sim(
        arr: np.ndarray,
        cfg: EngineConfig,
        c: StepCost,
        out: Outside,
        cache: bool = True,
        stalled: pl.DataFrame | None = None,
    ) -> ReplayResult:
        # the engine sees a request out.pre after the client sent it (plus the load term, added to the
        # client's view only); the client sees its end out.post after the engine finished it
        res = simulate(arr + out.pre, *lengths, cfg, c, cached_tokens=hits if cache else None, pauses=pauses(stalled))
        f = res.requests
        seen = f["arrival_s"].to_numpy()
        first = seen + f["ttft_s"].fill_null(np.inf).to_numpy()
        last = seen + f["e2e_s"].fill_null(np.inf).to_numpy()
        extra = out.per_decoding * _decoding_at(seen, first, last)
        res.requests = f.with_columns(
            (pl.col("arrival_s") - out.pre).alias("arrival_s"),
            pl.col("ttft_s") + out.pre + pl.Series(extra),
            pl.col("e2e_s") + out.pre + pl.Series(extra) + out.post,
        )
        return res

    real_held = measured.filter(pl.col("arrival_s") >= split)
    real_s = _summary(real_held)
    validation: dict[str, Any] | None = None  # an arrival trace: nothing measured to score against
    if any(real_s[m]["mean"] is not None for m in _METRICS):
        # only what was known before the split: the early fit and the stalls measured before it
        held = run_sim(arrival, config({}), early, outside_early, stalled=early_stalls).requests
        held = held.filter(pl.col("arrival_s") >= split)
        pred_s = _summary(held)
        validation = {
            "method": f"step cost fitted on data before the arrival of the first {1 - holdout:.0%} of requests "
            "(engine stalls after it unknown to the replay); "
            f"all requests replayed; the {real_held.height} requests arriving after it scored",
            "requests": real_held.height,
            "replayed": pred_s,
            "measured": real_s,
            "mape": {m: {q: _mape(pred_s[m][q], real_s[m][q]) for q in ("mean", "p50", "p90")} for m in _METRICS},
            "abs_error_s": {
                m: {
                    q: None if pred_s[m][q] is None or real_s[m][q] is None else pred_s[m][q] - real_s[m][q]
                    for q in ("mean", "p50", "p90")
                }
                for m in _METRICS
            },
        }
        # DESIGN.md's flat keys, e.g. ttft_mean_mape, queue_median_mape
        for m in _METRICS:
            for q, word in (("mean", "mean"), ("p50", "median"), ("p90", "p90")):
                validation[f"{m.removesuffix('_s')}_{word}_mape"] = validation["mape"][m][q]
    base = run_sim(arrival, config({}), cost, outside, stalled=stalls)
    measured_preemptions = _counted_preemptions(run)

    def outcome(res: ReplayResult) -> dict[str, Any]:
        return {
            "summary": _summary(res.requests),
            "makespan_s": _makespan(res.requests),
            "queue_median_s": _summary(res.requests)["queue_s"]["p50"],
            "preemptions": res.preemptions,
            "steps": res.steps,
            "busy_s": res.busy_s,
            "max_running": res.max_running,
            "max_waiting": res.max_waiting,
            "not_finished": int((res.requests["status"] != "ok").sum()),
            "notes": res.notes + _overload_note(res.requests),
        }

    baseline = outcome(base) | {"measured": _summary(measured), "measured_preemptions": measured_preemptions}
    results = []
    from lltrace.analysis import _resolve_gpu
    from lltrace.catalog import gpu_or_error

    here_gpu, _ = _resolve_gpu(run, gpu)
    the_model, model_origin = _run_model(run, model, ref[2]["model"] if ref is not None else None)
    run_tp = int(settings["tp"]["value"])

    def scenario(key: str, value: float | str) -> tuple[np.ndarray, EngineConfig, StepCost, bool, dict[str, Any]]:
        k = WHAT_IF_ALIASES.get(key, key)
        arr, moved, cache, extra = arrival, cost, True, {}
        overrides: dict[str, Any] = {}
        if k in ("kv_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens"):
            overrides[k] = int(_number(key, value))
        elif k == "chunked_prefill":
            overrides[k] = _switch(key, value)
        elif k == "rate_scale":
            arr = t0 + (arrival - t0) / _number(key, value)
        elif k == "prefix_caching":
            cache = _switch(key, value)
            if cache and hits is None:
                raise AnalysisError(f"--what-if {key}=on: the sources say nothing about prefix reuse")
        elif k == "kv_memory_gb":
            if the_model is None:
                raise AnalysisError(f"--what-if {key}: the model is unknown, so its KV bytes per token; use --model")
            per_block = the_model.kv_bytes_per_token(BYTES_PER_PARAM[kv_dtype]) * int(settings["block_size"]["value"])
            overrides["kv_blocks"] = int(_number(key, value) * 1e9 // per_block)
            extra["kv_capacity"] = f"{value} GB / {per_block:,.0f} bytes per block ({the_model.name}, KV {kv_dtype})"
        elif k in HARDWARE_WHAT_IFS or k == "tp":
            if here_gpu is None:
                raise AnalysisError(f"--what-if {key}=...: the run's GPU is unknown; name it with --gpu")
            there_gpu = gpu_or_error(str(value)) if k == "gpu" else here_gpu
            q1 = str(value) if k == "weights" else quant
            kv1 = str(value) if k == "kv_dtype" else kv_dtype
            tp1 = int(_number(key, value)) if k == "tp" else run_tp
            if k == "tp":
                if the_model is None:
                    raise AnalysisError(f"--what-if {key}: the model is unknown (its layers and width); use --model")
                moved, ratios = transfer_tensor_parallel(cost, the_model, here_gpu, run_tp, tp1)
            else:
                moved, ratios = transfer_step_cost(
                    cost, here_gpu, there_gpu, quant_from=quant, quant_to=q1, kv_from=kv_dtype, kv_to=kv1
                )
            blocks, how = _kv_blocks_moved(
                int(settings["kv_blocks"]["value"]),
                the_model,
                (here_gpu, quant, kv_dtype, run_tp),
                (there_gpu, q1, kv1, tp1),
            )
            overrides["kv_blocks"] = blocks
            before, after = _rates(cost), _rates(moved)
            extra |= {
                "cost_ratios": ratios,
                "kv_capacity": how,
                "step_rates": after,
                "speedup": {
                    "decode_batch1": before["decode_s_per_token_batch1"] / after["decode_s_per_token_batch1"],
                    "prefill": after["prefill_tokens_per_s"] / before["prefill_tokens_per_s"]
                    if before["prefill_tokens_per_s"] and after["prefill_tokens_per_s"]
                    else None,
                },
            }
        return arr, config(overrides), moved, cache, extra

    for key, value in cases:
        arr, cfg, moved, cache, extra = scenario(key, value)
        res = outcome(run_sim(arr, cfg, moved, outside, cache, stalled=stalls)) | extra
        res["kv_blocks"] = cfg.num_blocks
        res["what_if"] = {key: value}
        res["basis"] = "estimated"
        res["delta"] = {
            m: {
                s: (
                    None
                    if res["summary"][m][s] is None or baseline["summary"][m][s] is None
                    else res["summary"][m][s] - baseline["summary"][m][s]
                )
                for s in ("mean", "p50", "p90")
            }
            for m in _METRICS
        }
        results.append(res)
    total = run.table("requests").height
    doc = {
        "run": run.id,
        "requests": {
            "replayed": measured.height,
            "left_out": total - measured.height,
            "why_left_out": "no arrival time, no input length, or no output tokens (failed or unknown)",
        },
        "engine": settings,
        "model": None if the_model is None else {"name": the_model.name, "origin": model_origin},
        "calibration": {
            "source": source,
            "form": "step_s = c0 + overhead + c_prefill * prefill_tokens + c_decode * decode_tokens",
            "c0_s": cost.c0,
            "overhead_s": cost.overhead,
            "c_prefill_s_per_token": cost.c_prefill,
            "c_decode_s_per_token": cost.c_decode,
            "steps": cost.steps,
            "outside_engine_s": {
                "before_first_token": outside.pre,
                "before_first_token_per_decoding_request": outside.per_decoding,
                "after_last_token": outside.post,
            },
            "r2": cost.r2,
            "step_mape": cost.mape,
            "rates": _rates(cost),
            "stalls": None
            if stalls is None
            else [
                {
                    "start_s": r["start_s"] - t0,
                    "duration_s": r["excess_s"],
                    "evidence": f"step {r['step_id']} took {r['wall_s']:.3f} s, {r['predicted_s'] * 1e3:.1f} ms "
                    "predicted from its tokens; left out of the fit, replayed as a pause at its time",
                }
                for r in stalls.iter_rows(named=True)
            ],
        },
        "validation": validation,
        "prefix_cache": None
        if hits is None
        else {
            "basis": hits_basis,
            "hit_tokens": int(hits.sum()),
            "share_of_prompt_tokens": float(hits.sum() / max(1, int(lengths[0].sum()))),
        },
        "baseline": baseline,
        "whatifs": results,
    }
    run.store.save_replay(run.id, doc)
    return doc


def what_if_label(what_if: dict[str, Any]) -> str:
    """``kv_blocks=80``-style name of a what-if's settings."""
    return " ".join(f"{k}={x:g}" if isinstance(x, float) else f"{k}={x}" for k, x in what_if.items())


def replay_cases(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows the terminal and the report show for a replay document: measured, replayed, each what-if.

    Each row: ``case``, ``basis`` (measured / replayed / estimated), ``queue_p50_s``, ``ttft_mean_s``,
    ``tpot_mean_s``, ``e2e_mean_s``, ``e2e_p90_s`` and ``preemptions`` (None where unknown).
    """
    base = doc["baseline"]
    rows = [("measured", "measured", base["measured"], base["measured_preemptions"])]
    rows.append(("replayed", "replayed", base["summary"], base["preemptions"]))
    rows += [(what_if_label(w["what_if"]), "estimated", w["summary"], w["preemptions"]) for w in doc["whatifs"]]
    return [
        {
            "case": case,
            "basis": basis,
            "queue_p50_s": s["queue_s"]["p50"],
            "ttft_mean_s": s["ttft_s"]["mean"],
            "tpot_mean_s": s["tpot_s"]["mean"],
            "e2e_mean_s": s["e2e_s"]["mean"],
            "e2e_p90_s": s["e2e_s"]["p90"],
            "preemptions": preemptions,
        }
        for case, basis, s, preemptions in rows
    ]


def replay_notes(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(case, note) for every note of the baseline and the what-ifs (overload, a stalled scheduler)."""
    cases = [("replayed", doc["baseline"])] + [(what_if_label(w["what_if"]), w) for w in doc["whatifs"]]
    return [(name, note) for name, case in cases for note in case.get("notes") or []]


def validation_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per metric: replayed and measured mean and p90 of the held-out requests, and the MAPE of each."""
    v = doc.get("validation")
    if not v:
        return []
    return [
        {
            "metric": m,
            **{f"replayed_{q}": v["replayed"][m][q] for q in ("mean", "p90")},
            **{f"measured_{q}": v["measured"][m][q] for q in ("mean", "p90")},
            **{f"mape_{q}": v["mape"][m][q] for q in ("mean", "p90")},
        }
        for m in _METRICS
    ]

"""The replay's step cost: ``step_s = c0 + overhead + c_prefill x prefill_tokens + c_decode x decodes``.

Fitted by non-negative least squares to the run's own ``engine_steps`` (``fit_step_cost``; engine stalls left
out and replayed as pauses: ``engine_stalls``), or to the requests' own decode times when the engine logged
no steps (``fit_step_cost_from_requests``), or taken from the roofline (``reference_step_cost``); moved to
other hardware with the roofline's ratios (``transfer_step_cost``, ``transfer_tensor_parallel``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import polars as pl

from lltrace.errors import AnalysisError
from lltrace.physics import roofline
from lltrace.physics.catalog import GPU, Model, check_precision, gpu_or_error, model_or_error
from lltrace.queries import thresholds

_TIMED = pl.col("prefill_tokens").is_not_null() & pl.col("decode_tokens").is_not_null() & (pl.col("wall_s") > 0)
"""The steps a cost can be fitted to or checked on: token counts and a wall time."""


@dataclass(frozen=True)
class StepCost:
    """Linear step-time model, seconds. ``r2`` and ``mape`` describe the fit on the calibration steps.

    ``overhead`` is time between steps that the steps' own elapsed times do not include (scheduling,
    detokenisation, output processing), measured from the run's step spacing while the engine was busy.
    ``c_hit`` is the extra time of a step for each request whose prompt it starts computing on a prefix-cache hit
    (fitted only where the run's log places its hits: :func:`fit_step_cost`). ``scale``: the factor every time
    term was multiplied by after the fit (``lltrace.replay.calibration.match_decode``), 1 as fitted.
    """

    c0: float
    c_prefill: float
    c_decode: float
    c_ctx: float = 0.0
    overhead: float = 0.0
    steps: int = 0
    r2: float | None = None
    mape: float | None = None
    c_hit: float = 0.0
    scale: float = 1.0
    drift: float = 1.0  # the step's elapsed time x drift for the steps starting at or after drift_from (run clock)
    drift_from: float = math.inf

    @property
    def timed(self) -> bool:
        """Whether a step's time depends on when it starts (a drift), not on its tokens alone: the replay then
        prices every step, never a run of identical decode steps at once."""
        return self.drift_from < math.inf

    def drifted(self, ratio: float, start: float) -> StepCost:
        """This cost, every step starting at or after ``start`` taking ``ratio`` x its elapsed time (the time between
        steps kept): the engine's own speed level from then on as a scored window measured it (``speed_change``'s
        ratio, which compares the logged steps' elapsed times)."""
        return replace(self, drift=ratio, drift_from=start)

    def scaled(self, k: float) -> StepCost:
        """Every time term x ``k`` (``scale`` records the product); the fit's own ``r2`` and ``mape`` kept."""
        return replace(
            self,
            c0=self.c0 * k,
            c_prefill=self.c_prefill * k,
            c_decode=self.c_decode * k,
            c_ctx=self.c_ctx * k,
            overhead=self.overhead * k,
            c_hit=self.c_hit * k,
            scale=self.scale * k,
        )

    def __call__(
        self, prefill_tokens: int, decode_tokens: int, context_tokens: int, hit_prefills: int = 0, at: float = 0.0
    ) -> float:
        """Predicted wall time of one step (``hit_prefills``: requests it starts prefilling on a prefix-cache hit;
        ``at``: when it starts, on the run clock)."""
        per_token = self.c_prefill * prefill_tokens + self.c_decode * decode_tokens + self.c_ctx * context_tokens
        elapsed = self.c0 + per_token + self.c_hit * hit_prefills
        return self.overhead + (elapsed * self.drift if at >= self.drift_from else elapsed)


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


def open_at(times: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """How many of the intervals [start, end) are open at each of ``times`` (requests decoding, or held by the
    engine, when something happens)."""
    return (np.searchsorted(np.sort(start), times, "right") - np.searchsorted(np.sort(end), times, "right")).astype(
        float
    )


def _fit_quality(y: np.ndarray, pred: np.ndarray) -> tuple[float | None, float]:
    """R² (None when ``y`` is constant) and mean absolute percentage error of a fit."""
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - pred) ** 2).sum()) / ss_tot if ss_tot > 0 else None
    return r2, float(np.mean(np.abs(pred - y) / y))


def nonneg_lstsq(cols: list[np.ndarray], y: np.ndarray) -> np.ndarray:
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


def fit_step_cost_from_requests(requests: pl.DataFrame, drafting: tuple[float, float] = (1.0, 0.0)) -> StepCost:
    """Fit :class:`StepCost` to per-request times when the engine logged no steps.

    A request's decode time is the sum of the steps it decoded in: ``(out - 1)`` steps, each
    ``c0 + c_decode * batch`` plus ``c_prefill`` for every prompt token prefilled meanwhile. With speculative
    decoding (``drafting``: the tokens a decoding request gains a step, and the draft tokens each such step
    verifies, from the run's counts) it decodes in ``ceil((out - 1) / gain)`` steps, as the replay steps it, each
    verifying its draft tokens beside the batch's (priced as prompt tokens, as a logged step's are). With ``batch``
    the time-averaged number of requests decoding over its decode window and the prompt tokens whose prefill
    ended inside the window (both from the same requests' measured times), and each request's prefill step
    (scheduled to first token: one ``c0``, its computed prompt tokens, the requests decoding beside it),
    non-negative least squares over all requests gives ``c0``, ``c_decode`` and ``c_prefill`` together. Gaps
    between steps are inside these times, so ``overhead`` is 0. ``r2`` and ``mape`` describe the fit of decode times.
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
    gain, verified = drafting
    steps_n = np.ceil((rows["output_tokens"].to_numpy().astype(float) - 1) / gain)
    prefilled = prefilled + verified * steps_n * batch
    y = rows["decode_s"].to_numpy()
    # each request's prefill step too: scheduled to first token is one step of c0, its computed prompt
    # tokens, and the requests decoding beside it
    pre = every.filter(pl.col("prefill_s") > 0)
    computed = pre["input_tokens"].to_numpy().astype(float)
    if "cached_tokens" in pre.columns:
        computed = computed - pre["cached_tokens"].fill_null(0).to_numpy()
    beside = open_at(pre["first_token_s"].to_numpy() - pre["prefill_s"].to_numpy(), start, end)
    y_pre = pre["prefill_s"].to_numpy()
    cols = [
        np.concatenate([steps_n, np.ones_like(y_pre)]),
        np.concatenate([steps_n * batch, beside]),
        np.concatenate([prefilled, np.maximum(computed, 1.0)]),
    ]
    target = np.concatenate([y, y_pre])
    # relative errors (each row over its measured time): the error the validation scores, so a prefill step
    # of milliseconds weighs as much as a decode phase of seconds
    scale = 1.0 / target
    c0, c_decode, c_prefill = nonneg_lstsq([c * scale for c in cols], target * scale)
    r2, mape = _fit_quality(y, c0 * steps_n + c_decode * steps_n * batch + c_prefill * prefilled)
    return StepCost(float(c0), float(c_prefill), float(c_decode), 0.0, 0.0, 0, r2, mape)


def _step_tokens(rows: pl.DataFrame) -> tuple[pl.Expr, pl.Expr]:
    """A logged step's prefill-like tokens and decoding sequences, the quantities :class:`StepCost` prices.

    vLLM's iteration line counts a request resumed after preemption among the *generation* requests with all
    the tokens it recomputes, and with speculative decoding each request's draft tokens, which the target model
    checks in the step as it computes a prompt's: generation tokens beyond one per generation request are
    priced as prefill, and each generation request as one decode. Without request counts the generation tokens
    are taken as decodes.
    """
    if "decode_reqs" not in rows.columns:
        return pl.col("prefill_tokens"), pl.col("decode_tokens")
    reqs = pl.col("decode_reqs")
    recomputed = pl.when(reqs.is_null()).then(0).otherwise((pl.col("decode_tokens") - reqs).clip(lower_bound=0))
    return pl.col("prefill_tokens") + recomputed, pl.coalesce(reqs, pl.col("decode_tokens"))


def fit_step_cost(steps: pl.DataFrame, busy: list[tuple[float, float]] | None = None) -> StepCost:
    """Fit :class:`StepCost` (without the context term) to ``engine_steps`` rows.

    Prefill tokens and decodes per step as :func:`_step_tokens` reads them (recomputed tokens of resumed
    requests priced as prefill). The per-step ``overhead`` is the time between steps (:func:`step_gap`;
    ``busy``: the intervals in which the engine held a request, from its spans, where known).
    Uses rows with ``prefill_tokens``, ``decode_tokens`` and ``wall_s`` all known and ``wall_s > 0``.
    Coefficients are constrained to be non-negative (a negative per-token cost would make the replay
    reward bigger batches with shorter steps); a coefficient that least squares drives negative is set to
    zero and the rest refitted.

    Where the steps carry ``hit_prefills`` (requests each started prefilling on a prefix-cache hit: the log's
    steps placed by ``requests_cached_tokens``) and some prompts were computed whole beside them, ``c_hit`` is
    fitted too: a 65-token suffix over a cached 512-token prefix costs about twice a fresh prompt's per-token
    rate (E_prefix, H_pfx_on). Without the term H_pfx_on's prefill rate is fitted 1.7x the rate of H_pfx_off, the
    same workload on the same machine with the cache off; with it 1.2x (E_prefix against D_chunked: 1.04x
    without, 0.83x with). The real pair decides: H_pfx_on replayed with ``prefix_caching=off`` gives H_pfx_off's
    mean TTFT within 3 % with the term, 19 % without (``benchmarks/replay_accuracy.py``).

    vLLM's ``Iteration(0)``, the engine's first step after start-up, is left out: it runs cold (against the
    median of like steps later: D_chunked 1.3x, E_prefix 1.5x, H_pfx_off 2.1x, G_budget 2.7x; in B and B2, whose
    first step has one like step later, it is not slower). One step of thousands, but where a kind of step is
    rare (the 4 whole prompts of H_pfx_on, E_prefix) it would set that kind's cost.
    """
    rows = steps.filter(_TIMED)
    if {"step_id", "detection"} <= set(rows.columns):  # the engine's first step after start-up runs cold
        rows = rows.filter(~((pl.col("step_id") == 0) & (pl.col("detection") == "vllm iteration log")))
    if rows.height < 3:
        raise AnalysisError(
            f"need at least 3 engine steps with token counts and wall time for a step cost, got {rows.height}"
        )
    prefill, decodes = _step_tokens(rows)
    p = rows.select(prefill).to_series().to_numpy().astype(float)
    d = rows.select(decodes).to_series().to_numpy().astype(float)
    y = rows["wall_s"].to_numpy().astype(float)
    h = rows.select(_hits(rows)).to_series().to_numpy().astype(float)
    cols = [np.ones_like(y), p, d]
    # the hit term where the log places hits and some prompts were computed whole beside them (else the data
    # cannot tell a hit's cost from the tokens')
    fresh = (p > 0) & (h == 0)
    if h.any() and fresh.any():
        cols.append(h)
    coef = np.zeros(4)
    coef[: len(cols)] = nonneg_lstsq(cols, y)
    r2, mape = _fit_quality(y, coef[0] + coef[1] * p + coef[2] * d + coef[3] * h)
    gap = step_gap(rows, busy)
    return StepCost(
        float(coef[0]), float(coef[1]), float(coef[2]), 0.0, gap, rows.height, r2, mape, c_hit=float(coef[3])
    )


def _predicted(rows: pl.DataFrame, cost: StepCost) -> pl.Expr:
    """A logged step's time as ``cost`` prices it, without the time between steps (its elapsed time leaves it out)."""
    prefill, decodes = _step_tokens(rows)
    return cost.c0 + cost.c_prefill * prefill + cost.c_decode * decodes + cost.c_hit * _hits(rows)


def _hits(rows: pl.DataFrame) -> pl.Expr:
    """A logged step's prefills started on a prefix-cache hit (``hit_prefills``; 0 where the steps do not say)."""
    return pl.col("hit_prefills").fill_null(0) if "hit_prefills" in rows.columns else pl.lit(0)


def _decode_only(steps: pl.DataFrame) -> pl.DataFrame:
    """The decode-only steps of a log with a wall time: start, wall time and decode batch (recomputed prompt tokens
    make a step not decode-only)."""
    rows = steps.filter(_TIMED)
    prefill, decodes = _step_tokens(rows)
    return rows.select(pl.col("start_s"), pl.col("wall_s"), prefill.alias("prefill"), decodes.alias("batch")).filter(
        (pl.col("prefill") == 0) & (pl.col("batch") > 0) & pl.col("start_s").is_not_null()
    )


def same_batch_ratio(before: pl.DataFrame, after: pl.DataFrame) -> tuple[float, int, int, int] | None:
    """How much slower the decode-only steps of ``after`` ran than those of ``before`` (``_decode_only`` rows) at the
    same decode batch: each batch's mean step time after over before, weighted by the steps after. Returns (ratio,
    steps after, steps before, batches), None when no batch ran on both sides."""
    per_after = after.group_by("batch").agg(pl.col("wall_s").mean().alias("mean"), pl.len().alias("n"))
    per_before = before.group_by("batch").agg(pl.col("wall_s").mean().alias("mean"), pl.len().alias("n"))
    both = per_after.join(per_before, on="batch", suffix="_before")
    if both.height == 0:
        return None
    ratio = float((both["mean"] * both["n"]).sum()) / float((both["mean_before"] * both["n"]).sum())
    return ratio, int(both["n"].sum()), int(both["n_before"].sum()), both.height


def speed_change(
    steps: pl.DataFrame, split: float, until: float, disturbed: list[tuple[float, float, str]], origin: float = 0.0
) -> dict[str, Any] | None:
    """How much slower (or faster) the engine's decode-only steps ran in the scored window (``split`` to ``until``)
    than before it, at the same decode batch (``same_batch_ratio``); steps inside a ``disturbed`` window (a stall, a
    profiler trace) are left out on both sides. A cost fitted before the split cannot know such a change (a busier or
    quieter host, a frontend busy with arrivals): where the ratio is far from 1 the validation's error is the steps'
    change, not the model's. ``window_s`` is the scored window from ``origin`` (the run's first arrival). None when no
    batch ran on both sides."""
    rows = _decode_only(steps).filter(pl.col("start_s") < until)
    for lo, hi, _ in disturbed:
        rows = rows.filter((pl.col("start_s") + pl.col("wall_s") <= lo) | (pl.col("start_s") >= hi))
    found = same_batch_ratio(rows.filter(pl.col("start_s") < split), rows.filter(pl.col("start_s") >= split))
    if found is None:
        return None
    ratio, after, before, batches = found
    return {
        "ratio": ratio,
        "window_s": [split - origin, until - origin],
        "steps_after": after,
        "steps_before": before,
        "batches": batches,
        "method": "decode-only steps of the engine's log, each decode batch's mean step time in the scored window "
        "over before it, weighted by the steps in the window (steps in a stall or a profiler window left out)",
    }


def speed_ratio(base: pl.DataFrame, real: pl.DataFrame) -> tuple[float, int, int, int] | None:
    """``real``'s same-batch decode-only step time over ``base``'s (two runs' step logs): the host's speed difference
    between them, not a setting's (``same_batch_ratio``)."""
    return same_batch_ratio(_decode_only(base), _decode_only(real))


def engine_stalls(
    steps: pl.DataFrame, cost: StepCost, *, ratio: float | None = None, excess_s: float | None = None
) -> pl.DataFrame:
    """Steps in which the engine stalled: wall time over ``ratio`` x the fitted step time and ``excess_s`` beyond it
    (default: ``stall_ratio`` and ``stall_excess_s`` of ``queries/thresholds.csv``).

    Such a step carries time the step-cost model cannot explain from its tokens (a profiler writing its trace
    from inside a step, a long GC pause, a swap storm). Columns: ``step_id``, ``start_s``, ``wall_s``,
    ``predicted_s``, ``excess_s`` (wall - predicted) and ``row`` (its row number in ``steps``).
    """
    t = thresholds()
    ratio = t["stall_ratio"] if ratio is None else ratio
    excess_s = t["stall_excess_s"] if excess_s is None else excess_s
    rows = steps.with_row_index("row").filter(_TIMED)
    predicted = _predicted(rows, cost)
    return (
        rows.select("step_id", "start_s", "wall_s", predicted.alias("predicted_s"), "row")
        .with_columns((pl.col("wall_s") - pl.col("predicted_s")).alias("excess_s"))
        .filter((pl.col("wall_s") > ratio * pl.col("predicted_s")) & (pl.col("excess_s") > excess_s))
        .sort("start_s")
    )


def fit_by_kind(steps: pl.DataFrame, cost: StepCost) -> dict[str, dict[str, float | int]]:
    """How well ``cost`` explains each kind of logged step (prefill, decode, mixed): the steps, their mean absolute
    percentage error, and the predicted over the measured total (a bias above 1 over-prices that kind). The
    overhead between steps is not in a step's elapsed time, so it is left out of the prediction here."""
    rows = steps.filter(_TIMED)
    if "kind" not in rows.columns or rows.height == 0:
        return {}
    frame = rows.select("kind", "wall_s", _predicted(rows, cost).alias("predicted"))
    out: dict[str, dict[str, float | int]] = {}
    for kind in ("prefill", "decode", "mixed"):
        k = frame.filter(pl.col("kind") == kind)
        if k.height:
            y, p = k["wall_s"].to_numpy(), k["predicted"].to_numpy()
            out[kind] = {"steps": k.height, "mape": float(np.mean(np.abs(p - y) / y)), "bias": float(p.sum() / y.sum())}
    return out


def fit_step_cost_without_stalls(
    steps: pl.DataFrame, busy: list[tuple[float, float]] | None = None
) -> tuple[StepCost, pl.DataFrame]:
    """:func:`fit_step_cost` on the steps that are not stalls (:func:`engine_stalls` of a first fit); the stalls."""
    first = fit_step_cost(steps, busy)
    stalls = engine_stalls(steps, first)
    if stalls.height == 0:
        return first, stalls
    clean = steps.with_row_index("row").filter(~pl.col("row").is_in(stalls["row"].implode())).drop("row")
    cost = fit_step_cost(clean, busy)
    return cost, engine_stalls(steps, cost)


_WHOLE_SECOND = re.compile(r"\d\d:\d\d:\d\d$")


def _covered(intervals: list[tuple[float, float]], start: float, end: float) -> float:
    """The share of [start, end) inside the union of ``intervals`` (sorted by start)."""
    total, reach = 0.0, start
    for a, b in intervals:
        if b <= reach:
            continue
        if a >= end:
            break
        lo = max(a, reach)
        hi = min(b, end)
        if hi > lo:
            total += hi - lo
            reach = hi
    return total / (end - start)


def step_gap(rows: pl.DataFrame, busy: list[tuple[float, float]] | None = None) -> float:
    """The engine's time between steps (scheduling, output processing: what a step's elapsed time leaves out).

    vLLM stamps its iteration lines to the second, and the engine steps back to back while it holds a request
    (its core's busy loop), so in a second it was busy throughout, one second less the steps' elapsed times
    is the time between them: the median of that over the steps of each such second. The time it was busy in
    a second is the part the ``busy`` intervals (the engine's requests, queued to finished) cover (seconds at
    least half busy count), or, without them, the whole second where the seconds before and after it logged
    steps too. Steps with their own times (no whole-second
    stamps): the mean spacing of back-to-back steps beyond their elapsed times. 0 when nothing tells.
    Data-parallel engines (``engine``) are each their own sequence of steps; their requests do not say which engine
    held them, so there the seconds before and after tell.
    """
    rows = rows.with_columns(pl.lit(None, dtype=pl.Utf8).alias("engine")) if "engine" not in rows.columns else rows
    if rows["engine"].n_unique() > 1:
        busy = None
    stamps = rows["log_stamp"].drop_nulls() if "log_stamp" in rows.columns else pl.Series([], dtype=pl.Utf8)
    if stamps.len() < rows.height or not stamps.len() or not all(_WHOLE_SECOND.search(x) for x in stamps.head(50)):
        return _busy_overhead(rows)
    per = (
        rows.filter(pl.col("end_s").is_not_null())
        .group_by("engine", "log_stamp")
        .agg(pl.len().alias("n"), pl.col("wall_s").sum().alias("wall"), pl.col("end_s").min().alias("t"))
        .with_columns(pl.col("t").floor().alias("second"))
        .sort("engine", "second")
    )
    engines, seconds = per["engine"].to_list(), per["second"].to_list()
    present = set(zip(engines, seconds, strict=True))
    intervals = sorted(busy) if busy else None
    gaps = []
    for eng, sec, n, wall in zip(engines, seconds, per["n"].to_list(), per["wall"].to_list(), strict=True):
        if intervals is not None:
            held = _covered(intervals, sec, sec + 1.0)  # the engine steps only while it holds a request
        else:
            held = 1.0 if (eng, sec - 1) in present and (eng, sec + 1) in present else 0.0
        if held >= 0.5:
            gaps.append((held - wall) / n)
    if len(gaps) < 3:
        return _busy_overhead(rows)
    return max(0.0, float(np.median(gaps)))


def logged_step_times(steps: pl.DataFrame, busy: list[tuple[float, float]] | None = None) -> np.ndarray:
    """Each logged step's time, in the log's order: its elapsed time plus the time between it and the next, as
    measured as the log allows. Whole-second stamps (vLLM's iteration lines): the gap of the step's own second where
    the engine held a request for at least half of it (``busy``: its spans), the second's held time less its steps'
    elapsed times over their count (``step_gap``'s rule, second by second); elsewhere the run's ``step_gap``. Steps
    with their own start times: the spacing to the next step where they ran back to back. NaN where a step has no
    elapsed time."""
    rows = steps.sort("step_id")
    wall = rows["wall_s"].cast(pl.Float64).fill_null(float("nan")).to_numpy()
    gap = step_gap(rows, busy)
    stamps = rows["log_stamp"] if "log_stamp" in rows.columns else pl.Series([None] * rows.height, dtype=pl.Utf8)
    if stamps.null_count() or not all(_WHOLE_SECOND.search(x) for x in stamps.head(50)):
        spacing = (rows["start_s"].shift(-1) - rows["start_s"]).cast(pl.Float64).fill_null(float("nan")).to_numpy()
        back_to_back = spacing < thresholds()["busy_gap_s"]
        return np.where(back_to_back & (spacing >= wall), spacing, wall + gap)
    intervals = sorted(busy) if busy else None
    per = (
        rows.with_row_index("row")
        .group_by("log_stamp")
        .agg(pl.col("row"), pl.col("wall_s").sum().alias("sum"), pl.col("end_s").min().alias("t"))
    )
    out = wall + gap
    for rows_in, total, t in per.select("row", "sum", "t").iter_rows():
        if t is None or intervals is None:
            continue
        sec = float(np.floor(t))
        held = _covered(intervals, sec, sec + 1.0)
        if held >= 0.5:
            out[rows_in] = wall[rows_in] + max(0.0, (held - total) / len(rows_in))
    return out


def _busy_overhead(rows: pl.DataFrame) -> float:
    """Mean per-step time not covered by ``wall_s``, over back-to-back steps (next start sooner than the
    ``busy_gap_s`` threshold)."""
    busy_gap_s = thresholds()["busy_gap_s"]
    if "start_s" not in rows.columns:
        return 0.0
    interval = pl.col("start_s").shift(-1) - pl.col("start_s")
    by = ["engine"] if "engine" in rows.columns else []
    spaced = (
        rows.sort([*by, "start_s"])
        .with_columns((interval.over(by) if by else interval).alias("interval"))
        .filter(pl.col("interval").is_not_null() & (pl.col("interval") < busy_gap_s))
    )
    if spaced.height == 0:
        return 0.0
    extra = float(spaced["interval"].sum()) - float(spaced["wall_s"].sum())
    return max(0.0, extra / spaced.height)


def reference_step_cost(
    model: str,
    gpu: str,
    *,
    quant: str = "bf16",
    kv_dtype: str = "bf16",
    mean_context: float = 1024.0,
    block_size: int = 16,
) -> tuple[StepCost, int, dict[str, Any]]:
    """A step cost and KV capacity for ``model`` on ``gpu`` from the roofline (``physics.roofline.reference_step``
    and ``kv_blocks``: an estimate, for traces with no timings of their own)."""
    check_precision(quant, kv_dtype)
    m, g = model_or_error(model), gpu_or_error(gpu)
    ref = roofline.reference_step(m, g, quant=quant, kv_dtype=kv_dtype, mean_context=mean_context)
    cost = StepCost(c0=ref["per_step_s"], c_prefill=ref["per_prefill_token_s"], c_decode=ref["per_decode_token_s"])
    blocks = roofline.kv_blocks(m, g, quant=quant, kv_dtype=kv_dtype, block_size=block_size)
    info = {"model": m.name, "gpu": g.name, "quant": quant, "kv_dtype": kv_dtype, "mean_context_tokens": mean_context}
    return cost, blocks, info


def transfer_step_cost(
    cost: StepCost,
    gpu_from: GPU,
    gpu_to: GPU,
    *,
    quant_from: str = "bf16",
    quant_to: str = "bf16",
    kv_from: str = "bf16",
    kv_to: str = "bf16",
) -> tuple[StepCost, dict[str, float]]:
    """Move a calibrated step cost to another GPU / precision with the roofline's ratios
    (``physics.roofline.transfer_ratios``; an estimate). The overhead between steps (CPU side) is kept.
    Returns the new cost and the three ratios applied."""
    r = roofline.transfer_ratios(
        gpu_from, gpu_to, quant_from=quant_from, quant_to=quant_to, kv_from=kv_from, kv_to=kv_to
    )
    new = replace(
        cost,
        c0=cost.c0 * r["per_step"],
        c_hit=cost.c_hit * r["per_step"],
        c_prefill=cost.c_prefill * r["per_prefill_token"],
        c_decode=cost.c_decode * r["per_decode_token"],
        c_ctx=cost.c_ctx * r["per_decode_token"],
    )
    return new, r


def transfer_tensor_parallel(cost: StepCost, model: Model, gpu: GPU, tp_from: int, tp_to: int) -> tuple[StepCost, dict]:
    """Move a step cost to another tensor-parallel degree (an estimate): weight reads, prefill FLOPs and KV
    reads split over the GPUs (x ``tp_from / tp_to``); each token pays its all-reduces at the new degree
    (``physics.roofline.all_reduce_s_per_token``, bandwidth only: a lower bound) instead of the old one's.

    The split is optimistic where kernels get small: real A100 timings of Llama-2-7B's and 70B's non-attention ops
    (vidur; ``tests/test_catalog.py``) at TP 2-8 ran 0.90-1.99x it, the most at few tokens on the smaller model,
    where the norms and residual adds (replicated on every GPU) and the shortest kernels do not split."""
    comm_from = roofline.all_reduce_s_per_token(model, gpu, tp_from)
    comm_to = roofline.all_reduce_s_per_token(model, gpu, tp_to)
    split = tp_from / tp_to
    new = replace(
        cost,
        c0=cost.c0 * split,
        c_hit=cost.c_hit * split,
        c_prefill=max(0.0, (cost.c_prefill - comm_from) * split + comm_to),
        c_decode=max(0.0, (cost.c_decode - comm_from) * split + comm_to),
        c_ctx=cost.c_ctx * split,
    )
    return new, {"per_step": split, "all_reduce_s_per_token": comm_to, "tp_from": tp_from, "tp_to": tp_to}

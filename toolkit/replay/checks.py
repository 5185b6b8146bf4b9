"""The replay's checks of itself beyond the held-out validation (docs/replay.md, "Validation in two parts").

``scheduler_check``: the replay with each step's measured duration (``LoggedStepCost``: the n-th replayed step takes
the n-th logged step's time; an engine stall a pause at its time, the log's sequence restarting after it) and each
request entering the scheduler when the engine's spans say it did, in the order it arrived, the cost model and the
frontend out of the way: what is left of its error is its scheduler's, and the first request whose figures part from
the measured ones says where a rule went wrong.

``check_against``: a what-if scored against the real run that answers it, the host's speed difference between the two
runs taken out, every mean's direction checked.

``drift_corrected``: the held-out validation replayed again with the scored window's own speed level (the engine's
same-batch decode steps after the split over before it: one scalar, ``speed_change``), so the score is the cost
model's shape, not the host's change of speed that no cost fitted before the split can know.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from lltrace.queries import thresholds
from lltrace.replay.calibration import Outside, counted_preemptions, log_steps
from lltrace.replay.cost import StepCost, engine_stalls, logged_step_times, speed_ratio
from lltrace.replay.replayer import Replayer, busy_intervals, measured_requests
from lltrace.replay.scheduler import ReplayResult, simulate
from lltrace.replay.scores import METRICS, scores, summarize
from lltrace.store import Run

_PARTED = ("queue_s", "ttft_s", "e2e_s")


@dataclass(frozen=True, eq=False)
class LoggedStepCost(StepCost):
    """The engine's own steps, each kind in its order: the replay's n-th step that computes prompt tokens takes the
    n-th such logged step's time (``prompt_walls``), its n-th decode-only step the n-th logged decode-only step's
    (``decode_walls``), plus the time between steps (``overhead``); past the log's last of a kind (or where a logged
    time is NaN), the fitted terms. Kept apart by kind, a replay that takes a few steps more or fewer than the engine
    still prices a prefill as a prefill and a decode as a decode, near the time the engine ran it. The cost model out
    of the way, what is left of the replay's error is its scheduler's (the scheduler check).

    ``restarts``: for each engine stall, the moment it ended and the index of the first logged step of each kind
    after it. A stall is a moment on the clock (a profiler writing its trace), replayed as a pause there; the
    replay's first step at or after its end takes the logged steps after it, so a replay a few steps off before the
    stall does not carry that offset past it (the engine's slow profiled steps priced after the stall, or the
    stall's own time on a step after the backlog it built). One object per replay (it counts the steps it has
    priced: prompt, decode-only, restarts passed)."""

    prompt_walls: tuple[float, ...] = ()
    decode_walls: tuple[float, ...] = ()
    restarts: tuple[tuple[float, int, int], ...] = ()
    priced: list[int] = field(default_factory=lambda: [0, 0, 0])

    @property
    def timed(self) -> bool:
        return True

    def __call__(
        self, prefill_tokens: int, decode_tokens: int, context_tokens: int, hit_prefills: int = 0, at: float = 0.0
    ) -> float:
        count = self.priced
        while count[2] < len(self.restarts) and at >= self.restarts[count[2]][0]:
            _, count[0], count[1] = self.restarts[count[2]]
            count[2] += 1
        kind, walls = (0, self.prompt_walls) if prefill_tokens > 0 else (1, self.decode_walls)
        k = count[kind]
        count[kind] = k + 1
        if k < len(walls) and walls[k] == walls[k]:  # NaN: no logged time
            return walls[k] + self.overhead
        return super().__call__(prefill_tokens, decode_tokens, context_tokens, hit_prefills, at)


def _computes_prompt(steps: pl.DataFrame, drafting: bool) -> np.ndarray:
    """Which logged steps computed prompt tokens, as the replay's steps do: a prompt's (``prefill_tokens``) or, where
    the run does not draft, a preempted request's recomputed ones, which vLLM's iteration line counts among the
    generation tokens (beyond one per generation request: M_spike's log has 2,698 such tokens in steps with no
    prompt tokens, and the replay recomputes them in steps it prices as prompt steps)."""
    prompt = steps["prefill_tokens"].fill_null(0)
    if not drafting and "decode_reqs" in steps.columns:
        prompt = prompt + (steps["decode_tokens"] - steps["decode_reqs"]).fill_null(0).clip(lower_bound=0)
    return (prompt > 0).to_numpy()


def entries(measured: pl.DataFrame) -> np.ndarray:
    """When the engine core took each request (by arrival), as the scheduler check replays it: the earliest of its
    own ``queued_s`` and every later arrival's.

    The core takes requests in the order the frontend sends them, which is the order they arrived: the requests that
    waited were scheduled in arrival order on every run checked (D, F, H2_on, M: none out of order, D 33 of 41 out of
    ``queued_s`` order; P_seqs32_a one pair; J, 400 requests at once, 16 pairs), FCFS. A span's ``queued_s`` is
    derived (first token less prefill less queue, lltrace.ingest.join) from a TTFT the frontend measured, so it is
    late by the first token's trip to the frontend, a millisecond or two and more when the frontend is busy: after a
    stall fourteen requests taken at one moment have ``queued_s`` up to 2 ms apart in no order of arrival. A
    request's entry is therefore no later than any later arrival's."""
    queued = measured["queued_s"].cast(pl.Float64).to_numpy()
    return np.minimum.accumulate(queued[::-1])[::-1]


def first_divergence(measured: pl.DataFrame, replayed: pl.DataFrame, step_s: float) -> dict[str, Any] | None:
    """The first request, by arrival, whose replayed queue time, TTFT or e2e parts from its measured one by more
    than 5 % and more than one step (``step_s``: a step early or late is the clock's grain, not a rule): its id,
    arrival (seconds since the first), and each figure measured and replayed. None where none does."""
    t0 = float(measured["arrival_s"].min())  # type: ignore[arg-type]
    real = {m: measured[m].cast(pl.Float64).fill_null(np.nan).to_numpy() for m in _PARTED if m in measured.columns}
    pred = {m: replayed[m].cast(pl.Float64).fill_null(np.nan).to_numpy() for m in real}
    parted = np.zeros(measured.height, dtype=bool)
    for m in real:
        gap = np.abs(pred[m] - real[m])
        parted |= (gap > 0.05 * np.abs(real[m])) & (gap > step_s)  # NaN compares False: unmeasured never parts
    hit = np.flatnonzero(parted)
    if not hit.size:
        return None
    k = int(hit[0])
    row = measured.row(k, named=True)
    return {
        "request_id": row.get("request_id"),
        "arrival_s": float(row["arrival_s"]) - t0,
        "measured": {m: None if np.isnan(real[m][k]) else float(real[m][k]) for m in real},
        "replayed": {m: None if np.isnan(pred[m][k]) else float(pred[m][k]) for m in real},
        "requests_parted": int(hit.size),
    }


def _engine_side(frame: pl.DataFrame) -> pl.DataFrame:
    """The engine's own figures of measured requests, from its spans: from queued (the engine core took the request)
    to scheduled, first token and finished, and the time per output token after the first."""
    last = pl.coalesce("last_token_s", "finished_s") if "last_token_s" in frame.columns else pl.col("finished_s")
    return frame.select(
        "request_id",
        "arrival_s",
        (pl.col("scheduled_s") - pl.col("queued_s")).alias("queue_s"),
        (pl.col("first_token_s") - pl.col("queued_s")).alias("ttft_s"),
        pl.when(pl.col("output_tokens") > 1)
        .then((last - pl.col("first_token_s")) / (pl.col("output_tokens") - 1))
        .alias("tpot_s"),
        (pl.col("finished_s") - pl.col("queued_s")).alias("e2e_s"),
    )


def scheduler_check(
    steps: pl.DataFrame, measured: pl.DataFrame, settings: Replayer, cost: StepCost
) -> dict[str, Any] | None:
    """The engine's scheduler replayed with its own step times (``logged_step_times``, in the log's order; each
    engine stall, ``engine_stalls`` of ``cost``, a pause at its time: ``LoggedStepCost``) and its requests entering
    at the times its spans say the core took them, in the order they arrived (``entries``): the frontend and the
    cost model both out of the way. Scored against the spans' own queue, TTFT, TPOT and e2e from queued, every
    request. None where the run logged no steps, several engines stepped (their logs interleave: no one order of
    steps to follow) or the spans do not time the engine."""
    need = {"queued_s", "scheduled_s", "first_token_s", "finished_s"}
    if steps.height < 3 or steps["engine"].n_unique() > 1 or not need <= set(measured.columns):
        return None
    timed = measured.drop_nulls(list(need))
    if timed.height < 10:
        return None
    steps = steps.sort("step_id")
    times = logged_step_times(steps, busy_intervals(measured))  # its elapsed time and the time between steps
    prompt = _computes_prompt(steps, settings.config({}).drafting)
    stalls = engine_stalls(steps, cost).filter(pl.col("start_s").is_not_null())
    rows_at, excess = stalls["row"].to_numpy(), stalls["excess_s"].to_numpy()
    times[rows_at] -= excess  # the stall step at its predicted time; its excess a pause on the clock
    before_prompt, before_decode = np.cumsum(prompt), np.cumsum(~prompt)  # steps of each kind up to each row
    logged = LoggedStepCost(
        **{f: getattr(cost, f) for f in StepCost.__dataclass_fields__} | {"overhead": 0.0},  # times hold the gaps
        prompt_walls=tuple(times[prompt]),
        decode_walls=tuple(times[~prompt]),
        restarts=tuple(
            (float(t), int(before_prompt[r]), int(before_decode[r]))
            for t, r in zip(stalls["start_s"] + stalls["excess_s"], rows_at, strict=True)
        ),
    )
    keep = pl.Series(measured["queued_s"].is_not_null() & measured["finished_s"].is_not_null())
    rows = measured.filter(keep)
    hits = settings.hits[keep.to_numpy()] if settings.hits is not None else None
    res = simulate(
        entries(rows),
        rows["input_tokens"].to_numpy(),
        rows["output_tokens"].to_numpy(),
        settings.config({}),
        logged,
        cached_tokens=hits,
        pauses=list(zip(stalls["start_s"], stalls["start_s"] + stalls["excess_s"], strict=True)),
    )
    real = _engine_side(rows)
    replayed = res.requests.with_columns(rows["request_id"].alias("request_id"), rows["arrival_s"].alias("arrival_s"))
    step_s = float(np.nanmedian(times))
    return {
        "method": "the engine's scheduler replayed with each logged step's time, each kind in the log's order (a step "
        "computing prompt tokens takes the next such logged step's time, a decode-only step the next decode-only "
        "one's: its elapsed time and the time between steps its second measured; an engine stall a pause at its "
        "time, the steps after it taking the logged steps after it), every request entering when its span says the "
        "engine core took it, in the order the requests arrived: against the spans' queue, TTFT, TPOT and e2e "
        "counted from then. The error left is the scheduler's",
        "requests": rows.height,
        "steps_logged": len(times),
        "steps_replayed": res.steps,
        "stalls_paused": stalls.height,
        "first_divergence": first_divergence(real, replayed, step_s),
    } | scores(summarize(real), summarize(replayed))


def drift_corrected(
    measured: pl.DataFrame,
    scored: np.ndarray,
    replayer: Replayer,
    arrival: np.ndarray,
    early: StepCost,
    outside: Outside,
    stalls: pl.DataFrame | None,
    ratio: float,
    split: float,
) -> dict[str, Any]:
    """The held-out validation's scores with the steps from ``split`` on at ``ratio`` x the early fit's time (the
    scored window's own speed level), everything else as the validation replayed it."""
    res = replayer.run(arrival, replayer.config({}), early.drifted(ratio, split), outside, stalled=stalls)
    mask = pl.Series(scored)
    return {
        "method": f"the validation's replay with every step from the split on at {ratio:.3g}x the early fit's time "
        "(the scored window's same-batch decode steps over the calibration window's)",
    } | scores(summarize(measured.filter(mask)), summarize(res.requests.filter(mask)))


MOVED = 0.05
"""A mean the real run moved by more than this share of the base run's is a change whose direction is checked."""


def check_against(
    real: Run,
    base_measured: pl.DataFrame,
    base_steps: pl.DataFrame,
    what_if_at: Callable[[float], ReplayResult],
) -> dict[str, Any]:
    """A what-if scored against ``real``, the base run's workload really run with the what-if's setting. The host's
    speed difference between the two runs (``speed_ratio``: the same-batch decode-only step time in ``real``'s log
    over the base's) is taken out by replaying the what-if at ``real``'s speed (``what_if_at(ratio)``: its step cost
    times the ratio); then each mean, predicted over real less 1, and the direction of every mean ``real`` moved by
    more than ``MOVED`` from the base run: the prediction must move it the same way."""
    found = speed_ratio(base_steps, log_steps(real)) if base_steps.height >= 3 else None
    ratio = found[0] if found is not None else 1.0
    res = what_if_at(ratio)
    pred, actual, base = summarize(res.requests), summarize(measured_requests(real)), summarize(base_measured)
    out: dict[str, Any] = {
        "run": real.id,
        "speed_ratio": found[0] if found is not None else None,
        "speed_basis": "same-batch decode-only steps of both runs' logs, the real run's over the base's, weighted by "
        f"the real run's steps ({found[1]:,} steps, {found[3]} batch sizes)"
        if found is not None
        else "not measured: a run has no step log; replayed at the base run's speed",
        "predicted": pred,
        "real": actual,
        "base": base,
        "preemptions": {"predicted": res.preemptions, "real": counted_preemptions(real)},
    }
    directions, floor = {}, thresholds()["mape_floor_s"]
    for m in METRICS:
        p, r, b = pred[m]["mean"], actual[m]["mean"], base[m]["mean"]
        # a mean measured under the floor (1 ms) has no relative error worth reading: queue at an idle engine
        out[f"{m.removesuffix('_s')}_mean_err"] = None if p is None or r is None or abs(r) < floor else p / r - 1
        if p is None or r is None or not b or abs(r - b) <= MOVED * abs(b) or max(abs(r), abs(b)) < floor:
            continue  # unmoved, or a move of less than the floor (1 ms): noise, not an effect
        directions[m] = {"real": "up" if r > b else "down", "predicted": "up" if p > b else "down"}
    out["directions"] = directions
    out["direction_ok"] = all(d["real"] == d["predicted"] for d in directions.values())
    return out

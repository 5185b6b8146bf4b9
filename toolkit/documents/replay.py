"""The replay document (``lltrace replay --json``): the engine as the replay models it, its step cost and where it
came from, its error on a held-out window of the run (reported before any what-if), the replayed baseline, and
each what-if (estimates)."""

from __future__ import annotations

from typing import Annotated, Literal

from lltrace.documents.base import UNSET, Doc, UnsetType, field_doc


class Quantities(Doc, kw_only=True):
    """One latency's figures over the replayed (or measured) requests."""

    mean: Annotated[float | None, field_doc("mean", "s")]
    p50: Annotated[float | None, field_doc("median", "s")]
    p90: Annotated[float | None, field_doc("90th percentile", "s")]


class Metrics(Doc, kw_only=True):
    """The four latencies the replay reports."""

    queue_s: Annotated[Quantities, field_doc("engine queue time")]
    ttft_s: Annotated[Quantities, field_doc("time to first token")]
    tpot_s: Annotated[Quantities, field_doc("time per output token")]
    e2e_s: Annotated[Quantities, field_doc("end-to-end latency")]


_Figure = float | str | bool | None | UnsetType


class Figures(Doc, kw_only=True):
    """One figure per quantity of a latency: an error, how it is scored, or whether it is within the floor (a
    quantity left out where the figure does not apply to it)."""

    mean: Annotated[_Figure, field_doc("of the mean")] = UNSET
    p50: Annotated[_Figure, field_doc("of the median")] = UNSET
    p90: Annotated[_Figure, field_doc("of the 90th percentile")] = UNSET


class Ratios(Doc, kw_only=True):
    """One figure per quantity (mean, p50, p90) of each latency: an error, a word, a flag."""

    queue_s: Annotated[Figures, field_doc("engine queue time")]
    ttft_s: Annotated[Figures, field_doc("time to first token")]
    tpot_s: Annotated[Figures, field_doc("time per output token")]
    e2e_s: Annotated[Figures, field_doc("end-to-end latency")]


class EngineSetting(Doc, kw_only=True):
    """A setting of the replayed engine."""

    value: Annotated[float | int | bool | None, field_doc("its value")]
    origin: Annotated[str, field_doc("where it comes from (a source, a default, an assumption)")]


class ReplayRequests(Doc, kw_only=True):
    """Which of the run's requests were replayed."""

    replayed: Annotated[int, field_doc("requests replayed", "requests")]
    left_out: Annotated[int, field_doc("requests left out", "requests")]
    why_left_out: Annotated[str, field_doc("why")]


class Named(Doc, kw_only=True):
    """The model the replay's hardware what-ifs use."""

    name: Annotated[str, field_doc("its name")]
    origin: Annotated[str | None, field_doc("where it came from")]


class OutsideEngine(Doc, kw_only=True):
    """The time a request spends outside the engine, as the replay adds it."""

    frontend: Annotated[float | None, field_doc("arrival to engine queue, idle engine", "s")]
    client_first_token: Annotated[float | None, field_doc("the client's share of TTFT", "s")]
    client_last_token: Annotated[float | None, field_doc("the client's share of e2e after the last token", "s")]
    frontend_per_request_in_engine: Annotated[
        float | None, field_doc("frontend time per request the engine holds", "s")
    ]
    basis: Annotated[str, field_doc("what these were measured from")]
    load_basis: Annotated[str | None, field_doc("what the load term was measured from")]


class StepRates(Doc, kw_only=True):
    """A step cost read as the figures people quote."""

    decode_s_per_token_batch1: Annotated[float | None, field_doc("one request's decode time per token", "s")]
    prefill_tokens_per_s: Annotated[float | None, field_doc("prefill rate", "tokens/s")]


class Stall(Doc, kw_only=True):
    """A step far slower than its tokens explain: left out of the fit, replayed as a pause."""

    start_s: Annotated[float, field_doc("when, after the run's first arrival", "s")]
    duration_s: Annotated[float, field_doc("its excess over the predicted step time", "s")]
    evidence: Annotated[str, field_doc("the step, its time and its prediction")]


class KindFit(Doc, kw_only=True):
    """The step cost's fit on the steps of one kind."""

    steps: Annotated[int, field_doc("steps of the kind", "steps")]
    mape: Annotated[float | None, field_doc("mean absolute percentage error", "fraction")]
    bias: Annotated[float | None, field_doc("mean of predicted over measured, less 1", "fraction")]


class DecodeMatch(Doc, kw_only=True):
    """The step cost's level, set where the replay meets its calibration requests' decode time."""

    scale: Annotated[float, field_doc("the factor applied to the decode terms")]
    replayed_over_measured: Annotated[float | None, field_doc("replayed over measured decode time before it")]
    requests: Annotated[int, field_doc("requests it was matched on", "requests")]
    basis: Annotated[str, field_doc("how, in words")]


class Calibration(Doc, kw_only=True):
    """Where the step cost came from, its terms and its fit."""

    source: Annotated[str, field_doc("what it was fitted on (or the reference it was taken from)")]
    form: Annotated[str, field_doc("the step cost's formula")]
    c0_s: Annotated[float, field_doc("fixed time per step", "s")]
    overhead_s: Annotated[float, field_doc("the engine's own time per step beside the model", "s")]
    c_prefill_s_per_token: Annotated[float, field_doc("time per prompt token", "s")]
    c_decode_s_per_token: Annotated[float, field_doc("time per decode token", "s")]
    c_hit_s_per_hit_prefill: Annotated[float, field_doc("time per prefill that hit the prefix cache", "s")]
    steps: Annotated[int | None, field_doc("steps fitted", "steps")]
    outside_engine_s: Annotated[OutsideEngine, field_doc("the time outside the engine")]
    r2: Annotated[float | None, field_doc("the fit's R² on step time")]
    step_mape: Annotated[float | None, field_doc("the fit's mean absolute percentage error on step time", "fraction")]
    rates: Annotated[StepRates, field_doc("the cost as rates")]
    stalls: Annotated[list[Stall] | None, field_doc("steps left out of the fit as stalls (null: no step log)")]
    fit_by_kind: Annotated[dict[str, KindFit] | None, field_doc("the fit per step kind (null: no step log)")]
    decode_match: Annotated[DecodeMatch | None, field_doc("the level matched to the measured decode time")]


class LeftOut(Doc, kw_only=True):
    """Scored-window requests a disturbance touched, left out of the score."""

    requests: Annotated[int, field_doc("how many", "requests")]
    why: Annotated[str, field_doc("why")]
    request_ids: Annotated[list[str | None], field_doc("which")]


class Change(Doc, kw_only=True):
    """A time outside the engine before and in the scored window (medians)."""

    before_s: Annotated[float, field_doc("in the calibration window", "s")]
    after_s: Annotated[float, field_doc("in the scored window", "s")]
    ratio: Annotated[float | None, field_doc("after over before")]


class SpeedChange(Doc, kw_only=True):
    """How much slower the engine's decode-only steps ran in the scored window, at the same batch."""

    ratio: Annotated[float, field_doc("after over before, weighted by the steps after")]
    window_s: Annotated[list[float], field_doc("the scored window, from the run's first arrival: [from, to] (s)")]
    steps_after: Annotated[int, field_doc("steps compared in the window", "steps")]
    steps_before: Annotated[int, field_doc("steps compared before it", "steps")]
    batches: Annotated[int, field_doc("decode batch sizes seen on both sides", "count")]
    method: Annotated[str, field_doc("how, in words")]


class Scores(Doc, kw_only=True):
    """Replayed against measured: the errors of each latency's mean, median and p90."""

    replayed: Annotated[Metrics, field_doc("the replayed figures")]
    measured: Annotated[Metrics, field_doc("the measured figures")]
    mape: Annotated[Ratios, field_doc("absolute percentage error (null under the 1 ms floor)")]
    abs_error_s: Annotated[Ratios, field_doc("replayed less measured, seconds")]
    scored_by: Annotated[Ratios, field_doc("mape, or abs_error where the measured figure is under the floor")]
    abs_within_floor: Annotated[Ratios, field_doc("for figures scored by abs_error: within the floor")]
    queue_mean_mape: Annotated[float | None, field_doc("queue mean's error", "fraction")]
    queue_median_mape: Annotated[float | None, field_doc("queue median's error", "fraction")]
    queue_p90_mape: Annotated[float | None, field_doc("queue p90's error", "fraction")]
    ttft_mean_mape: Annotated[float | None, field_doc("TTFT mean's error", "fraction")]
    ttft_median_mape: Annotated[float | None, field_doc("TTFT median's error", "fraction")]
    ttft_p90_mape: Annotated[float | None, field_doc("TTFT p90's error", "fraction")]
    tpot_mean_mape: Annotated[float | None, field_doc("TPOT mean's error", "fraction")]
    tpot_median_mape: Annotated[float | None, field_doc("TPOT median's error", "fraction")]
    tpot_p90_mape: Annotated[float | None, field_doc("TPOT p90's error", "fraction")]
    e2e_mean_mape: Annotated[float | None, field_doc("e2e mean's error", "fraction")]
    e2e_median_mape: Annotated[float | None, field_doc("e2e median's error", "fraction")]
    e2e_p90_mape: Annotated[float | None, field_doc("e2e p90's error", "fraction")]


class DriftCorrected(Scores, kw_only=True):
    """The held-out validation replayed again with the scored window at its own speed level: the cost model's error
    with the host's change of speed taken out."""

    method: Annotated[str, field_doc("how, in words (the factor: the validation's drift)")]


class Divergence(Doc, kw_only=True):
    """The first request whose replayed figures part from its measured ones (more than 5 % and one step)."""

    request_id: Annotated[str | None, field_doc("its id")]
    arrival_s: Annotated[float, field_doc("its arrival, seconds since the first", "s")]
    measured: Annotated[dict[str, float | None], field_doc("queue_s, ttft_s, e2e_s as measured", "s")]
    replayed: Annotated[dict[str, float | None], field_doc("the same, replayed", "s")]
    requests_parted: Annotated[int, field_doc("requests that part so, in all", "requests")]


class SchedulerCheck(Scores, kw_only=True):
    """The replay with the engine's own step times, the cost model out of the way: its scheduler's error."""

    method: Annotated[str, field_doc("how, in words")]
    requests: Annotated[int, field_doc("requests scored: all", "requests")]
    steps_logged: Annotated[int, field_doc("steps the engine logged", "steps")]
    steps_replayed: Annotated[int, field_doc("steps the replay took", "steps")]
    stalls_paused: Annotated[int, field_doc("engine stalls replayed as pauses at their time", "count")]
    first_divergence: Annotated[Divergence | None, field_doc("the first request to part (null: none)")]


class Validation(Scores, kw_only=True):
    """The replay's error on the held-out last part of the run, fitted on what came before it."""

    method: Annotated[str, field_doc("the split and what was scored, in words")]
    requests: Annotated[int, field_doc("requests scored", "requests")]
    left_out: Annotated[LeftOut | None, field_doc("scored-window requests left out")]
    decode_match: Annotated[DecodeMatch | None | UnsetType, field_doc("the early fit's level match")] = UNSET
    outside_change: Annotated[
        dict[str, Change] | None | UnsetType, field_doc("time outside the engine, before and in the window")
    ] = UNSET
    speed_change: Annotated[SpeedChange | None | UnsetType, field_doc("the steps' own speed change")] = UNSET
    drift: Annotated[
        float | None | UnsetType,
        field_doc("the scored window's same-batch step time over the calibration window's (speed_change's ratio)"),
    ] = UNSET
    drift_corrected: Annotated[
        DriftCorrected | None | UnsetType,
        field_doc("the same scores with the scored window replayed at its own speed level (the drift)"),
    ] = UNSET


class Preemptions(Doc, kw_only=True):
    """Preemptions, replayed and measured."""

    replayed: Annotated[int, field_doc("in the replay", "count")]
    measured: Annotated[float | int | None, field_doc("in the run", "count")]


class CrossValidation(Scores, kw_only=True):
    """This run replayed with a step cost fitted on another run of the same engine, model and machine."""

    calibrated_on: Annotated[str, field_doc("the run it was fitted on")]
    method: Annotated[str, field_doc("how, in words")]
    requests: Annotated[int, field_doc("requests scored", "requests")]
    c0_s: Annotated[float, field_doc("fixed time per step", "s")]
    overhead_s: Annotated[float, field_doc("engine time per step", "s")]
    c_prefill_s_per_token: Annotated[float, field_doc("time per prompt token", "s")]
    c_decode_s_per_token: Annotated[float, field_doc("time per decode token", "s")]
    scale: Annotated[float, field_doc("the level matched to the other run's decode time")]
    preemptions: Annotated[Preemptions, field_doc("preemptions")]
    preemptions_mape: Annotated[float | None, field_doc("their error", "fraction")]


class PrefixCache(Doc, kw_only=True):
    """The prefix-cache hits the replay takes from the run."""

    basis: Annotated[str, field_doc("where they come from")]
    hit_tokens: Annotated[int, field_doc("prompt tokens hit", "tokens")]
    share_of_prompt_tokens: Annotated[float, field_doc("of the prompt tokens", "fraction")]


class Outcome(Doc, kw_only=True):
    """The replayed run: its latencies and the engine's work."""

    summary: Annotated[Metrics, field_doc("the replayed latencies")]
    makespan_s: Annotated[float | None, field_doc("first arrival to last finish", "s")]
    queue_median_s: Annotated[float | None, field_doc("median queue time", "s")]
    preemptions: Annotated[int, field_doc("preemptions", "count")]
    prefill_tokens: Annotated[int, field_doc("prompt tokens computed (recompute after preemption included)", "tokens")]
    prompt_steps: Annotated[int, field_doc("steps computing prompt tokens", "steps")]
    steps: Annotated[int, field_doc("steps", "steps")]
    busy_s: Annotated[float, field_doc("time the engine was stepping", "s")]
    max_running: Annotated[int, field_doc("most requests running", "requests")]
    max_waiting: Annotated[int, field_doc("most requests waiting", "requests")]
    not_finished: Annotated[int, field_doc("requests the replay could not finish", "requests")]
    notes: Annotated[list[str], field_doc("what to know when reading it")]


class Baseline(Outcome, kw_only=True):
    """The run replayed as it was, beside what it measured."""

    measured: Annotated[Metrics, field_doc("the measured latencies")]
    measured_preemptions: Annotated[float | int | None, field_doc("preemptions the run counted", "count")]


class Speedup(Doc, kw_only=True):
    """A hardware what-if's step rates over the run's."""

    decode_batch1: Annotated[float, field_doc("decode at batch 1")]
    prefill: Annotated[float | None, field_doc("prefill")]


class Direction(Doc, kw_only=True):
    """Which way a mean moved from the base run: in the real run and in the prediction."""

    real: Annotated[Literal["up", "down"], field_doc("in the real run")]
    predicted: Annotated[Literal["up", "down"], field_doc("in the what-if replayed at the real run's speed")]


class CheckPreemptions(Doc, kw_only=True):
    """Preemptions, predicted and real."""

    predicted: Annotated[int, field_doc("in the what-if", "count")]
    real: Annotated[float | int | None, field_doc("the real run's counter (null: not counted)", "count")]


class WhatIfCheck(Doc, kw_only=True):
    """A what-if scored against the real run that answers it (``--check-against``)."""

    run: Annotated[str, field_doc("the real run")]
    speed_ratio: Annotated[
        float | None, field_doc("its same-batch step time over the base run's: the host's difference (null: no log)")
    ]
    speed_basis: Annotated[str, field_doc("how the ratio was measured")]
    predicted: Annotated[Metrics, field_doc("the what-if replayed at the real run's speed")]
    real: Annotated[Metrics, field_doc("the real run, measured")]
    base: Annotated[Metrics, field_doc("the base run, measured")]
    preemptions: Annotated[CheckPreemptions, field_doc("preemptions")]
    queue_mean_err: Annotated[
        float | None, field_doc("predicted over real less 1 (null: the real mean under 1 ms)", "fraction")
    ]
    ttft_mean_err: Annotated[
        float | None, field_doc("predicted over real less 1 (null: the real mean under 1 ms)", "fraction")
    ]
    tpot_mean_err: Annotated[
        float | None, field_doc("predicted over real less 1 (null: the real mean under 1 ms)", "fraction")
    ]
    e2e_mean_err: Annotated[
        float | None, field_doc("predicted over real less 1 (null: the real mean under 1 ms)", "fraction")
    ]
    directions: Annotated[
        dict[str, Direction], field_doc("each mean the real run moved by more than 5 % from the base run")
    ]
    direction_ok: Annotated[bool, field_doc("every one of them predicted the same way")]


class WhatIf(Outcome, kw_only=True):
    """One what-if, replayed (every figure an estimate)."""

    kv_blocks: Annotated[int, field_doc("the KV blocks it had", "count")]
    what_if: Annotated[dict[str, float | int | str | bool], field_doc("its settings, key -> value")]
    asked: Annotated[str, field_doc("the --what-if text it came from")]
    basis: Annotated[str, field_doc("estimated")]
    delta: Annotated[Metrics, field_doc("its latencies less the baseline's")]
    kv_capacity: Annotated[str | UnsetType, field_doc("how its KV capacity was computed")] = UNSET
    cost_ratios: Annotated[dict[str, float] | UnsetType, field_doc("the step cost's terms moved, by ratio")] = UNSET
    step_rates: Annotated[StepRates | UnsetType, field_doc("its step cost as rates")] = UNSET
    speedup: Annotated[Speedup | UnsetType, field_doc("its rates over the run's")] = UNSET
    check: Annotated[
        WhatIfCheck | UnsetType, field_doc("scored against the real run that answers it (--check-against)")
    ] = UNSET


class Sweep(Doc, kw_only=True):
    """A --what-if that expanded into several cases (a list or a range)."""

    what_if: Annotated[str, field_doc("its text")]
    keys: Annotated[list[str], field_doc("the keys whose value varies")]
    cases: Annotated[list[int], field_doc("its cases' indexes in whatifs, in the order of its values")]


class ReplayDocument(Doc, kw_only=True):
    """What ``lltrace replay`` says of one run."""

    run: Annotated[str, field_doc("the run's id")]
    requests: Annotated[ReplayRequests, field_doc("which requests were replayed")]
    engine: Annotated[dict[str, EngineSetting], field_doc("the replayed engine's settings, name -> setting")]
    model: Annotated[Named | None, field_doc("the model, where known")]
    calibration: Annotated[Calibration, field_doc("the step cost")]
    validation: Annotated[Validation | None, field_doc("its error on the held-out window (null: nothing measured)")]
    cross_validation: Annotated[CrossValidation | None, field_doc("with a cost fitted on another run (--calibrate-on)")]
    scheduler_check: Annotated[
        SchedulerCheck | None,
        field_doc("the replay with each logged step's time (null: no step log, several engines, or a reference)"),
    ]
    prefix_cache: Annotated[PrefixCache | None, field_doc("the prefix-cache hits replayed")]
    baseline: Annotated[Baseline, field_doc("the run replayed as it was")]
    whatifs: Annotated[list[WhatIf], field_doc("each what-if")]
    sweeps: Annotated[list[Sweep], field_doc("the what-ifs that expanded into several cases")]

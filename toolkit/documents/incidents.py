"""The analysis document's ``incidents``: when a run went wrong, to whom, and why (docs/incidents.md).

An incident is a stretch of consecutive windows of arrival whose latency departed from the run's typical level
(or a baseline's, or an objective the user set); each entry says when, how far, who suffered, what the engine did
inside against outside, what changed at its start, the mechanism, who caused it, and what to change for it.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from lltrace.documents.base import Doc, field_doc
from lltrace.documents.vocabulary import Bottleneck

Metric = Literal["ttft", "tpot", "e2e", "queue"]
METRIC_NAMES: dict[str, str] = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "e2e latency", "queue": "queue time"}
"""Each metric as a sentence names it."""
TriggerKind = Literal["new_requests", "arrival_rate", "engine_slowdown", "other"]
ThresholdFrom = Literal["run", "baseline", "slo"]


class IncidentWindow(Doc, kw_only=True):
    """One window of arrival: its requests and their latency."""

    start_s: Annotated[float, field_doc("its start, seconds since the run's first counted arrival", "s")]
    requests: Annotated[int, field_doc("counted requests that arrived in it", "requests")]
    ttft_p50_s: Annotated[float | None, field_doc("median time to first token", "s")]
    ttft_p90_s: Annotated[float | None, field_doc("90th percentile time to first token", "s")]
    tpot_p50_s: Annotated[float | None, field_doc("median time per output token", "s")]
    tpot_p90_s: Annotated[float | None, field_doc("90th percentile time per output token", "s")]
    e2e_p50_s: Annotated[float | None, field_doc("median end-to-end latency", "s")]
    e2e_p90_s: Annotated[float | None, field_doc("90th percentile end-to-end latency", "s")]
    queue_p50_s: Annotated[float | None, field_doc("median engine queue time", "s")]
    queue_p90_s: Annotated[float | None, field_doc("90th percentile engine queue time", "s")]
    degraded: Annotated[list[Metric], field_doc("the metrics whose p90 was over their threshold in it")]
    step_time_mean_s: Annotated[float | None, field_doc("the engine's mean step time in it (null: no step)", "s")]
    prompt_tokens_per_step: Annotated[float | None, field_doc("mean prompt tokens an engine step", "tokens")]
    running_mean: Annotated[float | None, field_doc("requests running, mean over its samples", "requests")]
    waiting_mean: Annotated[float | None, field_doc("requests waiting, mean over its samples", "requests")]
    kv_peak: Annotated[float | None, field_doc("highest KV-cache usage at a sample in it", "fraction")]
    arrivals: Annotated[dict[str, int], field_doc("its arrivals by client ('' where none is named)", "requests")]


class Level(Doc, kw_only=True):
    """One metric's typical level over the run and the threshold a window is judged by."""

    metric: Annotated[Metric, field_doc("the metric")]
    statistic: Annotated[Literal["p90"], field_doc("the window statistic judged")]
    typical: Annotated[float | None, field_doc("the median over judged windows of the statistic", "s")]
    spread: Annotated[float | None, field_doc("the median absolute deviation of the windows from it", "s")]
    threshold: Annotated[float | None, field_doc("a window's statistic above this is degraded", "s")]
    threshold_from: Annotated[ThresholdFrom, field_doc("run (its own level), baseline (another run's) or slo")]
    rule: Annotated[str, field_doc("how the threshold was set, in words")]


class SetAside(Doc, kw_only=True):
    """A degraded stretch that is not an incident, and why."""

    start_s: Annotated[float, field_doc("its start, seconds since the run's first counted arrival", "s")]
    end_s: Annotated[float, field_doc("its end", "s")]
    metrics: Annotated[list[Metric], field_doc("the metrics degraded in it")]
    why: Annotated[str, field_doc("why it is not an incident: warm-up, no change at its start, a new workload")]


class Timeline(Doc, kw_only=True):
    """The run's latency window by window of arrival, what the incident rules read."""

    width_s: Annotated[float, field_doc("each window's width", "s")]
    judged_min_requests: Annotated[int, field_doc("requests a window needs to be judged on its own", "requests")]
    levels: Annotated[list[Level], field_doc("each metric's typical level and threshold")]
    windows: Annotated[list[IncidentWindow], field_doc("the windows with arrivals, in time order")]
    degraded_throughout: Annotated[
        bool, field_doc("more than half the judged windows were degraded: a whole-run verdict, not an incident")
    ]
    set_aside: Annotated[list[SetAside], field_doc("degraded stretches that are not incidents, each with why")]
    by: Annotated[
        Literal["arrival", "finish"],
        field_doc("arrival (requests by when they arrived), or finish (the engine's histograms count at the end)"),
    ]


class Affected(Doc, kw_only=True):
    """The requests of one client that arrived during the incident."""

    client: Annotated[str | None, field_doc("the client or file they came from")]
    requests: Annotated[int, field_doc("its requests that arrived in the incident", "requests")]
    over: Annotated[int, field_doc("those over the threshold", "requests")]
    size_classes: Annotated[list[int], field_doc("the size classes of those over (prompt tokens, power of two)")]


class Trigger(Doc, kw_only=True):
    """What changed at the incident's start."""

    kind: Annotated[TriggerKind, field_doc("new_requests, arrival_rate, engine_slowdown or other")]
    client: Annotated[str | None, field_doc("the client whose requests changed (null: none)")]
    requests: Annotated[int | None, field_doc("its requests that arrived in the incident", "requests")]
    first_arrival_s: Annotated[float | None, field_doc("its first arrival, seconds since the run's first", "s")]
    size_class: Annotated[int | None, field_doc("their commonest size class (prompt tokens, power of two)")]
    prompt_tokens_p50: Annotated[float | None, field_doc("their median prompt length", "tokens")]
    prompt_tokens_p50_before: Annotated[
        float | None, field_doc("the median prompt length of the run's requests before the incident", "tokens")
    ]
    arrival_rate: Annotated[float | None, field_doc("arrivals per second in the incident", "requests/s")]
    arrival_rate_before: Annotated[
        float | None, field_doc("arrivals per second outside it (before, else after)", "requests/s")
    ]
    step_time_ratio: Annotated[
        float | None,
        field_doc("decode-only step time inside over outside at the same batch size (null: no such steps)"),
    ]
    why: Annotated[str, field_doc("the trigger in words, with its figures")]


class Mechanism(Doc, kw_only=True):
    """Where the incident's requests' time went: the queue split, interference and preemptions inside it."""

    requests: Annotated[int, field_doc("requests that arrived in the incident", "requests")]
    e2e_s: Annotated[float, field_doc("their summed end-to-end latency", "s")]
    queue_s: Annotated[float | None, field_doc("their summed queue time", "s")]
    slot_wait_s: Annotated[float | None, field_doc("queue time waiting for a sequence slot", "s")]
    budget_wait_s: Annotated[float | None, field_doc("queue time waiting for the token budget", "s")]
    kv_wait_s: Annotated[float | None, field_doc("queue time waiting for KV room", "s")]
    load_s: Annotated[float | None, field_doc("queue time with none of the limits binding", "s")]
    interference_s: Annotated[float | None, field_doc("decode time lost to other requests' prefills", "s")]
    preempted_s: Annotated[float | None, field_doc("time preempted", "s")]
    preemptions: Annotated[int | None, field_doc("preemptions of these requests", "count")]
    shares: Annotated[dict[str, float | None], field_doc("each of the above over the summed e2e", "fraction")]
    dominant: Annotated[
        str | None, field_doc("the largest of slot_wait, budget_wait, kv_wait, load, interference, preempted")
    ]


class EngineSide(Doc, kw_only=True):
    """The engine's state over one side of the incident (inside or outside it)."""

    steps: Annotated[int | None, field_doc("engine steps", "steps")]
    step_time_mean_s: Annotated[float | None, field_doc("mean step time", "s")]
    prompt_tokens_per_step: Annotated[float | None, field_doc("mean prompt tokens computed a step", "tokens")]
    steps_with_prompts: Annotated[float | None, field_doc("share of steps computing prompt tokens", "fraction")]
    decode_reqs_per_step: Annotated[float | None, field_doc("mean requests decoding a step", "requests")]
    at_slot_cap: Annotated[float | None, field_doc("share of the time every sequence slot was taken", "fraction")]
    at_budget: Annotated[float | None, field_doc("share of the time a step used the whole token budget", "fraction")]
    kv_out: Annotated[float | None, field_doc("share of the time the queue head found no KV room", "fraction")]
    kv_peak: Annotated[float | None, field_doc("highest KV-cache usage", "fraction")]
    preemptions: Annotated[float | None, field_doc("preemptions the engine counted", "count")]
    running_mean: Annotated[float | None, field_doc("requests running, mean over its samples", "requests")]
    waiting_mean: Annotated[float | None, field_doc("requests waiting, mean over its samples", "requests")]
    arrival_rate: Annotated[float | None, field_doc("arrivals per second", "requests/s")]


class EngineInside(Doc, kw_only=True):
    """The engine inside the incident against outside it."""

    inside: Annotated[EngineSide, field_doc("during the incident")]
    outside: Annotated[EngineSide, field_doc("the rest of the run")]
    step_time_ratio: Annotated[
        float | None,
        field_doc("decode-only step time inside over outside at the same batch size: the engine's own speed"),
    ]


class Cause(Doc, kw_only=True):
    """The requests of one client that caused the incident."""

    client: Annotated[str | None, field_doc("the client or file they came from")]
    requests: Annotated[int, field_doc("its requests that arrived in the incident", "requests")]
    prompt_tokens: Annotated[int | None, field_doc("their summed prompt tokens", "tokens")]
    step_time_s: Annotated[
        float | None, field_doc("extra step time their prefills caused the requests decoding beside them", "s")
    ]
    slot_s: Annotated[float | None, field_doc("seconds they held sequence slots", "s")]


class IncidentGain(Doc, kw_only=True):
    """An incident advice's expected gain, computed on the incident's requests (an estimate)."""

    metric: Annotated[str, field_doc("what improves, for which requests")]
    from_: Annotated[float, field_doc("its value in the incident")] = msgspec.field(name="from")
    to: Annotated[float, field_doc("its value with the advice taken (an estimate)")]
    unit: Annotated[str, field_doc("the unit of from and to")]


class IncidentReplayed(Doc, kw_only=True):
    """An incident advice replayed: the incident's window under the setting it names (estimated), beside the replay's
    own figure for the window as the run was set and the measured one (the replay's error on it)."""

    change: Annotated[str, field_doc("the setting replayed: from the run's value to the replayed one")]
    why: Annotated[str, field_doc("why that value")]
    metric: Annotated[Metric, field_doc("the metric, as the item's gain names it")]
    requests: Annotated[int, field_doc("the incident's requests scored: those that suffered", "requests")]
    measured: Annotated[float | None, field_doc("their measured p90", "s")]
    replayed: Annotated[float, field_doc("their p90 replayed as the run was set", "s")]
    to: Annotated[float, field_doc("their p90 replayed with the change (an estimate)", "s")]
    unit: Annotated[str, field_doc("the unit of the figures")]
    basis: Annotated[Literal["estimated"], field_doc("a replayed figure is an estimate")]
    how: Annotated[str, field_doc("which requests were replayed and what the step cost was fitted on")]


class IncidentAdvice(Doc, kw_only=True):
    """One thing to change against the incident, with its gain on the incident's own requests."""

    bottleneck: Annotated[Bottleneck, field_doc("what it relieves")]
    setting: Annotated[str | None, field_doc("the engine setting it changes, as lltrace names it (null: none)")]
    engine_setting: Annotated[str | None, field_doc("that setting as the run's engine spells it")]
    action: Annotated[str, field_doc("what to do, in words")]
    expected_gain: Annotated[IncidentGain, field_doc("what it is expected to bring to the incident's requests")]
    formula: Annotated[str, field_doc("the arithmetic behind the gain, its inputs named")]
    basis: Annotated[Literal["estimated"], field_doc("every incident gain is an estimate")]
    replayed: Annotated[
        IncidentReplayed | None,
        field_doc(
            "the incident's window replayed with the change (null: the replay cannot: no engine timings, or a "
            "change it does not model)"
        ),
    ] = None


class Incident(Doc, kw_only=True):
    """One incident: when, how far, to whom, what the engine did, why, and what to change."""

    start_s: Annotated[
        float,
        field_doc(
            "its start, seconds since the run's first counted arrival (by finish: its samples' first window)", "s"
        ),
    ]
    end_s: Annotated[float, field_doc("its end, on the same clock as start_s", "s")]
    start_utc: Annotated[str | None, field_doc("its start in UTC (null: the run's clock is not absolute)")]
    end_utc: Annotated[str | None, field_doc("its end in UTC (null: the run's clock is not absolute)")]
    windows: Annotated[int, field_doc("windows it spans", "count")]
    metric: Annotated[Metric, field_doc("the metric that departed furthest from its threshold")]
    statistic: Annotated[Literal["p90"], field_doc("the window statistic")]
    typical: Annotated[float | None, field_doc("the metric's typical level", "s")]
    worst: Annotated[float, field_doc("its worst window's value", "s")]
    threshold: Annotated[float, field_doc("the threshold it went over", "s")]
    threshold_from: Annotated[ThresholdFrom, field_doc("run, baseline or slo")]
    metrics: Annotated[list[Metric], field_doc("every metric degraded in it")]
    requests: Annotated[int, field_doc("counted requests that arrived (by finish: finished) in it", "requests")]
    requests_over: Annotated[
        int | None, field_doc("those whose metric went over the threshold (null: no request seen alone)", "requests")
    ]
    requests_over_before: Annotated[
        int | None,
        field_doc("those of them from clients the run had before the incident (the traffic it hurt)", "requests"),
    ]
    affected: Annotated[list[Affected], field_doc("the requests in it by client, most over first")]
    engine: Annotated[EngineInside | None, field_doc("the engine inside against outside (null: no engine source)")]
    trigger: Annotated[Trigger, field_doc("what changed at its start")]
    mechanism: Annotated[Mechanism, field_doc("where its requests' time went")]
    caused_by: Annotated[list[Cause], field_doc("the requests that caused it (empty: none named)")]
    advice: Annotated[list[IncidentAdvice], field_doc("what to change for it, most valuable first")]
    verdict: Annotated[str, field_doc("the incident in one sentence with its numbers")]

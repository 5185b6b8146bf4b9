"""The diff document (``lltrace diff --json``): what changed between a baseline and an incident (two runs, or two
windows of one), per component with the request mix normalised where both have requests; from the engine's
histograms where only metrics exist; step kind by step kind where only steps exist."""

from __future__ import annotations

from typing import Annotated

from lltrace.documents.base import UNSET, Doc, UnsetType, field_doc
from lltrace.documents.rows import EngineQueueCausesRow


class Side(Doc, kw_only=True):
    """One side of the diff."""

    run: Annotated[str, field_doc("the run's id")]
    window: Annotated[list[float | None] | None, field_doc("the window compared, epoch seconds [from, to] (null: all)")]
    requests: Annotated[int | float | None, field_doc("requests compared", "requests")]
    preemptions: Annotated[float | int | None, field_doc("preemptions", "count")]
    steps: Annotated[int | UnsetType, field_doc("steps compared (a steps-only diff)", "steps")] = UNSET


class SideTokens(Doc, kw_only=True):
    """A side's tokens per request from the engine's counters."""

    input_tokens_per_request: Annotated[float | None, field_doc("prompt tokens per request", "tokens")]
    output_tokens_per_request: Annotated[float | None, field_doc("output tokens per request", "tokens")]


class Mix(Doc, kw_only=True):
    """How the two sides' request mixes compare, and whether the comparison re-weighted them."""

    overlap: Annotated[float | None, field_doc("requests in size buckets both sides have", "fraction")]
    normalised: Annotated[bool, field_doc("whether the incident's means were re-weighted to the baseline's mix")]
    buckets_shared: Annotated[int | UnsetType, field_doc("size buckets both sides have", "count")] = UNSET
    bucketing: Annotated[str | UnsetType, field_doc("how requests are bucketed by size")] = UNSET
    min_overlap: Annotated[float | UnsetType, field_doc("the overlap needed to normalise", "fraction")] = UNSET
    note: Annotated[str | UnsetType, field_doc("what the comparison is, where not normalised")] = UNSET
    baseline: Annotated[SideTokens | UnsetType, field_doc("the baseline's tokens per request (metrics only)")] = UNSET
    incident: Annotated[SideTokens | UnsetType, field_doc("the incident's tokens per request (metrics only)")] = UNSET


class ComponentChange(Doc, kw_only=True):
    """One component's mean per request (or a step kind's mean step time) on each side."""

    baseline_s: Annotated[float | None, field_doc("baseline", "s")]
    incident_s: Annotated[float | None, field_doc("incident (re-weighted to the baseline's mix where normalised)", "s")]
    delta_s: Annotated[float | None, field_doc("incident less baseline", "s")]
    share_of_change: Annotated[float | None, field_doc("of the change in mean e2e", "fraction")]
    note: Annotated[str | UnsetType, field_doc("what it does not hold, where that matters")] = UNSET
    baseline_steps: Annotated[int | UnsetType, field_doc("steps of the kind, baseline", "steps")] = UNSET
    baseline_tokens_per_step: Annotated[float | None | UnsetType, field_doc("tokens per step, baseline")] = UNSET
    baseline_s_per_token: Annotated[float | None | UnsetType, field_doc("time per token, baseline", "s")] = UNSET
    baseline_token_steps: Annotated[int | UnsetType, field_doc("steps giving tokens, baseline", "steps")] = UNSET
    baseline_gpu_busy_s: Annotated[float | None | UnsetType, field_doc("GPU busy per step, baseline", "s")] = UNSET
    incident_steps: Annotated[int | UnsetType, field_doc("steps of the kind, incident", "steps")] = UNSET
    incident_tokens_per_step: Annotated[float | None | UnsetType, field_doc("tokens per step, incident")] = UNSET
    incident_s_per_token: Annotated[float | None | UnsetType, field_doc("time per token, incident", "s")] = UNSET
    incident_token_steps: Annotated[int | UnsetType, field_doc("steps giving tokens, incident", "steps")] = UNSET
    incident_gpu_busy_s: Annotated[float | None | UnsetType, field_doc("GPU busy per step, incident", "s")] = UNSET


class QuantileChange(Doc, kw_only=True):
    """A latency's p90 on each side, estimated from the engine's histograms."""

    baseline_p90: Annotated[float | None, field_doc("baseline p90", "s")]
    incident_p90: Annotated[float | None, field_doc("incident p90", "s")]
    baseline_p90_bucket: Annotated[list[float | None] | None, field_doc("the bucket it fell in: [lo, hi] (s)")]
    incident_p90_bucket: Annotated[list[float | None] | None, field_doc("the bucket it fell in: [lo, hi] (s)")]


class KernelClassChange(Doc, kw_only=True):
    """GPU time per step in one kernel class on each side."""

    baseline_s_per_step: Annotated[float, field_doc("baseline", "s")]
    incident_s_per_step: Annotated[float, field_doc("incident", "s")]
    delta_s: Annotated[float, field_doc("incident less baseline", "s")]


class Failures(Doc, kw_only=True):
    """A side's failed requests among all it holds."""

    requests: Annotated[int | float | None, field_doc("requests (or responses)", "requests")]
    failed: Annotated[int | float | None, field_doc("failed among them", "requests")]
    basis: Annotated[str, field_doc("requests, or the API server's responses")]


class FailureSides(Doc, kw_only=True):
    """Each side's failed requests (null where neither its requests nor its API server's responses tell)."""

    baseline: Annotated[Failures | None, field_doc("the baseline's")]
    incident: Annotated[Failures | None, field_doc("the incident's")]


class SettingChange(Doc, kw_only=True):
    """An engine setting the two sides give different values."""

    setting: Annotated[str, field_doc("the setting")]
    baseline: Annotated[float | None, field_doc("its baseline value (null: not known)")]
    incident: Annotated[float | None, field_doc("its incident value")]
    basis: Annotated[str, field_doc("where each value comes from: baseline -> incident")]


class QueueSides(Doc, kw_only=True):
    """What the engine's waiting requests waited for, on each side (``engine_queue_causes``)."""

    baseline: Annotated[EngineQueueCausesRow | None, field_doc("baseline")]
    incident: Annotated[EngineQueueCausesRow | None, field_doc("incident")]


class OnlyIn(Doc, kw_only=True):
    """Requests one side has that the other lacks: a client it does not have, or a size class of a client it has."""

    client: Annotated[str | None, field_doc("the client or file they came from")]
    size_class: Annotated[int | None, field_doc("their commonest size class (prompt tokens, power of two)")]
    requests: Annotated[int, field_doc("how many", "requests")]
    arrival_rate: Annotated[float | None, field_doc("their arrivals per second over their span", "requests/s")]
    prompt_tokens_p50: Annotated[float | None, field_doc("their median prompt length", "tokens")]


class DifferWindow(Doc, kw_only=True):
    """A stretch of the incident run whose latency departed from the baseline's typical level (by arrival)."""

    start_s: Annotated[float, field_doc("its start, seconds since the incident run's first arrival", "s")]
    end_s: Annotated[float, field_doc("its end", "s")]
    metric: Annotated[str, field_doc("the metric that departed furthest")]
    baseline: Annotated[float | None, field_doc("the baseline run's typical p90 of it", "s")]
    incident: Annotated[float, field_doc("the incident run's worst window p90 of it", "s")]
    threshold_from: Annotated[
        str, field_doc("baseline (twice its typical level), or run (the incident run was above that throughout)")
    ]


class DiffDocument(Doc, kw_only=True):
    """What ``lltrace diff`` says changed."""

    basis: Annotated[str | UnsetType, field_doc("engine histograms, profiler steps or engine log steps")] = UNSET
    queue: Annotated[QueueSides | UnsetType, field_doc("the engine's queue on each side (a steps-only diff)")] = UNSET
    baseline: Annotated[Side, field_doc("the baseline")]
    incident: Annotated[Side, field_doc("the incident")]
    mix: Annotated[Mix, field_doc("how their request mixes compare")]
    components: Annotated[dict[str, ComponentChange], field_doc("per component (or step kind): each side and change")]
    quantiles: Annotated[
        dict[str, QuantileChange] | UnsetType, field_doc("the p90s' change (metrics only), per latency")
    ] = UNSET
    kernel_classes: Annotated[
        dict[str, KernelClassChange] | UnsetType, field_doc("GPU time per step by kernel class (steps only)")
    ] = UNSET
    verdict: Annotated[str, field_doc("what changed, in words, the largest change first")]
    failures: Annotated[FailureSides, field_doc("each side's failed requests")]
    settings_changed: Annotated[list[SettingChange], field_doc("the engine settings the sides give differently")]
    only_in_incident: Annotated[
        list[OnlyIn], field_doc("requests the incident has that the baseline lacks (a client, a size class)")
    ]
    only_in_baseline: Annotated[list[OnlyIn], field_doc("requests the baseline has that the incident lacks")]
    windows: Annotated[
        list[DifferWindow],
        field_doc("where the incident run's windows of arrival went over twice the baseline's typical level"),
    ]

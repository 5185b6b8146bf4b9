"""The analysis document (``lltrace analyze --json``, ``Analysis.document``): one section per question, each a
type of its own, in the order a reader acts on them.

A section the run's sources cannot fill is null (a list section: empty), never a guess.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from lltrace.documents.attribution import Attribution, RequestsSection, Setting
from lltrace.documents.base import UNSET, Doc, UnsetType, field_doc
from lltrace.documents.clients import ClientSummary
from lltrace.documents.incidents import Incident, Timeline
from lltrace.documents.rows import (
    EngineHistogramQuantilesRow,
    EngineLatencyHistogramsRow,
    EngineQueueCausesRow,
    EngineReplicasRow,
    EngineSpeculativeRow,
    WorkloadMixRow,
)
from lltrace.documents.run import RunSection
from lltrace.documents.steps import ProfileSection, StepsSection
from lltrace.documents.vocabulary import Bottleneck, Label


class Thresholds(Doc, kw_only=True):
    """The classification rule's thresholds (``queries/thresholds.csv``), shown with every verdict."""

    dominant_share: Annotated[float, field_doc("a component at or above this share of e2e names the run", "fraction")]
    capacity_part_of_queue: Annotated[
        float, field_doc("a queue-bound run is capacity-bound at or above this KV-room share of its queue", "fraction")
    ]
    order: Annotated[list[str], field_doc("the components in the order the rule tries them")]


class Assumption(Doc, kw_only=True):
    """The latency model an estimated classification used."""

    model: Annotated[str, field_doc("the model")]
    gpu: Annotated[str, field_doc("the GPU")]
    prefill_tokens_per_s: Annotated[float, field_doc("the modelled prefill rate", "tokens/s")]
    decode_s_per_token: Annotated[float, field_doc("the modelled decode time per token", "s")]


class Classification(Doc, kw_only=True):
    """The run's label and why."""

    label: Annotated[Label, field_doc("the workload's label")]
    why: Annotated[str, field_doc("the figures that decided it, in one sentence")]
    prefill_share: Annotated[float | None, field_doc("prefill's share of the latency it was read from", "fraction")]
    decode_share: Annotated[float | None, field_doc("decode's share", "fraction")]
    queue_share: Annotated[float | None, field_doc("queueing's share (null: not known)", "fraction")]
    requests_prefill_dominant: Annotated[
        int | None | UnsetType, field_doc("requests whose prefill took longer than their decode", "requests")
    ] = UNSET
    requests: Annotated[int | None | UnsetType, field_doc("requests classified", "requests")] = UNSET
    crossover_input_tokens: Annotated[
        float | None, field_doc("L*: the prompt length at which prefill and decode take as long", "tokens")
    ]
    crossover_formula: Annotated[str | None | UnsetType, field_doc("how L* was computed")] = UNSET
    basis: Annotated[
        str | UnsetType,
        field_doc("what it was read from where not the requests' measured attribution (estimated, engine histograms)"),
    ] = UNSET
    assumption: Annotated[Assumption | UnsetType, field_doc("the model behind an estimated label")] = UNSET
    thresholds: Annotated[Thresholds, field_doc("the rule's thresholds")]


class Gain(Doc, kw_only=True):
    """An advice's expected gain, computed from the run's own numbers."""

    metric: Annotated[str, field_doc("what improves")]
    from_: Annotated[float, field_doc("its value now, in `unit`")] = msgspec.field(name="from")
    to: Annotated[float, field_doc("its value with the advice taken, in `unit` (an estimate)")]
    unit: Annotated[str, field_doc("the unit of from and to")]


Figure = float | int | str | bool | Setting | None


class Advice(Doc, kw_only=True):
    """One item of advice, tied to the bottleneck it relieves."""

    bottleneck: Annotated[Bottleneck, field_doc("what it relieves")]
    setting: Annotated[str | None, field_doc("the engine setting it changes, as lltrace names it (null: none)")]
    engine_setting: Annotated[
        str | None | UnsetType, field_doc("that setting as the run's engine spells it (a flag or parameter)")
    ] = UNSET
    action: Annotated[str, field_doc("what to do, in words")]
    expected_gain: Annotated[Gain, field_doc("what it is expected to bring")]
    formula: Annotated[str, field_doc("the arithmetic behind the gain, its inputs named")]
    evidence: Annotated[dict[str, Figure], field_doc("the measured figures it rests on, by name")]


class KvSection(Doc, kw_only=True):
    """KV-cache pressure and the prefix cache."""

    peak_usage: Annotated[float | None, field_doc("highest KV-cache usage at a sample", "fraction")]
    preemptions: Annotated[float | int | None, field_doc("preemptions over the run", "count")]
    peak_waiting: Annotated[float | None, field_doc("most requests waiting at one moment", "requests")]
    peak_waiting_capacity: Annotated[
        float | None, field_doc("most requests waiting for scheduling capacity at one moment", "requests")
    ]
    kv_wait_s: Annotated[float | None, field_doc("queue time waiting for KV room (the attribution's kv_wait)", "s")]
    prefix_cache_hit_rate: Annotated[float | None, field_doc("prefix-cache hit tokens over queried tokens", "fraction")]
    prefix_cache_hit_basis: Annotated[str | None, field_doc("where the hit rate comes from")]
    prefix_cache_hit_tokens: Annotated[float | None, field_doc("prompt tokens the cache hit", "tokens")]
    prefix_cache_queried_tokens: Annotated[float | None, field_doc("prompt tokens looked up", "tokens")]
    prefix_cached_share: Annotated[float | None, field_doc("cached prompt tokens over prompt tokens", "fraction")]
    prefix_cached_basis: Annotated[str | None, field_doc("where the cached share comes from")]
    prefix_cached_requests: Annotated[int | None, field_doc("requests with a cached-token figure", "requests")]
    prefix_cached_requests_basis: Annotated[str | None, field_doc("where their figures come from")]


class EngineWindow(Doc, kw_only=True):
    """The engine's own figures over one window of its timeline (its metrics: gauges, counters, histograms)."""

    window_start_s: Annotated[float | None, field_doc("the window's start on the run clock", "s")]
    runs: Annotated[int, field_doc("runs with a sample in it", "count")]
    engines: Annotated[int | float | None, field_doc("engines with a sample in it", "count")]
    requests: Annotated[float | None, field_doc("requests the e2e histogram counted (finished in it)", "requests")]
    mean_running: Annotated[float | None, field_doc("requests running, mean over the window", "requests")]
    mean_waiting: Annotated[float | None, field_doc("requests waiting, mean over the window", "requests")]
    peak_kv_usage: Annotated[float | None, field_doc("highest KV-cache usage at a sample", "fraction")]
    preemptions: Annotated[float | None, field_doc("preemptions", "count")]
    peak_waiting_capacity: Annotated[float | None, field_doc("most requests waiting for capacity", "requests")]
    queue_share: Annotated[float | None, field_doc("summed queue over summed e2e", "fraction")]
    prefill_time_share: Annotated[float | None, field_doc("prefill over prefill and decode time", "fraction")]
    e2e_mean_s: Annotated[float | None, field_doc("mean end-to-end latency", "s")]
    prompt_tokens: Annotated[float | None, field_doc("prompt tokens processed", "tokens")]
    generation_tokens: Annotated[float | None, field_doc("tokens generated", "tokens")]
    e2e_sum_s: Annotated[float | None, field_doc("summed end-to-end latency", "s")]
    queue_sum_s: Annotated[float | None, field_doc("summed queue time", "s")]
    queue_n: Annotated[float | None, field_doc("requests the queue histogram counted", "requests")]
    prefill_sum_s: Annotated[float | None, field_doc("summed prefill time", "s")]
    decode_sum_s: Annotated[float | None, field_doc("summed decode time", "s")]
    http_2xx: Annotated[float | None, field_doc("API server responses with a 2xx status", "count")]
    http_4xx: Annotated[float | None, field_doc("responses with a 4xx status (refused)", "count")]
    http_5xx: Annotated[float | None, field_doc("responses with a 5xx status (failed)", "count")]
    http_responses: Annotated[float | None, field_doc("responses with a 2xx, 4xx or 5xx status", "count")]
    http_failed: Annotated[float | None, field_doc("responses with a 4xx or 5xx status", "count")]
    input_p50: Annotated[float | None, field_doc("median prompt tokens (histogram estimate)", "tokens")]
    input_p90: Annotated[float | None, field_doc("90th percentile prompt tokens", "tokens")]
    input_p90_bucket: Annotated[list[float | None] | None, field_doc("the bucket the p90 fell in: [lo, hi]")]
    output_p50: Annotated[float | None, field_doc("median output tokens", "tokens")]
    output_p90: Annotated[float | None, field_doc("90th percentile output tokens", "tokens")]
    output_p90_bucket: Annotated[list[float | None] | None, field_doc("the bucket the p90 fell in: [lo, hi]")]
    ttft_p50: Annotated[float | None, field_doc("median TTFT", "s")]
    ttft_p90: Annotated[float | None, field_doc("90th percentile TTFT", "s")]
    ttft_p90_bucket: Annotated[list[float | None] | None, field_doc("the bucket the p90 fell in: [lo, hi] (s)")]
    e2e_p50: Annotated[float | None, field_doc("median e2e", "s")]
    e2e_p90: Annotated[float | None, field_doc("90th percentile e2e", "s")]
    e2e_p90_bucket: Annotated[list[float | None] | None, field_doc("the bucket the p90 fell in: [lo, hi] (s)")]
    queue_p50: Annotated[float | None, field_doc("median queue time", "s")]
    queue_p90: Annotated[float | None, field_doc("90th percentile queue time", "s")]
    queue_p90_bucket: Annotated[list[float | None] | None, field_doc("the bucket the p90 fell in: [lo, hi] (s)")]
    tpot_p50: Annotated[float | None, field_doc("median TPOT", "s")]
    tpot_p90: Annotated[float | None, field_doc("90th percentile TPOT", "s")]
    tpot_p90_bucket: Annotated[list[float | None] | None, field_doc("the bucket the p90 fell in: [lo, hi] (s)")]


class EngineTimeline(Doc, kw_only=True):
    """The engine's own figures window by window over the run."""

    width_s: Annotated[float, field_doc("each window's width", "s")]
    windows: Annotated[list[EngineWindow], field_doc("the windows, in time order")]


class AnalysisDocument(Doc, kw_only=True):
    """What ``lltrace analyze`` says of one run."""

    run: Annotated[RunSection, field_doc("the run and its sources")]
    requests: Annotated[RequestsSection | None, field_doc("its requests and their latencies")]
    attribution: Annotated[Attribution | None, field_doc("where the requests' time went")]
    classification: Annotated[Classification | None, field_doc("the workload's label and why")]
    incidents: Annotated[
        list[Incident], field_doc("when the run went wrong, to whom and why: worst first (empty: none)")
    ]
    incident_timeline: Annotated[
        Timeline | None, field_doc("the latency window by window of arrival the incidents were read from")
    ]
    steps: Annotated[StepsSection | None, field_doc("the engine's steps")]
    profile: Annotated[ProfileSection | None, field_doc("the profiler's GPU work")]
    kv: Annotated[KvSection | None, field_doc("KV-cache pressure and the prefix cache")]
    speculative: Annotated[EngineSpeculativeRow | None, field_doc("speculative decoding, where the engine drafts")]
    workload: Annotated[WorkloadMixRow | None, field_doc("the request mix and rate")]
    client_summary: Annotated[list[ClientSummary], field_doc("the summaries benchmark clients wrote")]
    engine_latency: Annotated[
        EngineLatencyHistogramsRow | None, field_doc("the engine's own latency histograms over the run")
    ]
    replicas: Annotated[list[EngineReplicasRow], field_doc("each replica of a fleet's export side by side")]
    engine_quantiles: Annotated[
        list[EngineHistogramQuantilesRow], field_doc("quantile estimates from the engine's histograms")
    ]
    engine_queue_causes: Annotated[
        EngineQueueCausesRow | None, field_doc("what the engine's waiting requests waited for, from its own state")
    ]
    engine_timeline: Annotated[EngineTimeline | None, field_doc("the engine's figures window by window")]
    advice: Annotated[list[Advice], field_doc("what to change, most valuable first")]

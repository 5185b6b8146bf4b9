"""The ``requests`` and ``attribution`` sections of the analysis document: the run's latencies, where each
request's time went (the additive components and the parts of queueing), by client, and the slowest tenth."""

from __future__ import annotations

from typing import Annotated

from lltrace.documents.base import UNSET, Doc, Row, UnsetType, field_doc
from lltrace.documents.rows import AttributionClientRow, AttributionTailRow
from lltrace.documents.vocabulary import Basis, Component, Outcome, QueuePart


class Distribution(Doc, kw_only=True):
    """A latency over the counted requests (null where no request has it)."""

    p50: Annotated[float | None, field_doc("median", "s")]
    p90: Annotated[float | None, field_doc("90th percentile", "s")]
    p99: Annotated[float | None, field_doc("99th percentile", "s")]
    mean: Annotated[float | None, field_doc("mean", "s")]


class Cause(Row, kw_only=True):
    """One cause of failure among the requests left out, as the sources state it (``requests_errors``)."""

    cause: Annotated[str, field_doc("the cause as people name it: `HTTP 429 Too Many Requests`, `code -100`, a text")]
    error_code: Annotated[int | None, field_doc("the HTTP status (or the client's own code) the requests failed with")]
    error: Annotated[str | None, field_doc("the error text: the group's own, else the commonest with the status")]
    texts: Annotated[int | None, field_doc("distinct error texts in the group", "count")]
    requests: Annotated[int | None, field_doc("requests in the group", "requests")]
    first_arrival_s: Annotated[
        float | None, field_doc("when the group's first request arrived, after the run's first arrival", "s")
    ]
    last_arrival_s: Annotated[float | None, field_doc("when its last request arrived", "s")]


class Excluded(Doc, kw_only=True):
    """The requests of one outcome left out of the run's figures."""

    outcome: Annotated[Outcome, field_doc("why they are left out")]
    requests: Annotated[int, field_doc("how many", "requests")]
    why: Annotated[str, field_doc("the outcome in words")]
    causes: Annotated[list[Cause], field_doc("their causes as the sources give them, commonest first (at most five)")]
    other_causes: Annotated[int, field_doc("requests of causes past the five listed", "requests")]
    no_cause_given: Annotated[int, field_doc("requests no source gave a cause for", "requests")]


class RequestsSection(Doc, kw_only=True):
    """How many requests the run holds, which count, and their latencies."""

    count: Annotated[int | None, field_doc("requests in the run (all statuses)", "requests")]
    errors: Annotated[int | None, field_doc("requests that failed", "requests")]
    counted: Annotated[int | None, field_doc("requests the run's figures count", "requests")]
    excluded: Annotated[list[Excluded], field_doc("the requests left out, by outcome, most first")]
    basis: Annotated[str | None, field_doc("client, server or mixed: who measured the latencies")]
    ttft_s: Annotated[Distribution | None, field_doc("time to first token")]
    tpot_s: Annotated[Distribution | None, field_doc("time per output token after the first")]
    e2e_s: Annotated[Distribution | None, field_doc("end-to-end latency")]
    queue_s: Annotated[Distribution | None, field_doc("engine queue time")]


class ComponentTotal(Doc, kw_only=True):
    """One additive component of latency over the attributed requests."""

    total_s: Annotated[float | None, field_doc("summed over the requests", "s")]
    share: Annotated[float | None, field_doc("of the summed end-to-end latency (the five shares sum to 1)", "fraction")]
    basis: Annotated[Basis | None, field_doc("how it was obtained")]
    note: Annotated[str | UnsetType, field_doc("what it does not hold, where that matters")] = UNSET


class Setting(Doc, kw_only=True):
    """An engine setting as the run resolves it (``engine_config``)."""

    value: Annotated[float | None, field_doc("its value (1 or 0 for on or off; tokens, blocks or sequences)")]
    basis: Annotated[str | None, field_doc("stated, derived, default (the engine's documented default) or inferred")]
    origin: Annotated[str | None, field_doc("where the value comes from, in words")]


class Evidence(Doc, kw_only=True):
    """What a part of queueing rests on: for a limit, the rule, the engine timeline it was read from and the limit's
    setting; for load, how much of the queue could be placed on that timeline."""

    rule: Annotated[str | UnsetType, field_doc("when a moment counts for this part, in words")] = UNSET
    timeline: Annotated[str | UnsetType, field_doc("the engine timeline the moments come from")] = UNSET
    segments: Annotated[int | UnsetType, field_doc("timeline segments where this part bound", "count")] = UNSET
    of_segments: Annotated[int | UnsetType, field_doc("timeline segments in all", "count")] = UNSET
    max_num_seqs: Annotated[Setting | UnsetType, field_doc("the sequence limit")] = UNSET
    max_num_batched_tokens: Annotated[Setting | UnsetType, field_doc("the step's token budget")] = UNSET
    kv_cache_tokens: Annotated[Setting | UnsetType, field_doc("the KV cache's size in tokens")] = UNSET
    speculative_tokens: Annotated[Setting | UnsetType, field_doc("draft tokens a step (speculative decoding)")] = UNSET
    draft_slots: Annotated[Setting | UnsetType, field_doc("budget slots the drafter takes a scheduled request")] = UNSET
    requests_split: Annotated[
        int | None | UnsetType, field_doc("load: requests whose queue was placed on the engine's timeline")
    ] = UNSET
    unplaced_s: Annotated[
        float | None | UnsetType, field_doc("load: queue of requests with no engine queue interval to place", "s")
    ] = UNSET
    engines_differed_s: Annotated[
        float | UnsetType, field_doc("load: queue while data-parallel engines' states differed", "s")
    ] = UNSET


class QueueShare(Doc, kw_only=True):
    """One part of queueing: the queue time spent while the engine was out of one thing."""

    total_s: Annotated[float | None, field_doc("summed over the requests (null: no source can tell)", "s")]
    share_of_parent: Annotated[float | None, field_doc("of the queue time", "fraction")]
    basis: Annotated[Basis | None, field_doc("how it was obtained")]
    note: Annotated[str | UnsetType, field_doc("what is missing to tell it, or what it holds")] = UNSET
    evidence: Annotated[Evidence | UnsetType, field_doc("what it rests on")] = UNSET


class Interference(Doc, kw_only=True):
    """Decode time lost to other requests' prefill in shared steps (part of decode)."""

    total_s: Annotated[float | None, field_doc("suffered, summed over the requests", "s")]
    share_of_parent: Annotated[float | None, field_doc("of the decode time", "fraction")]
    basis: Annotated[Basis | None, field_doc("how it was obtained (estimated)")]
    caused_total_s: Annotated[
        float | None | UnsetType, field_doc("caused, summed over the prefilling requests", "s")
    ] = UNSET
    mixed_steps: Annotated[int | UnsetType, field_doc("steps that carried prefill and decode work", "steps")] = UNSET
    method: Annotated[str | UnsetType, field_doc("how it is measured, in words")] = UNSET


class Tail(Doc, kw_only=True):
    """The slowest tenth of the requests against the rest."""

    slowest: Annotated[AttributionTailRow, field_doc("the slowest 10 %: means per request")]
    rest: Annotated[AttributionTailRow, field_doc("the rest")]
    gap_s: Annotated[float, field_doc("mean e2e, slowest less rest", "s")]
    gap_by_part_s: Annotated[dict[Component, float], field_doc("per component, slowest less rest (seconds)")]
    lead: Annotated[Component, field_doc("the component with the largest gap")]
    verdict: Annotated[str, field_doc("one sentence on it")]


class Attribution(Doc, kw_only=True):
    """Where the attributed requests' time went."""

    queue: Annotated[ComponentTotal, field_doc("engine queue: queued to first scheduled")]
    prefill: Annotated[ComponentTotal, field_doc("first scheduled to first token")]
    decode: Annotated[ComponentTotal, field_doc("first token to last token")]
    preempted: Annotated[ComponentTotal, field_doc("preemption to rescheduling, where a source times it")]
    overhead: Annotated[ComponentTotal, field_doc("end-to-end latency the engine does not cover")]
    interference: Annotated[Interference, field_doc("part of decode: other requests' prefill in shared steps")]
    requests: Annotated[int, field_doc("requests attributed", "requests")]
    requests_incomplete: Annotated[int | None, field_doc("successful requests with a component unknown", "requests")]
    clock_errors: Annotated[int | None, field_doc("requests whose overhead is negative beyond tolerance", "requests")]
    e2e_s_total: Annotated[float | None, field_doc("summed end-to-end latency", "s")]
    prefill_tokens_per_s: Annotated[float | None, field_doc("the run's measured prefill rate of prompt tokens")]
    prefill_cached_tokens: Annotated[int | None, field_doc("prompt tokens taken from the prefix cache", "tokens")]
    prefill_computed_tokens_per_s: Annotated[float | None, field_doc("the prefill rate of the tokens computed")]
    decode_s_per_token: Annotated[float | None, field_doc("the run's decode time per output token", "s")]
    kv_wait: Annotated[QueueShare, field_doc("queue time with no KV-cache room for the queue head")]
    slot_wait: Annotated[QueueShare, field_doc("queue time with every sequence slot taken")]
    budget_wait: Annotated[QueueShare, field_doc("queue time with the step's token budget used")]
    load_wait: Annotated[QueueShare, field_doc("the rest of the queue: behind other work, no limit binding")]
    by_client: Annotated[
        list[AttributionClientRow] | None, field_doc("per client, means per request (null: one client)")
    ]
    tail: Annotated[Tail | None, field_doc("the slowest tenth against the rest (null: too few requests)")]

    def component(self, c: Component) -> ComponentTotal:
        """One additive component, by its word."""
        return getattr(self, c.value)

    def part(self, p: QueuePart) -> QueueShare:
        """One part of queueing, by its word."""
        return getattr(self, p.value)

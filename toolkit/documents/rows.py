"""The rows of the query views the documents carry, one class per view: written by
``python -m lltrace.documents.generate`` from each view's header (``queries/<view>.sql``) and the types
DuckDB gives its columns. Do not edit: change the view and run the generator."""

from __future__ import annotations

from typing import Annotated

from lltrace.documents.base import Row, field_doc


class RequestsSummaryRow(Row, kw_only=True):
    """A row of ``requests_summary``: latency percentiles over a run's counted requests (requests_latency.counted)."""

    requests: Annotated[int | None, field_doc("requests in the run (all statuses)")]
    errors: Annotated[int | None, field_doc("requests that failed")]
    counted: Annotated[int | None, field_doc("requests the run's figures count (requests_latency.counted)")]
    excluded: Annotated[
        int | None,
        field_doc(
            "requests left out of the figures: failed, cancelled, incomplete, warm-up or cool-down",
        ),
    ]
    basis: Annotated[
        str | None,
        field_doc(
            "client | server | mixed: where the latencies come from (NULL: no request has one)",
        ),
    ]
    ttft_p50: Annotated[float | None, field_doc("median time to first token, seconds", "s")]
    ttft_p90: Annotated[float | None, field_doc("90th percentile TTFT, seconds", "s")]
    ttft_p99: Annotated[float | None, field_doc("99th percentile TTFT, seconds", "s")]
    ttft_mean: Annotated[float | None, field_doc("mean TTFT, seconds", "s")]
    tpot_p50: Annotated[float | None, field_doc("median time per output token, seconds", "s")]
    tpot_p90: Annotated[float | None, field_doc("90th percentile TPOT, seconds", "s")]
    tpot_p99: Annotated[float | None, field_doc("99th percentile TPOT, seconds", "s")]
    tpot_mean: Annotated[float | None, field_doc("mean TPOT, seconds", "s")]
    e2e_p50: Annotated[float | None, field_doc("median end-to-end latency, seconds", "s")]
    e2e_p90: Annotated[float | None, field_doc("90th percentile e2e, seconds", "s")]
    e2e_p99: Annotated[float | None, field_doc("99th percentile e2e, seconds", "s")]
    e2e_mean: Annotated[float | None, field_doc("mean e2e, seconds", "s")]
    queue_p50: Annotated[float | None, field_doc("median engine queue time, seconds", "s")]
    queue_p90: Annotated[float | None, field_doc("90th percentile queue time, seconds", "s")]
    queue_p99: Annotated[float | None, field_doc("99th percentile queue time, seconds", "s")]
    queue_mean: Annotated[float | None, field_doc("mean queue time, seconds", "s")]


class AttributionRunRow(Row, kw_only=True):
    """A row of ``attribution_run``:
    a run's latency by component, summed over its requests, with shares of summed e2e.
    """

    requests: Annotated[int | None, field_doc("requests attributed")]
    requests_incomplete: Annotated[int | None, field_doc("successful requests with a component unknown")]
    clock_errors: Annotated[int | None, field_doc("attributed requests whose overhead is negative beyond tolerance")]
    e2e_s: Annotated[float | None, field_doc("summed e2e, seconds", "s")]
    queue_s: Annotated[float | None, field_doc("summed queue, seconds", "s")]
    prefill_s: Annotated[float | None, field_doc("summed prefill, seconds", "s")]
    decode_s: Annotated[float | None, field_doc("summed decode, seconds", "s")]
    preempted_s: Annotated[float | None, field_doc("summed preempted time, seconds", "s")]
    overhead_s: Annotated[float | None, field_doc("summed overhead, seconds", "s")]
    queue_share: Annotated[float | None, field_doc("queue_s / e2e_s", "fraction")]
    prefill_share: Annotated[float | None, field_doc("prefill_s / e2e_s", "fraction")]
    decode_share: Annotated[float | None, field_doc("decode_s / e2e_s", "fraction")]
    preempted_share: Annotated[float | None, field_doc("preempted_s / e2e_s", "fraction")]
    overhead_share: Annotated[float | None, field_doc("overhead_s / e2e_s", "fraction")]
    queue_basis: Annotated[str | None, field_doc("measured | estimated | mixed")]
    prefill_basis: Annotated[str | None, field_doc("measured | estimated | mixed")]
    decode_basis: Annotated[str | None, field_doc("measured | derived | mixed")]
    prefill_tokens_per_s: Annotated[
        float | None,
        field_doc(
            "summed input tokens / summed prefill time (the run's measured prefill rate, of prompt tokens: those "
            "taken from the prefix cache count as prefilled)",
        ),
    ]
    prefill_cached_tokens: Annotated[
        int | None,
        field_doc(
            "summed prompt tokens the requests took from the prefix cache (requests_cached_tokens), NULL unless "
            "every attributed request's figure is known",
        ),
    ]
    prefill_computed_tokens_per_s: Annotated[
        float | None,
        field_doc(
            "(summed input tokens - prefill_cached_tokens) / summed prefill time: the rate of the prompt tokens "
            "the engine computed (NULL where prefill_cached_tokens is)",
        ),
    ]
    decode_s_per_token: Annotated[
        float | None,
        field_doc(
            "summed decode time / summed tokens after the first (the run's time per output token)",
        ),
    ]
    mean_output_tokens: Annotated[float | None, field_doc("mean generated tokens per request")]
    prefill_dominant_requests: Annotated[int | None, field_doc("requests whose prefill took longer than their decode")]


class AttributionClientRow(Row, kw_only=True):
    """A row of ``attribution_client``:
    a run's latency by component per client, as means per request: each file or benchmark the
    """

    client_id: Annotated[str | None, field_doc("client or file the requests came from")]
    requests: Annotated[int | None, field_doc("requests attributed")]
    first_arrival_s: Annotated[float | None, field_doc("the client's first arrival on the run clock, seconds", "s")]
    arrival_rate_per_s: Annotated[
        float | None,
        field_doc(
            "its requests over the span of its arrivals, per second (NULL for fewer than two)",
        ),
    ]
    e2e_s: Annotated[float | None, field_doc("mean e2e, seconds", "s")]
    e2e_p90_s: Annotated[float | None, field_doc("90th percentile e2e, seconds", "s")]
    queue_s: Annotated[float | None, field_doc("mean queue, seconds", "s")]
    kv_wait_s: Annotated[float | None, field_doc("mean queue time waiting for KV room, seconds", "s")]
    slot_wait_s: Annotated[float | None, field_doc("mean queue time waiting for a sequence slot, seconds", "s")]
    budget_wait_s: Annotated[float | None, field_doc("mean queue time waiting for the token budget, seconds", "s")]
    prefill_s: Annotated[float | None, field_doc("mean prefill, seconds", "s")]
    decode_s: Annotated[float | None, field_doc("mean decode, seconds", "s")]
    preempted_s: Annotated[float | None, field_doc("mean preempted time, seconds", "s")]
    overhead_s: Annotated[float | None, field_doc("mean overhead, seconds", "s")]
    mean_input_tokens: Annotated[float | None, field_doc("mean prompt tokens")]
    mean_output_tokens: Annotated[float | None, field_doc("mean generated tokens")]


class AttributionTailRow(Row, kw_only=True):
    """A row of ``attribution_tail``:
    the slowest tenth of a run's requests (e2e at or above the run's 90th percentile) against the
    """

    part: Annotated[str | None, field_doc("slowest | rest")]
    requests: Annotated[int | None, field_doc("requests in the part")]
    e2e_from_s: Annotated[float | None, field_doc("the part's smallest e2e, seconds (the slowest: the run's p90)", "s")]
    e2e_s: Annotated[float | None, field_doc("mean e2e, seconds", "s")]
    queue_s: Annotated[float | None, field_doc("mean queue, seconds", "s")]
    kv_wait_s: Annotated[float | None, field_doc("mean queue time waiting for KV room, seconds", "s")]
    slot_wait_s: Annotated[float | None, field_doc("mean queue time waiting for a sequence slot, seconds", "s")]
    budget_wait_s: Annotated[float | None, field_doc("mean queue time waiting for the token budget, seconds", "s")]
    prefill_s: Annotated[float | None, field_doc("mean prefill, seconds", "s")]
    decode_s: Annotated[float | None, field_doc("mean decode, seconds", "s")]
    preempted_s: Annotated[float | None, field_doc("mean preempted time, seconds", "s")]
    overhead_s: Annotated[float | None, field_doc("mean overhead, seconds", "s")]
    mean_input_tokens: Annotated[float | None, field_doc("mean prompt tokens")]
    mean_output_tokens: Annotated[float | None, field_doc("mean generated tokens")]
    decode_s_per_token: Annotated[
        float | None,
        field_doc(
            "summed decode over summed tokens after the first, seconds",
            "s",
        ),
    ]


class RequestsErrorsRow(Row, kw_only=True):
    """A row of ``requests_errors``:
    why the requests the run's figures leave out ended as they did, as the sources say it: one row
    """

    error_code: Annotated[
        int | None,
        field_doc(
            "the HTTP status (or the client's own code) the requests failed with; NULL where the source gives "
            "text only",
        ),
    ]
    error: Annotated[
        str | None,
        field_doc(
            "the error text: the group's own where it has no status, else the commonest with it (NULL where the "
            "source gives the status alone)",
        ),
    ]
    texts: Annotated[int | None, field_doc("distinct error texts in the group")]
    requests: Annotated[int | None, field_doc("requests in the group")]
    first_arrival_s: Annotated[
        float | None,
        field_doc(
            "when the group's first request arrived, seconds after the run's first arrival (NULL where the "
            "sources place no arrival)",
            "s",
        ),
    ]
    last_arrival_s: Annotated[
        float | None,
        field_doc(
            "when its last request arrived, seconds after the run's first arrival",
            "s",
        ),
    ]


class WorkloadMixRow(Row, kw_only=True):
    """A row of ``workload_mix``: what a run's traffic looked like: sizes, rate, prefix reuse and concurrency."""

    requests: Annotated[int | None, field_doc("counted requests")]
    sized: Annotated[
        int | None,
        field_doc(
            "of those, the requests whose source gives their prompt size (the size figures are theirs; a vLLM log"
            " of 0.11 on lists arrivals only)",
        ),
    ]
    input_p50: Annotated[float | None, field_doc("median prompt tokens")]
    input_p90: Annotated[float | None, field_doc("90th percentile prompt tokens")]
    input_mean: Annotated[float | None, field_doc("mean prompt tokens")]
    output_p50: Annotated[float | None, field_doc("median output tokens")]
    output_p90: Annotated[float | None, field_doc("90th percentile output tokens")]
    output_mean: Annotated[float | None, field_doc("mean output tokens")]
    span_s: Annotated[
        float | None,
        field_doc(
            "first to last arrival (a lone client's send times where no arrival is on the run clock), seconds",
            "s",
        ),
    ]
    rate_per_s: Annotated[
        float | None,
        field_doc(
            "requests per second over the arrival span (NULL under threshold_rate_min_requests(), and where the "
            "arrival stamps' resolution could move it by more than threshold_rate_stamp_error(): resolution / "
            "span)",
        ),
    ]
    arrival_resolution_s: Annotated[
        float | None,
        field_doc(
            "the coarsest arrival stamp's resolution (requests.arrival_resolution_s; NULL: a millisecond or finer)",
            "s",
        ),
    ]
    window_s: Annotated[
        float | None,
        field_doc(
            "first arrival to last finish (arrival + e2e, else the finish time), seconds",
            "s",
        ),
    ]
    throughput_per_s: Annotated[
        float | None,
        field_doc(
            "requests finished per second over the run window (NULL without finish times)",
        ),
    ]
    prefix_blocks: Annotated[int | None, field_doc("prefix blocks over all requests (where the source gives them)")]
    prefix_blocks_reused: Annotated[int | None, field_doc("leading blocks an earlier request already had")]
    prefix_reuse: Annotated[
        float | None,
        field_doc(
            "prefix_blocks_reused / prefix_blocks (0-1; NULL without block ids)",
        ),
    ]
    mean_concurrency: Annotated[
        float | None,
        field_doc(
            "summed e2e / run window: requests in flight on average (NULL without latencies)",
        ),
    ]
    peak_concurrency: Annotated[
        int | None,
        field_doc(
            'most requests in flight at one instant (vLLM bench\'s "Peak concurrent requests" counts a request in '
            "every whole second it touches, so it reads higher)",
        ),
    ]


class EngineSpeculativeRow(Row, kw_only=True):
    """A row of ``engine_speculative``:
    speculative decoding, per run: how many tokens a step's drafts proposed and the target kept.
    """

    speculative_tokens: Annotated[
        float | None,
        field_doc(
            "the tokens each draft may propose, as the engine's config states it (0: off)",
        ),
    ]
    drafts: Annotated[float | None, field_doc("drafts proposed (NULL where the source does not count them: a log)")]
    draft_tokens: Annotated[float | None, field_doc("tokens the drafts proposed")]
    accepted_tokens: Annotated[float | None, field_doc("draft tokens the target kept")]
    acceptance_rate: Annotated[float | None, field_doc("accepted_tokens / draft_tokens (0-1)", "fraction")]
    acceptance_length: Annotated[
        float | None,
        field_doc(
            "1 + accepted_tokens / drafts: tokens per drafting step of a request (SGLang: its readings)",
        ),
    ]
    decode_request_steps: Annotated[
        int | None,
        field_doc(
            "steps x decoding requests, from the iteration log (NULL without it)",
        ),
    ]
    tokens_per_decode_step: Annotated[float | None, field_doc("1 + accepted_tokens / decode_request_steps")]
    basis: Annotated[
        str | None,
        field_doc(
            "engine counters | server log | the mean of SGLang's N accept-length readings (...)",
        ),
    ]


class EngineLatencyHistogramsRow(Row, kw_only=True):
    """A row of ``engine_latency_histograms``:
    the mean latencies the engine's own Prometheus histograms give, per run: what a
    """

    scrapes: Annotated[int | None, field_doc("readings with histogram figures")]
    basis: Annotated[str | None, field_doc("between scrapes | since server start, one scrape")]
    e2e_requests: Annotated[float | None, field_doc("requests the e2e histogram counted over that span")]
    e2e_mean_s: Annotated[
        float | None,
        field_doc(
            "mean end-to-end latency by the engine, seconds (NULL without the histogram)",
            "s",
        ),
    ]
    ttft_mean_s: Annotated[float | None, field_doc("mean time to first token by the engine, seconds", "s")]
    queue_mean_s: Annotated[float | None, field_doc("mean time in the engine's waiting queue, seconds", "s")]
    queue_sum_s: Annotated[float | None, field_doc("summed queue time over the span, seconds", "s")]
    e2e_sum_s: Annotated[float | None, field_doc("summed end-to-end latency over the span, seconds", "s")]
    queue_share: Annotated[
        float | None,
        field_doc(
            "queue_sum_s / e2e_sum_s: the share of the requests' time spent waiting to be scheduled",
            "fraction",
        ),
    ]
    prefill_sum_s: Annotated[
        float | None,
        field_doc(
            "summed prefill time (vLLM request_prefill_time_seconds), seconds",
            "s",
        ),
    ]
    decode_sum_s: Annotated[
        float | None,
        field_doc(
            "summed decode time (vLLM request_decode_time_seconds), seconds",
            "s",
        ),
    ]
    prefill_share: Annotated[float | None, field_doc("prefill_sum_s / e2e_sum_s", "fraction")]
    decode_share: Annotated[float | None, field_doc("decode_sum_s / e2e_sum_s", "fraction")]
    http_2xx: Annotated[
        float | None,
        field_doc(
            "the API server's responses over that span with a 2xx status (vLLM's http_requests_total)",
        ),
    ]
    http_4xx: Annotated[float | None, field_doc("its responses with a 4xx status: requests it refused")]
    http_5xx: Annotated[float | None, field_doc("its responses with a 5xx status: requests it failed")]
    http_failed: Annotated[float | None, field_doc("its responses with a 4xx or 5xx status")]
    http_failed_share: Annotated[
        float | None,
        field_doc(
            "http_failed over all its responses of those classes",
            "fraction",
        ),
    ]


class EngineReplicasRow(Row, kw_only=True):
    """A row of ``engine_replicas``:
    each replica (engine) of a run side by side, and their sum: what a fleet's Prometheus
    """

    engine: Annotated[
        str | None,
        field_doc(
            "the replica (instance/engine for a Prometheus server's export; the engine index else)",
        ),
    ]
    instance: Annotated[str | None, field_doc("its Prometheus instance label (NULL for /metrics files and logs)")]
    samples: Annotated[int | None, field_doc("samples of the replica")]
    first_s: Annotated[float | None, field_doc("its first sample time, run clock (NULL where samples have none)", "s")]
    last_s: Annotated[float | None, field_doc("its last sample time", "s")]
    peak_running: Annotated[float | None, field_doc("most requests running at a sample")]
    peak_waiting: Annotated[float | None, field_doc("most requests waiting at a sample")]
    mean_running: Annotated[float | None, field_doc("mean requests running over the samples")]
    peak_kv_usage: Annotated[float | None, field_doc("highest KV-cache usage at a sample (0-1)", "fraction")]
    preemptions: Annotated[float | None, field_doc("preemptions over the span")]
    requests: Annotated[float | None, field_doc("requests the e2e histogram counted over the span")]
    e2e_mean_s: Annotated[
        float | None,
        field_doc(
            "their mean end-to-end latency, seconds (the engine's histogram)",
            "s",
        ),
    ]


class EngineHistogramQuantilesRow(Row, kw_only=True):
    """A row of ``engine_histogram_quantiles``:
    quantiles of the engine's own latency and size histograms, per run and metric:
    """

    metric: Annotated[
        str | None,
        field_doc(
            "queue_time | ttft | e2e | tpot | itl | prefill_time | decode_time | prompt_tokens | generation_tokens",
        ),
    ]
    basis: Annotated[str | None, field_doc("between samples | since server start, one sample")]
    observations: Annotated[float | None, field_doc("requests (or tokens) the histogram counted over that span")]
    mean: Annotated[float | None, field_doc("the mean from the histogram's sum, where exported (NULL: no sum)")]
    p50: Annotated[float | None, field_doc("median, interpolated (seconds; tokens for the size histograms)", "s")]
    p50_lo: Annotated[float | None, field_doc("lower bound of the bucket holding the median")]
    p50_hi: Annotated[
        float | None,
        field_doc(
            "upper bound of that bucket (NULL: the +Inf bucket), or the mean's bound where lower",
        ),
    ]
    p90: Annotated[float | None, field_doc("90th percentile, interpolated")]
    p90_lo: Annotated[float | None, field_doc("lower bound of its bucket")]
    p90_hi: Annotated[float | None, field_doc("upper bound of its bucket")]
    p99: Annotated[float | None, field_doc("99th percentile, interpolated")]
    p99_lo: Annotated[float | None, field_doc("lower bound of its bucket")]
    p99_hi: Annotated[float | None, field_doc("upper bound of its bucket")]


class EngineQueueCausesRow(Row, kw_only=True):
    """A row of ``engine_queue_causes``:
    the queue's time split by what the engine was out of, from the engine's own timeline alone
    """

    replicas: Annotated[
        int | None,
        field_doc(
            "timelines with samples (replicas, and data-parallel engines within one)",
        ),
    ]
    samples: Annotated[int | None, field_doc("segments (steps or sample spans) with a waiting count and a length")]
    basis: Annotated[str | None, field_doc("steps | samples: what the segments are (engine_state.basis)")]
    waiting_request_s: Annotated[
        float | None,
        field_doc(
            "requests waiting x time, summed over the segments (request-seconds)",
        ),
    ]
    kv_wait_s: Annotated[float | None, field_doc("of it, while the queue head had no KV room", "s")]
    slot_wait_s: Annotated[
        float | None,
        field_doc(
            "of it, while every sequence slot was taken (KV room to spare)",
            "s",
        ),
    ]
    budget_wait_s: Annotated[
        float | None,
        field_doc(
            "of it, while the token budget bound (slots and KV room to spare; NULL: samples do not tell)",
            "s",
        ),
    ]
    load_wait_s: Annotated[float | None, field_doc("the rest: none of those binding, or no source to tell", "s")]
    kv_share: Annotated[float | None, field_doc("kv_wait_s / waiting_request_s", "fraction")]
    slot_share: Annotated[float | None, field_doc("slot_wait_s / waiting_request_s", "fraction")]
    budget_share: Annotated[float | None, field_doc("budget_wait_s / waiting_request_s", "fraction")]
    running_request_s: Annotated[
        float | None,
        field_doc(
            "requests running x time over the same segments (request-seconds; NULL: not counted)",
        ),
    ]
    queue_share: Annotated[
        float | None,
        field_doc(
            "waiting_request_s / (waiting_request_s + running_request_s): by Little's law the queue's share of "
            "the requests' summed time in the engine (an estimate, as fine as the samples)",
            "fraction",
        ),
    ]


class EnginePrefixCacheRow(Row, kw_only=True):
    """A row of ``engine_prefix_cache``: how much of the prompts the engine's prefix cache served, per run."""

    hit_rate: Annotated[
        float | None,
        field_doc(
            "prompt tokens served from the cache / prompt tokens looked up (0-1; NULL: no counters)",
        ),
    ]
    hit_tokens: Annotated[float | None, field_doc("prompt tokens served from the cache, by that count")]
    queried_tokens: Annotated[float | None, field_doc("prompt tokens looked up, by that count")]
    hit_basis: Annotated[str | None, field_doc("engine counters | sglang prefill batches")]
    cached_share: Annotated[
        float | None,
        field_doc(
            "cached prompt tokens / prompt tokens (0-1; NULL where not derivable)",
            "fraction",
        ),
    ]
    cached_basis: Annotated[
        str | None,
        field_doc(
            "requests cached_tokens | iteration log context tokens vs the prompt-token counter",
        ),
    ]


class ProfilerStepsByKindRow(Row, kw_only=True):
    """A row of ``profiler_steps_by_kind``:
    engine steps of each kind with their duration distribution, per run and step source.
    """

    kind: Annotated[str | None, field_doc("prefill | decode | mixed | idle | NULL (kind not known)")]
    steps: Annotated[int | None, field_doc("number of steps")]
    wall_s_total: Annotated[float | None, field_doc("summed CPU-side step duration, seconds", "s")]
    wall_s_mean: Annotated[float | None, field_doc("mean CPU-side step duration, seconds", "s")]
    wall_s_p50: Annotated[float | None, field_doc("median CPU-side step duration, seconds", "s")]
    wall_s_p99: Annotated[float | None, field_doc("99th percentile CPU-side step duration, seconds", "s")]
    gpu_busy_s: Annotated[
        float | None,
        field_doc(
            "summed GPU busy time of the steps, seconds (NULL without GPU data)",
            "s",
        ),
    ]
    prefill_tokens: Annotated[int | None, field_doc("summed prefill tokens (NULL where no step gives them)")]
    decode_tokens: Annotated[int | None, field_doc("summed decode tokens (NULL where no step gives them)")]
    token_steps: Annotated[
        int | None,
        field_doc(
            "steps whose prefill and decode token counts are both known (the sums above are theirs: a step whose "
            "kind came from its kernels has none)",
        ),
    ]
    cuda_graph_steps: Annotated[
        int | None,
        field_doc(
            "steps that ran (partly) as CUDA-graph replays (NULL when no step has GPU work)",
        ),
    ]
    gpu_longer_steps: Annotated[
        int | None,
        field_doc(
            "steps whose GPU busy time exceeds their CPU span: launched without waiting for their kernels (CUDA "
            "graphs, asynchronous scheduling), so the CPU span is not their time (NULL when no step has GPU work)",
        ),
    ]
    gpu_longer_busy_s_mean: Annotated[float | None, field_doc("those steps' mean GPU busy time, seconds", "s")]
    gpu_longer_start_s_mean: Annotated[
        float | None,
        field_doc(
            "those steps' mean time from the step's start to its first GPU op's start (launch_gap_s), seconds",
            "s",
        ),
    ]


class ProfilerPhaseShareRow(Row, kw_only=True):
    """A row of ``profiler_phase_share``: prefill vs decode share of the run's step time, per run and step source."""

    basis: Annotated[str | None, field_doc("gpu_busy | wall")]
    total_s: Annotated[float | None, field_doc("summed step time on that basis, seconds", "s")]
    prefill_share: Annotated[float | None, field_doc("share of prefill steps (0-1)", "fraction")]
    decode_share: Annotated[float | None, field_doc("share of decode steps (0-1)", "fraction")]
    mixed_share: Annotated[float | None, field_doc("share of mixed steps (0-1)", "fraction")]
    other_share: Annotated[float | None, field_doc("share of idle steps and steps of unknown kind (0-1)", "fraction")]


class ProfilerKernelTimeRow(Row, kw_only=True):
    """A row of ``profiler_kernel_time``: how GPU time splits over kernel classes, per run."""

    kernel_class: Annotated[
        str | None,
        field_doc(
            "gemm | attention | communication | memory | elementwise | sync | other",
        ),
    ]
    kernels: Annotated[int | None, field_doc("number of GPU ops of the class")]
    total_s: Annotated[float | None, field_doc("summed duration, seconds", "s")]
    share: Annotated[
        float | None,
        field_doc(
            "total_s over the run's summed non-sync GPU time (0-1; NULL for sync)",
            "fraction",
        ),
    ]


class ProfilerGpuBusyRow(Row, kw_only=True):
    """A row of ``profiler_gpu_busy``: how busy each GPU was over the traced window, per run and device."""

    part: Annotated[int | None, field_doc("source file of the run (one per rank)")]
    device: Annotated[int | None, field_doc("GPU ordinal as the trace gives it")]
    busy_s: Annotated[float | None, field_doc("union of GPU op intervals, seconds", "s")]
    span_s: Annotated[float | None, field_doc("first op start to last op end, seconds", "s")]
    busy_fraction: Annotated[float | None, field_doc("busy_s / span_s (0-1)", "fraction")]
    traced_s: Annotated[float | None, field_doc("the file's traced window, seconds", "s")]
    traced_fraction: Annotated[float | None, field_doc("busy_s / traced_s (0-1)", "fraction")]


class ProfilerAttentionVariantRow(Row, kw_only=True):
    """A row of ``profiler_attention_variant``: attention GPU time split by the phase its kernel names give away."""

    variant: Annotated[
        str | None,
        field_doc(
            "prefill | decode | NULL (an attention kernel whose name does not tell the phase)",
        ),
    ]
    kernels: Annotated[int | None, field_doc("number of attention kernels")]
    total_s: Annotated[float | None, field_doc("summed duration, seconds", "s")]

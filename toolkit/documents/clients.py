"""The ``client_summary`` section of the analysis document: each summary a benchmark client wrote of its own run,
with the tool's own figures converted to seconds and named alike (null where the tool wrote none)."""

from __future__ import annotations

from typing import Annotated

from lltrace.documents.base import UNSET, Doc, UnsetType, field_doc


class Stats(Doc, kw_only=True):
    """A latency as the client's tool summarised it (null where it wrote no such figure)."""

    mean: Annotated[float | None, field_doc("mean", "s")]
    median: Annotated[float | None, field_doc("median", "s")]
    p90: Annotated[float | None, field_doc("90th percentile", "s")]
    p99: Annotated[float | None, field_doc("99th percentile", "s")]


class ServerSide(Doc, kw_only=True):
    """The server's own figures over a stage (inference-perf's summary of the Prometheus metrics)."""

    source: Annotated[str, field_doc("the server report")]
    requests: Annotated[int | float | None, field_doc("requests the server counted", "requests")]
    rate_per_s: Annotated[float | None, field_doc("their rate", "requests/s")]
    queue_len_mean: Annotated[float | None, field_doc("mean requests waiting", "requests")]
    running_mean: Annotated[float | None, field_doc("mean requests running", "requests")]
    ttft_s: Annotated[Stats | None, field_doc("the server's time to first token")]
    tpot_s: Annotated[Stats | None, field_doc("the server's time per output token")]
    e2e_s: Annotated[Stats | None, field_doc("the server's request latency")]
    kv_usage_mean: Annotated[float | None, field_doc("mean KV-cache usage (null: no reading)", "fraction")]
    preemptions: Annotated[float | None, field_doc("mean of the preemptions counter over the stage", "count")]
    prefix_cache_hit_share: Annotated[float | None, field_doc("mean prefix-cache hit percentage, as written")]
    notes: Annotated[list[str], field_doc("what makes these figures other than the stage's own requests")]


class ClientSummary(Doc, kw_only=True):
    """One summary a client wrote (a result object, a benchmark, a stage of a sweep, a summary file)."""

    source: Annotated[str, field_doc("the file")]
    tool: Annotated[str, field_doc("the format it was read as (the tool that wrote it)")]
    stage: Annotated[
        int | str | None, field_doc("the stage or benchmark within the file (`warmup`, `summary`, a number, a label)")
    ]
    requested_rate_per_s: Annotated[
        float | str | None, field_doc("the rate the client was asked for (`inf`: all at once; `trace`: a trace's)")
    ]
    achieved_rate_per_s: Annotated[float | None, field_doc("the rate it achieved, as it computed it", "requests/s")]
    goodput_per_s: Annotated[float | None, field_doc("requests per second that met every SLO given", "requests/s")]
    goodput_slos: Annotated[dict[str, float] | None, field_doc("the SLOs, as the client was given them")]
    max_concurrency: Annotated[int | float | None, field_doc("the most requests in flight it allowed", "requests")]
    completed: Annotated[int | float | None, field_doc("requests completed", "requests")]
    failed: Annotated[int | float | None, field_doc("requests failed", "requests")]
    duration_s: Annotated[float | None, field_doc("the run's duration, as the tool measured it", "s")]
    send_delay_s: Annotated[Stats | None, field_doc("how late the client sent against its schedule")]
    sent_behind: Annotated[bool | None, field_doc("whether it sent slower than asked beyond its schedule's noise")]
    mean_input_tokens: Annotated[float | None, field_doc("mean prompt tokens", "tokens")]
    mean_output_tokens: Annotated[float | None, field_doc("mean output tokens", "tokens")]
    output_tokens_per_s: Annotated[float | None, field_doc("output token throughput", "tokens/s")]
    total_tokens_per_s: Annotated[float | None, field_doc("prompt and output token throughput", "tokens/s")]
    ttft_s: Annotated[Stats | None, field_doc("time to first token")]
    tpot_s: Annotated[Stats | None, field_doc("time per output token")]
    itl_s: Annotated[Stats | None, field_doc("inter-token latency")]
    e2e_s: Annotated[Stats | None, field_doc("end-to-end latency")]
    server: Annotated[ServerSide | UnsetType, field_doc("the server's figures over the same stage")] = UNSET

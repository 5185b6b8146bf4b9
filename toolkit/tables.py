"""Every canonical table of the run store, declared once, as data (docs/tables.md is written from it).

Each column has its Arrow type, unit, physical range (``lo``/``hi``, inclusive; ``integer`` for whole
numbers; ``values`` for a closed set of words), a one-line meaning, and its ``origin``: ``source`` (read from
a file), ``derived`` (arithmetic by lltrace on what the sources give) or ``estimated`` (a model's figure,
labelled). Parsers write these schemas, the store's views always have every column (NULL where no source
gives it), and the views' documentation test checks their ``requests.*``-style expansions against this
module. The ranges and row rules are declared here and enforced at ingest (``lltrace.ingest.checks``). Rows
become Arrow tables in ``lltrace.arrow_rows``; what the run metadata records of one source file is
``lltrace.source_info``.

A leaf: it imports nothing of lltrace but the documents' vocabulary and the declaration's classes
(``lltrace.table_schema``), both leaves, so a parser can use it without loading the analysis stack.
"""

from __future__ import annotations

from collections.abc import Sequence

from lltrace.documents.vocabulary import KindFrom, StepKind
from lltrace.table_schema import F64, I32, I64, IDS, ORIGINS, B, Column, RowRule, S, Table
from lltrace.table_schema import column as _c
from lltrace.table_schema import count as _count
from lltrace.table_schema import seconds as _seconds
from lltrace.table_schema import time_point as _time

__all__ = ["ORIGINS", "Column", "RowRule", "STAGING", "TABLES", "Table"]


PART = _c("part", I32, None, "which file of the run the row came from (0, 1, ...: the metadata's sources)", lo=0)
KERNEL_TIME_CLASSES = ("gemm", "attention", "communication", "memory", "elementwise", "other")
KERNEL_CLASSES = (*KERNEL_TIME_CLASSES[:-1], "sync", "other")
STEP_KINDS = tuple(k.value for k in StepKind)

REQUESTS = Table(
    "requests",
    "request",
    "Each request's timeline on the run clock, its sizes and the latencies each source measured.",
    (
        _c("request_id", S, None, "the request's id as the engine or client wrote it (NULL where a trace has none)"),
        _c("client_id", S, None, "the client or file the request came from (a bench file, a stage, a trace)"),
        _count("client_index", "the request's position in its client's file"),
        _time("arrival_s", "arrival at the frontend (span start; a client's send time plus the clock offset)"),
        _time("queued_s", "entered the engine's waiting queue (scheduled_s - queue_s)", "derived"),
        _time("scheduled_s", "first scheduled by the engine (first_token_s - prefill_s)", "derived"),
        _time("first_token_s", "first output token (arrival_s + the span's time to first token)", "derived"),
        _time("last_token_s", "last output token (first_token_s + decode_s)", "derived"),
        _time("finished_s", "finished (span end, or the log line's time)"),
        _count("input_tokens", "prompt tokens", "tokens"),
        _count("output_tokens", "generated tokens (NULL for a failed request)", "tokens"),
        _count(
            "cached_tokens", "prompt tokens served from the prefix cache, as the engine or client reports", "tokens"
        ),
        _c("prefix_block_ids", IDS, None, "hash ids of the prompt's prefix blocks in prompt order (Mooncake hash_ids)"),
        _count("num_preemptions", "times the engine preempted the request"),
        _c(
            "status",
            S,
            None,
            "ok, error, finished, cancelled, incomplete, warmup, cooldown, unjoined (a client's record the join could "
            "neither pair nor place: not counted), or the engine's finish status",
        ),
        _c(
            "error_code", I32, None, "a failed request's HTTP status (or its client's own code), as the source gives it"
        ),
        _c("error", S, None, "why the request failed, as the source says it, on one line (a traceback's last line)"),
        _seconds("ttft_s", "time to first token measured by the client"),
        _seconds("e2e_s", "end-to-end latency measured by the client"),
        _seconds("queue_s", "engine queue time (vLLM span time_in_queue, TGI x-queue-time, SGLang queue)"),
        _seconds("prefill_s", "first scheduled to first token, measured by the engine"),
        _seconds("decode_s", "first to last token, measured by the engine"),
        _seconds("server_ttft_s", "time to first token measured by the server (span time_to_first_token)"),
        _seconds("server_e2e_s", "end-to-end latency measured by the server"),
        _time("client_start_s", "the client's send time on its own clock (perf_counter: arbitrary origin)"),
        _c("arrival_ns", I64, "ns", "arrival in integer nanoseconds, where the source's clock has them"),
        _seconds("arrival_resolution_s", "how finely the source writes the arrival, where coarser than 1 ms"),
        _c(
            "engine_request_id",
            S,
            None,
            "the id the engine gave the request, as the client saw it in the response (guidellm's response_id): "
            "the join's key where the id the client kept never reached the engine",
        ),
        _seconds(
            "kv_transfer_s",
            "disaggregated serving: the prefill worker's result to the decode worker's first token (Dynamo's "
            "kv_transfer_estimated_latency: the KV transfer with dispatch and one decode step, an upper bound)",
        ),
        _c("prefill_worker", S, None, "the worker that ran the prefill (Dynamo: worker id / data-parallel rank)"),
        _c("decode_worker", S, None, "the worker that decoded (the prefill worker's too when serving is aggregated)"),
        _c(
            "matched_by",
            S,
            None,
            "how the client's row was joined to the engine's: request_id, features (what both saw, "
            "toolkit/ingest/match.py), or order (a client without send times, in the order it sent: "
            "toolkit/ingest/order.py); NULL unjoined",
            "derived",
        ),
        _seconds("preempted_s", "preemption to rescheduling, summed (vLLM journey events)", "derived"),
        _seconds("preempted_in_prefill_s", "the part of preempted_s before the first token", "derived"),
        _seconds("queue_s_est", "queue part of a client-measured TTFT, from a calibrated prefill rate", "estimated"),
        _seconds("prefill_s_est", "prefill part of a client-measured TTFT (prompt / calibrated rate)", "estimated"),
        _c("split_basis", S, None, "how queue_s_est and prefill_s_est were estimated", "derived"),
    ),
    rules=(
        RowRule("ttft_s", "e2e_s", "the first token comes before the end (else TPOT is negative)"),
        RowRule("server_ttft_s", "server_e2e_s", "the first token comes before the end, on the server's clock"),
        RowRule("arrival_s", "finished_s", "a request ends after it arrives"),
        RowRule("first_token_s", "finished_s", "the first token comes before the end"),
        RowRule("queue_s", "server_e2e_s", "the queue wait is part of the server's time for the request"),
    ),
)

REQUEST_EVENTS = Table(
    "request_events",
    "state change of a request",
    "What happened to each request and when: the engine's journey events, else its span's timeline.",
    (
        _c("request_id", S, None, "the request"),
        _time("ts_s", "when it happened (run clock)"),
        _c(
            "event",
            S,
            None,
            "what happened",
            values=("queued", "scheduled", "preempted", "resumed", "first_token", "token", "finished", "aborted"),
        ),
        _count("tokens", "tokens the event carries (output tokens at finished), where known", "tokens"),
        _c(
            "basis",
            S,
            None,
            "measured (journey events) or derived (from the span's timeline)",
            values=("measured", "derived"),
        ),
    ),
)

ENGINE_STEPS = Table(
    "engine_steps",
    "engine iteration",
    "Engine iterations from a profiler trace or the engine's iteration log: kind, tokens, time, GPU work.",
    (
        PART,
        _count("step_id", "the step's number in its source"),
        _c("start_ns", I64, "ns", "step start, integer ns on the profiler's clock (NULL for log steps)"),
        _c("end_ns", I64, "ns", "step end, integer ns on the profiler's clock (NULL for log steps)"),
        _time("start_s", "step start on the run clock (log steps: estimated from the line's time)"),
        _time("end_s", "step end on the run clock"),
        _c("kind", S, None, "prefill, decode, mixed or idle; NULL when the evidence does not tell", values=STEP_KINDS),
        _c(
            "kind_from",
            S,
            None,
            "the evidence that decided kind",
            "derived",
            values=tuple(k.value for k in KindFrom),
        ),
        _c(
            "kind_why",
            S,
            None,
            "where the kernels were read (kind_from kernels, or no kind): the rule of parsers/step_kinds.csv that "
            "decided or declined",
            "derived",
        ),
        _count("prefill_reqs", "requests prefilling in the step", "requests"),
        _count("prefill_tokens", "prompt tokens computed in the step", "tokens"),
        _count("decode_reqs", "requests decoding in the step", "requests"),
        _count(
            "decode_tokens",
            "tokens decoded in the step (vLLM logs: its generation tokens, with a resumed request's recompute and, "
            "with speculative decoding, the draft tokens verified)",
            "tokens",
        ),
        _count("cached_tokens", "prompt tokens the step's prefills took from the prefix cache (SGLang)", "tokens"),
        _seconds("wall_s", "step duration: CPU-side span, or the log's iteration time"),
        _seconds("gpu_busy_s", "union of the step's GPU op intervals (sync excluded)", "derived"),
        _time("gpu_start_s", "the step's first GPU op start", "derived"),
        _time("gpu_end_s", "the step's last GPU op end", "derived"),
        _seconds("launch_gap_s", "step start to its first GPU op", "derived"),
        _seconds("gpu_idle_s", "step span (to its last GPU op) not covered by GPU work", "derived"),
        _count("kernels", "GPU ops attributed to the step (sync excluded)"),
        _c("cuda_graph", B, None, "whether the step replayed CUDA/HIP graphs (NULL without GPU work)", "derived"),
        _count("graph_launches", "graph launches in the step"),
        _count("orphan_kernels", "GPU ops with no launch in the trace, attributed by time", "count", "derived"),
        *(_seconds(f"t_{c}_s", f"GPU time in {c} kernels", "derived") for c in KERNEL_TIME_CLASSES),
        _c("shape_op", S, None, "the attention op whose input shapes were read"),
        _count("shape_tokens", "query tokens from the attention op's input shapes", "tokens"),
        _count("shape_reqs", "sequences from the attention op's input shapes", "requests"),
        _count("shape_query_len", "query length per sequence from the input shapes", "tokens"),
        _count("shape_context_tokens", "key/value tokens from the input shapes", "tokens"),
        _c("marker", S, None, "the step marker's name as the trace wrote it"),
        _c("detection", S, None, "the marker family that defined the steps (vllm, profiler_step, ... or a log)"),
        _c("source", S, None, "profiler or log", values=("profiler", "log")),
        _c("engine", S, None, "engine index as the log writes it (data-parallel engines)"),
        _c("kv_usage", F64, "fraction", "KV-cache usage logged with the step", lo=0.0, hi=1.0),
        _c(
            "log_stamp",
            S,
            None,
            "the log line's time as written (vLLM: MM-DD HH:MM:SS, no year, no zone; YYYY-MM-DD HH:MM:SS where its log "
            "prints the year)",
        ),
    ),
    rules=(
        RowRule("start_ns", "end_ns", "a step ends after it starts"),
        RowRule("start_s", "end_s", "a step ends after it starts"),
    ),
)

ENGINE_STATS = Table(
    "engine_stats",
    "metrics sample",
    "The engine's state over time: load, KV usage and cumulative counters from scrapes and stats lines "
    "(a Prometheus counter's resets undone: it only grows over the run); a benchmark's per-stage summary of the "
    "server (source stage) is a row of window means, never a sample.",
    (
        PART,
        _time("ts_s", "sample time on the run clock (NULL where the source gives none)"),
        _c("engine", S, None, "engine index (data-parallel) or SGLang rank; instance/engine of a replica"),
        _c("instance", S, None, "the replica's Prometheus instance label (a Prometheus server's export)"),
        _count("running", "requests running", "requests", typ=F64),
        _count("waiting", "requests waiting", "requests", typ=F64),
        _count(
            "waiting_capacity", "vLLM waiting_by_reason capacity: waiting for scheduling capacity", "requests", typ=F64
        ),
        _count("waiting_deferred", "vLLM waiting_by_reason deferred: attempted and held back", "requests", typ=F64),
        _count(
            "swapped", "requests swapped out or paused for KV room (V0 Swapped, TRT-LLM paused)", "requests", typ=F64
        ),
        _c("kv_usage", F64, "fraction", "KV-cache usage (SGLang: token usage)", lo=0.0, hi=1.0),
        _count("preemptions_total", "preemptions so far (cumulative; SGLang retractions)", typ=F64),
        _count("prompt_tokens_total", "prompt tokens processed so far (cumulative)", "tokens", typ=F64),
        _count("generation_tokens_total", "tokens generated so far (cumulative)", "tokens", typ=F64),
        _count(
            "prefix_cache_queries_total", "prompt tokens looked up in the prefix cache (cumulative)", "tokens", typ=F64
        ),
        _count("prefix_cache_hits_total", "prompt tokens found in the prefix cache (cumulative)", "tokens", typ=F64),
        _count("spec_drafts_total", "speculative decoding: drafts proposed (cumulative)", typ=F64),
        _count("spec_draft_tokens_total", "speculative decoding: draft tokens (cumulative)", "tokens", typ=F64),
        _count("spec_accepted_tokens_total", "speculative decoding: accepted tokens (cumulative)", "tokens", typ=F64),
        *(_count(f"http_{k}xx_total", f"API responses, {k}xx status (cumulative)", typ=F64) for k in "245"),
        _c(
            "spec_accept_length",
            F64,
            "tokens",
            "speculative decoding: tokens a request gained per verify step over the engine's interval (SGLang's accept "
            "len; its gauge reads 0 where nothing was verified)",
            lo=0.0,
        ),
        _c(
            "source",
            S,
            None,
            "prometheus, log, scrape, or stage (a benchmark's summary of the server over one stage)",
            values=("prometheus", "log", "scrape", "stage"),
        ),
        _c(
            "stage",
            S,
            None,
            "the benchmark stage a stage row summarises (inference-perf: N, or 'summary' for the run): its gauges "
            "are means over the stage's window and it has no time; NULL for a sample at ts_s",
        ),
        _seconds("queue_time_sum_s", "histogram sum of request queue times (cumulative)"),
        _count("queue_time_count", "histogram count of request queue times (cumulative)", typ=F64),
        _seconds("ttft_sum_s", "histogram sum of TTFTs (cumulative)"),
        _count("ttft_count", "histogram count of TTFTs (cumulative)", typ=F64),
        _seconds("e2e_sum_s", "histogram sum of end-to-end latencies (cumulative)"),
        _count("e2e_count", "histogram count of end-to-end latencies (cumulative)", typ=F64),
        _seconds("prefill_time_sum_s", "histogram sum of request prefill times (cumulative)"),
        _seconds("decode_time_sum_s", "histogram sum of request decode times (cumulative)"),
        _c("log_stamp", S, None, "the log line's time as written"),
        _c("prompt_throughput", F64, "tokens/s", "prompt throughput the stats line reports", lo=0.0),
        _c("generation_throughput", F64, "tokens/s", "generation throughput the stats line reports", lo=0.0),
        _c("prefix_cache_hit_rate", F64, "fraction", "prefix-cache hit rate the stats line reports", lo=0.0, hi=1.0),
    ),
)


def _event_columns(extra: Sequence[Column]) -> tuple[Column, ...]:
    """The columns every profiler table starts with."""
    return (
        PART,
        _c("cat", S, None, "event category, modern spelling (kernel, cpu_op, cuda_runtime, ...)"),
        _c("name", S, None, "event name"),
        _c("pid", S, None, "process lane as the trace writes it"),
        _c("tid", S, None, "thread or stream lane as the trace writes it"),
        *extra,
    )


_TS = _c("ts_ns", I64, "ns", "start, integer ns on the trace's epoch clock (baseTimeNanoseconds + ts)")
_DUR = _c("dur_ns", I64, "ns", "duration, integer ns", lo=0)
_EXT = _c("external_id", I64, None, "External id: links a CPU op to its launches")
_CORR = _c("correlation", I64, None, "correlation id: links a launch to its GPU op")
_EV = _c("ev_idx", I64, None, "the profiler's event index")
_DIMS = _c("input_dims", S, None, "Input Dims as JSON text (record_shapes)")

KERNELS = Table(
    "kernels",
    "GPU op (kernel, memcpy, memset, sync)",
    "GPU work from a profiler trace, with its launch and its kernel class.",
    _event_columns(
        (
            _c("device", I64, None, "GPU ordinal"),
            _c("stream", I64, None, "stream"),
            _TS,
            _DUR,
            _CORR,
            _EXT,
            _EV,
            _c("grid", S, None, "launch grid as written"),
            _c("block", S, None, "launch block as written"),
            _c("bytes", I64, "bytes", "bytes moved (memcpy, memset)", lo=0),
            _c("kernel_class", S, None, "class from parsers/kernel_classes.csv", "derived", values=KERNEL_CLASSES),
            _c("attention_variant", S, None, "prefill, decode or kv_write where the kernel's name tells", "derived"),
            _c("launch_name", S, None, "the CPU launch call", "derived"),
            _c("launch_ts_ns", I64, "ns", "the launch's start", "derived"),
            _c("launch_pid", S, None, "the launch's process lane", "derived"),
            _c("launch_tid", S, None, "the launch's thread lane", "derived"),
            _c("cuda_graph", B, None, "launched by a CUDA/HIP graph launch", "derived"),
            _c("orphan", B, None, "no launch in the trace (launched before the window opened)", "derived"),
        )
    ),
    # a GPU op starts after the CPU launched it: a link that says otherwise is dropped
    rules=(RowRule("launch_ts_ns", "ts_ns", "launched before it ran", ("launch_ts_ns", "launch_name", "launch_pid")),),
)

OPS = Table(
    "ops",
    "CPU event (operator, runtime call, python frame kept)",
    "CPU-side events of a profiler trace.",
    _event_columns(
        (_TS, _DUR, _EXT, _CORR, _EV, _c("cbid", I64, None, "CUDA runtime callback id (cbid or cid)"), _DIMS)
    ),
)

ANNOTATIONS = Table(
    "annotations",
    "user annotation (record_function range)",
    "record_function ranges on the CPU and their GPU-side copies: where step markers live.",
    _event_columns((_TS, _DUR, _EXT, _EV, _c("on_gpu", B, None, "a gpu_user_annotation (GPU-side copy)"), _DIMS)),
)

FLOWS = Table(
    "flows",
    "flow event",
    "Flow arrows (launch -> GPU op, CPU -> GPU) as the trace writes them.",
    (
        *_event_columns(())[:3],
        _c("ph", S, None, "flow phase: s, f or t", values=("s", "f", "t")),
        _c("flow_id", I64, None, "flow id"),
        *_event_columns(())[3:],
        _TS,
        _c("bp", S, None, "binding point"),
    ),
)

ENGINE_SETTINGS = (
    "max_num_seqs",
    "max_num_batched_tokens",
    "chunked_prefill",
    "prefix_caching",
    "block_size",
    "kv_blocks",
    "kv_cache_tokens",
    "tensor_parallel_size",
    "speculative_tokens",
    "draft_slots",
    "long_prefill_token_threshold",
    "long_prefill_adaptive",
    "data_parallel_size",
)

ENGINE_CONFIG = Table(
    "engine_config",
    "engine setting",
    "The engine's scheduler and KV-cache settings: as the run's sources state them, else the engine's documented "
    "default for its version and device, else inferred from the run's own steps; each with where it comes from.",
    (
        _c("engine", S, None, "the engine the setting belongs to (vllm, sglang, trtllm)"),
        _c("setting", S, None, "which setting", values=ENGINE_SETTINGS),
        _c("value", F64, None, "its value (1 or 0 for on or off; tokens, blocks or sequences)", lo=0),
        _c(
            "basis",
            S,
            None,
            "stated (a source says it), derived (arithmetic on stated ones), default (the engine's documented "
            "default), inferred (from the run's steps)",
            "derived",
            values=("stated", "derived", "default", "inferred"),
        ),
        _c("origin", S, None, "where the value comes from, in words"),
    ),
)

HISTOGRAM_METRICS = (
    "queue_time",
    "ttft",
    "e2e",
    "tpot",
    "itl",
    "prefill_time",
    "decode_time",
    "prompt_tokens",
    "generation_tokens",
)
ENGINE_HISTOGRAMS = Table(
    "engine_histograms",
    "histogram bucket sample",
    "The engine's Prometheus histograms bucket by bucket: each bucket's cumulative count at each sample time "
    "(resets undone).",
    (
        PART,
        _time("ts_s", "sample time on the run clock (NULL where the scrape gives none)"),
        _c("engine", S, None, "engine index, or instance/engine of a replica (as engine_stats)"),
        _c("instance", S, None, "the replica's Prometheus instance label"),
        _c("metric", S, None, "which latency or size the histogram counts", values=HISTOGRAM_METRICS),
        _c("le", F64, None, "the bucket's upper bound, s or tokens (NULL: +Inf, every observation)", lo=0.0),
        _count("count", "observations at or below le so far (cumulative)", typ=F64),
    ),
)

# Source-shaped staging rows of one ingest (never in the store): joined into requests by lltrace.ingest.
BENCH = Table(
    "_bench",
    "benchmark client request (staging)",
    "A vLLM or SGLang bench file's per-request lists, before the join with the engine's spans.",
    (
        PART,
        _c("client_id", S, None, "the bench file (and #k for its k-th appended result)"),
        _c("client_file", S, None, "the bench file's name, as the client log names it"),
        _count("idx", "the request's index in the file (the bench client's request id suffix)"),
        _count("input_tokens", "prompt tokens", "tokens"),
        _count("output_tokens", "generated tokens", "tokens"),
        _seconds("ttft_s", "client TTFT"),
        _seconds("e2e_s", "client end-to-end latency"),
        _time("client_start_s", "send time, client perf_counter"),
        _seconds("client_queue_s", "the client's own queue time"),
        _count("itl_count", "inter-token latencies listed"),
        _seconds("itl_sum_s", "inter-token latencies summed"),
        _c("error", S, None, "the client's error text"),
        _c("error_code", I32, None, "the HTTP status the error text names (its reason phrase)"),
        _c("status", S, None, "ok, error, or warmup (a sweep's warm-up run)", values=("ok", "error", "warmup")),
    ),
    internal=True,
)

SPANS = Table(
    "_spans",
    "engine request span (staging)",
    "vLLM llm_request or SGLang Req spans, before the join with a bench file.",
    (
        PART,
        _c("request_id", S, None, "gen_ai.request.id"),
        _c("trace_id", S, None, "trace id"),
        _c("span_id", S, None, "span id"),
        _c("start_ns", I64, "ns", "span start, epoch ns"),
        _c("end_ns", I64, "ns", "span end, epoch ns"),
        _seconds("queue_s", "gen_ai.latency.time_in_queue"),
        _seconds("prefill_s", "gen_ai.latency.time_in_model_prefill"),
        _seconds("decode_s", "gen_ai.latency.time_in_model_decode"),
        _seconds("inference_s", "gen_ai.latency.time_in_model_inference"),
        _seconds("ttft_s", "gen_ai.latency.time_to_first_token"),
        _seconds("e2e_s", "gen_ai.latency.e2e"),
        _count("prompt_tokens", "gen_ai.usage.prompt_tokens", "tokens"),
        _count("completion_tokens", "gen_ai.usage.completion_tokens", "tokens"),
        _count("cached_tokens", "gen_ai.usage.cached_tokens: prompt tokens from the prefix cache", "tokens"),
        _count("max_tokens", "gen_ai.request.max_tokens", "tokens"),
        _count("num_preemptions", "journey PREEMPTED events"),
        _c("finish_status", S, None, "the FINISHED event's finish.status"),
        _c("process", S, None, "the resource's vllm.process_kind or service.name"),
        _c("journey", S, None, "[[event, time_ns], ...] of the journey.* events, JSON text"),
    ),
    internal=True,
)

LOG_REQUESTS = Table(
    "_log_requests",
    "a server log's request lines (staging)",
    "vLLM's request lines (--enable-log-requests), one row per request, before the run clock places them.",
    (
        PART,
        _c("request_id", S, None, "the id the frontend logged (Received request), else the engine's (Added request)"),
        _c("engine_request_id", S, None, "the engine's id (Added request) where it differs (vLLM 0.11+: a suffix)"),
        _c("arrival_stamp", S, None, "the Received (else Added) line's stamp as written"),
        _time("arrival_s", "the Received (else Added) line's time, where the stamp is dated (else placed later)"),
        _c("end_stamp", S, None, "the Finished, Generated response or Aborted line's stamp as written"),
        _time("end_s", "that line's time, where the stamp is dated (else placed later)"),
        _c("exact", B, None, "both stamps print the moment to the millisecond or better"),
        _c("arrival_exact", B, None, "the arrival's stamp prints the moment to the millisecond or better"),
        _c("outcome", S, None, "finished or aborted, as the log says; NULL where it says neither"),
        _c("finish_reason", S, None, "Generated response's finish_reason"),
        _count("max_tokens", "SamplingParams max_tokens", "tokens"),
        _count("input_tokens", "prompt_token_ids listed whole (older versions, at INFO)", "tokens"),
        _count("line", "the Received (else Added) line's number in the file", "count"),
    ),
    internal=True,
)

_STORED = (KERNELS, OPS, ANNOTATIONS, FLOWS, ENGINE_STEPS, REQUESTS, REQUEST_EVENTS, ENGINE_STATS, ENGINE_HISTOGRAMS)
TABLES: dict[str, Table] = {t.name: t for t in (*_STORED, ENGINE_CONFIG)}
"""The store's tables, by name."""
STAGING: dict[str, Table] = {t.name: t for t in (BENCH, SPANS, LOG_REQUESTS)}

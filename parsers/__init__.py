"""Parsers: sniff a file's first bytes, then stream it into the canonical tables (``lltrace.tables``).

One module per source family; each format it reads has one ``Format`` entry here: its name, what it can
attribute, the sniff and ingest functions, the marker words that say a file was meant to be it, and any
post-ingest step (the profiler's step detection). Detection never trusts the file name alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lltrace.errors import UnknownFormat
from lltrace.parsers import (
    aggregate_csv,
    bench_clients,
    guidellm_csv,
    inference_perf,
    kineto,
    kineto_steps,
    llmperf,
    otlp,
    prometheus,
    prometheus_api,
    sglang,
    tgi,
    trtllm,
    vllm,
    vllm_log,
    workloads,
)
from lltrace.parsers._blocks import check_stream, read_head
from lltrace.source_info import SourceInfo


@dataclass(frozen=True)
class Format:
    """A file format lltrace reads."""

    name: str
    family: str
    description: str
    tables: tuple[str, ...]
    attributes: str
    sniff: Callable[[bytes], bool]
    ingest: Callable[..., SourceInfo]  # (path, stage, part, *, keep_python, progress) -> SourceInfo
    markers: tuple[bytes, ...] = ()  # words that say a file was meant to be this format ("closest formats")
    # the versions / variants read, each with what it was checked on: "real file" (a file the tool wrote in
    # someone's run, in sample_traces) or "fixture from source" (built field by field from the
    # tool's schema and source at that version)
    versions: tuple[str, ...] = ()
    post_ingest: Callable[[Path, int], dict] | None = None  # (stage, part) -> what the metadata records
    reads_gzip: bool = False  # its reader streams a gzipped file itself (else it is given the file decompressed)


FORMATS: tuple[Format, ...] = (
    Format(
        name=kineto.NAME,
        family="PyTorch profiler",
        description="PyTorch profiler / Kineto Chrome-trace JSON (.json, .json.gz), 2021 to current, CUDA "
        "and ROCm, one file per rank",
        tables=("kernels", "ops", "annotations", "flows", "engine_steps"),
        attributes="engine steps (prefill/decode/mixed, token counts), GPU busy time, time per kernel "
        "class, CPU launch gaps, CUDA-graph use; no per-request latency",
        sniff=kineto.sniff,
        ingest=kineto.ingest,
        post_ingest=kineto_steps.post_ingest,
        reads_gzip=True,
        markers=(b'"traceEvents"', b'"ph"', b'"ts"', b'"dur"', b'"cat"', b'"schemaVersion"'),
        versions=(
            "2021 (capitalised categories, string tids): real file",
            "2022-2025 (async_cpu_to_gpu flows, ns decimals, baseTimeNanoseconds): real files",
            "ROCm (MI300X): real file; ROCm 6.2 (MI250, hex stream handles in HIP runtime events): real file (HTA)",
            "post-processed without metadata events (TraceLens): real file",
            "graph capture (launches recorded into a graph) and the CUPTI range profiler (counter ranges in place "
            "of kernels): real files (TraceLens, HTA), said in a warning",
            "the bare event-array form: fixture from source",
        ),
    ),
    Format(
        name=otlp.OTLP,
        family="OpenTelemetry",
        description="OpenTelemetry llm_request spans: collector JSON lines of ExportTraceServiceRequest, a single "
        "OTLP/JSON document, Grafana Tempo's trace API answer, or a Jaeger UI export",
        tables=("requests",),
        attributes="per request: queue, prefill, decode (measured by the engine), server TTFT and e2e, token "
        "counts; preemptions where journey events are present",
        sniff=otlp.sniff_otlp,
        ingest=otlp.ingest_otlp,
        markers=(b'"resourceSpans"', b'"scopeSpans"', b'"spans"', b'"traceId"', b'"llm_request"'),
        versions=(
            "vLLM llm_request spans, collector JSON lines: real file",
            "one OTLP/JSON document, Jaeger UI export: fixture from source",
            "Grafana Tempo trace API v1 (batches) and v2 (trace): run A's real spans so wrapped",
        ),
    ),
    Format(
        name=sglang.SGLANG_BENCH,
        family="SGLang",
        description="`python -m sglang.bench_serving` output JSON lines (compact and --output-details; bare "
        "Infinity/NaN)",
        tables=("requests",),
        attributes="per request with --output-details: client TTFT, ITLs, sizes, errors (bench_serving lists no "
        "per-request e2e); otherwise the summary",
        sniff=sglang.sniff_sglang_bench,
        ingest=sglang.ingest_sglang_bench,
        markers=(b'"backend"', b'"total_output_tokens_retokenized"', b'"sharegpt_output_len"'),
        versions=(
            "2024-07 compact summary lines (bench_serving.py @50a6136): real file",
            "2024-09 to 2026 summary and --output-details (bench_serving.py @0033168f): fixture from source; "
            "sglang.benchmark.serving 0.5.23 (2026-10): real file (lltrace's own run against vLLM 0.32)",
            "2026 save_results (sglang/benchmark/metrics.py @1291c7fc: total_input / total_output, request_rate "
            "'trace'): fixture from source",
        ),
    ),
    Format(
        name=sglang.BENCH_LOG,
        family="SGLang",
        description="stdout of `python -m sglang.bench_serving` (its printed result table per run), or the table alone",
        tables=(),
        attributes="a run's own summary (rate, counts, e2e / TTFT / TPOT / ITL mean, median and percentiles, to the "
        "table's two decimals) where no result file of that run is given",
        sniff=sglang.sniff_bench_log,
        ingest=sglang.ingest_bench_log,
        markers=(b"Serving Benchmark Result", b"Backend:", b"benchmark_args=Namespace("),
        versions=(
            "sglang.benchmark.serving 0.5.23 (2026-10): real file (lltrace's own runs against vLLM 0.32, each equal "
            "to its result file)",
        ),
    ),
    Format(
        name=vllm.BENCH,
        family="vLLM",
        description="`vllm bench serve` / benchmark_serving.py result JSON (summary, or per request with "
        "--save-detailed; appended objects; a vllm bench sweep combination's summary.json array)",
        tables=("requests",),
        attributes="per request (detailed): client TTFT, e2e, ITLs, token counts, send times, errors (the reason "
        "phrase of a refused request, with its status; an exception's line); queue + prefill stay one bucket without "
        "engine-side data",
        sniff=vllm.sniff_bench,
        ingest=vllm.ingest_bench,
        markers=(b'"backend"', b'"request_throughput"', b'"input_lens"', b'"ttfts"', b'"completed"'),
        versions=(
            "vllm bench serve (vllm/benchmarks/serve.py @009e6d4a; 0.32 --save-detailed): real file",
            "benchmark_serving.py @0049e29c (2025: request_goodput: with a colon): fixture from source",
            "benchmark_serving.py summary keys (a subset, vllm-ascend nightly): real file",
            "appended objects: fixture from source",
            "vllm bench sweep serve (sweep/serve.py: run=N.json, summary.json arrays, warmup.json): fixture from "
            "source and a real 0.32 result",
        ),
    ),
    Format(
        name=vllm.CLIENT_LOG,
        family="vLLM",
        description="stdout of `vllm bench serve` / `benchmark_serving.py` (its Namespace(...) line: "
        "request_id_prefix, result file; each run's printed result table), or the table alone",
        tables=(),
        attributes="the join key between a bench file and the engine's spans; a run's own summary (rate, counts, "
        "TTFT / TPOT / ITL / e2e mean, median and percentiles, to the table's two decimals) where no result file "
        "of that run is given",
        sniff=vllm.sniff_client_log,
        ingest=vllm.ingest_client_log,
        markers=(b"Namespace(", b"request_id_prefix", b"Serving Benchmark Result"),
        versions=(
            "vllm bench serve 0.32 stdout, options and result table: real files (each equal to its result file)",
            "result table of vllm/benchmarks/serve.py @009e6d4a (in-table concurrency and configured rate, peak "
            "figures) and of benchmark_serving.py 2024 (no failed count, 'Total Token throughput'), TensorRT-LLM's "
            "copy: fixtures from source",
        ),
    ),
    Format(
        name=prometheus.PROMETHEUS,
        family="Prometheus",
        description="Prometheus /metrics text scrapes of vLLM, SGLang and TGI (a file per scrape; time from "
        "`# scrape_unix_ts` or sample timestamps)",
        tables=("engine_stats",),
        attributes="running / waiting (by reason: capacity) requests, KV-cache usage, cumulative preemptions, "
        "token and prefix-cache counters over time; the API server's responses by status class (http_requests_total)",
        sniff=prometheus.sniff_prometheus,
        ingest=prometheus.ingest_prometheus,
        markers=(b"# TYPE", b"# HELP", b"vllm:"),
        versions=(
            "vLLM V1 0.32 /metrics: real file",
            "vLLM V0 and SGLang names: fixture from source",
            "TGI's router tgi_* families (queue, batch, durations): fixture from source",
        ),
    ),
    Format(
        name=prometheus_api.PROMETHEUS_API,
        family="Prometheus",
        description="a Prometheus server's HTTP API answers (/api/v1/query_range matrix, /api/v1/query vector; "
        "Prometheus, Thanos, Mimir, VictoriaMetrics), one per file or as JSON lines",
        tables=("engine_stats",),
        attributes="per replica and sample time: running / waiting requests, KV usage, cumulative preemptions, "
        "token and prefix-cache counters, latency histogram sums and counts, the API server's responses by status "
        "class (counter resets handled)",
        sniff=prometheus_api.sniff,
        ingest=prometheus_api.ingest,
        markers=(b'"resultType"', b'"result"', b'"metric"', b'"values"'),
        versions=("HTTP API v1 matrix and vector answers: fixture from the API documentation and run B's scrapes",),
    ),
    Format(
        name=vllm_log.SERVER_LOG,
        family="vLLM",
        description="vLLM server log: V1 `Engine NNN:` stats and `Iteration(k)` lines, V0 metrics.py stats "
        "and preemption warnings (ANSI colours, process prefixes and glued lines tolerated); the request lines of "
        "--enable-log-requests (Received, Added, Finished, Aborted, Generated response)",
        tables=("engine_stats", "engine_steps", "requests"),
        attributes="running / waiting / KV usage over time; per-iteration prefill and decode tokens and "
        "elapsed time (a step source without a profiler); per request: arrival, outcome (aborted, finished), "
        "prompt size where listed",
        sniff=vllm_log.sniff_server_log,
        ingest=vllm_log.ingest_server_log,
        markers=(b"INFO", b"Avg prompt throughput", b"Iteration(", b"Engine 000"),
        versions=(
            "V1 loggers.py stats and Iteration lines (0.32): real file",
            "V0 metrics.py stats: real excerpt",
            "dated stamps of a logging config of its own (NVIDIA NIM 'INFO 2025-09-10 16:32:05.957 metrics.py:386]', "
            "a platform plugin's '[vllm-rbln] INFO 2026-10-07 22:01:17,796 [loggers.py:248]'): run B's real log "
            "rewritten so, and public lines",
            "JSON records (--logging-config.formatter json, vLLM 0.32): real file (lltrace's run S_json_log)",
            "a log collector's RFC 3339 stamp on each line (kubectl logs --timestamps), Docker's json-file lines: run "
            "B's real log so kept",
            "request lines (0.32: Received, Added with the engine's suffix, Aborted request(s)): real file (lltrace's "
            "run T_log_requests); V0's (prompt and prompt_token_ids, Finished request): fixture from the source",
        ),
    ),
    Format(
        name=workloads.AZURE,
        family="production traces",
        description="Azure LLM inference trace CSV, 2023 (100 ns, no zone) and 2024 (us with zone) styles",
        tables=("requests",),
        attributes="arrivals and prompt/output sizes: workload mix, load over time (no latencies)",
        sniff=workloads.sniff_azure,
        ingest=workloads.ingest_azure,
        markers=(b"TIMESTAMP", b"ContextTokens", b"GeneratedTokens"),
        versions=(
            "2023 (100 ns, no zone): real file",
            "2024 (us with zone): real excerpt",
        ),
    ),
    Format(
        name=workloads.BURSTGPT,
        family="production traces",
        description="BurstGPT CSV, v1.1 and v1.2+ (Session ID, Elapsed time); zero response tokens = failed",
        tables=("requests",),
        attributes="arrivals, sizes, failures; end-to-end latency where Elapsed time is given",
        sniff=workloads.sniff_burstgpt,
        ingest=workloads.ingest_burstgpt,
        markers=(b"Timestamp", b"Request tokens", b"Response tokens"),
        versions=("v1.1 and v1.2+: fixture from source",),
    ),
    Format(
        name=workloads.MOONCAKE,
        family="production traces",
        description="Mooncake FAST'25 JSONL (relative ms; hash_ids = 512-token prefix blocks)",
        tables=("requests",),
        attributes="arrivals, sizes and prefix-block ids (prefix-cache reuse can be measured)",
        sniff=workloads.sniff_mooncake,
        ingest=workloads.ingest_mooncake,
        markers=(b'"timestamp"', b'"input_length"', b'"output_length"', b'"hash_ids"'),
        versions=("FAST'25 conversation trace: real file",),
    ),
    Format(
        name=workloads.OWN,
        family="lltrace",
        description="lltrace's request schema (docs/formats.md) as CSV, JSON lines or Parquet",
        tables=("requests",),
        attributes="whatever the columns give: arrivals and sizes at least; timestamps, preemptions when present",
        sniff=workloads.sniff_own,
        ingest=workloads.ingest_own,
        markers=(b"request_id", b"arrival_s", b"arrival_time", b"input_tokens", b"output_tokens"),
        versions=("lltrace request schema: fixture",),
    ),
    Format(
        name=llmperf.LLMPERF,
        family="benchmark clients",
        description="Ray LLMPerf *_individual_responses.json (no ids, no timestamps; errored rows kept)",
        tables=("requests",),
        attributes="per request: client TTFT, e2e, sizes, errors (status and message; no arrival times)",
        sniff=llmperf.sniff_llmperf,
        ingest=llmperf.ingest_llmperf,
        markers=(b'"ttft_s"', b'"end_to_end_latency_s"', b'"error_code"'),
        versions=(
            "V2 individual responses (token_benchmark_ray.py, Dec 2023 on; keys unchanged to Dec 2024): real file",
            "first release raw results (llmperf.py, Oct-Dec 2023, pandas column-wise JSON): fixture from source",
        ),
    ),
    Format(
        name=inference_perf.LIFECYCLE,
        family="benchmark clients",
        description="inference-perf stage_N_lifecycle_metrics.json / summary_lifecycle_metrics.json",
        tables=(),
        attributes="per stage of a rate sweep: requested and achieved rate, the client's latency and throughput "
        "distributions, as inference-perf computed them",
        sniff=inference_perf.sniff_lifecycle,
        ingest=inference_perf.ingest_lifecycle,
        markers=(b'"load_summary"', b'"successes"', b'"latency"', b'"failures"'),
        versions=("summarize_requests reports (2025-11 demo sweeps): real file",),
    ),
    Format(
        name=inference_perf.SERVER,
        family="benchmark clients",
        description="inference-perf stage_N_prometheus_metrics.json / summary_prometheus_metrics.json",
        tables=("engine_stats",),
        attributes="per stage: the model server's Prometheus metrics summarised by inference-perf (request "
        "rate, queue length, server latencies, KV usage, preemptions); its window means as a stage row of "
        "engine_stats",
        sniff=inference_perf.sniff_server,
        ingest=inference_perf.ingest_server,
        markers=(b'"load_summary"', b'"successes"', b'"queue_len"', b'"kv_cache_usage_percentage"'),
        versions=("summarize_prometheus_metrics reports (2025-11 demo sweeps): real file",),
    ),
    Format(
        name=inference_perf.PER_REQUEST,
        family="benchmark clients",
        description="inference-perf per_request_lifecycle_metrics.json",
        tables=("requests",),
        attributes="per request: client send time (perf_counter), sizes, client TTFT (streamed) and e2e, errors "
        "(status and message)",
        sniff=inference_perf.sniff_per_request,
        ingest=inference_perf.ingest_per_request,
        markers=(b'"start_time"', b'"end_time"', b'"request_metrics"', b'"output_token_times"'),
        versions=("per_request_lifecycle_metrics (2026-08 source): fixture from source",),
    ),
    Format(
        name=bench_clients.AIPERF_SUMMARY,
        family="benchmark clients",
        description="AIPerf profile_export_aiperf.json and GenAI-Perf profile_export_genai_perf.json aggregates",
        tables=(),
        attributes="the run's latency percentiles, request throughput and counts, as the tool computed them",
        sniff=bench_clients.sniff_aiperf_summary,
        ingest=bench_clients.ingest_aiperf_summary,
        markers=(b'"records"', b'"tag"', b'"avg"', b'"unit"', b'"request_throughput"'),
        versions=(
            "records schema before aiperf #343 (2025-10): real file",
            "GenAI-Perf-shaped schema (aiperf #343 on; GenAI-Perf): fixture from source; GenAI-Perf 0.0.16 "
            "(input_config.perf_analyzer.stimulus): real file (lltrace's own run against vLLM 0.32)",
            "AIPerf 0.13 (input_config.phases, no loadgen; error_request_count only when one failed): real file "
            "(lltrace's own run against vLLM 0.32)",
        ),
    ),
    Format(
        name=aggregate_csv.AGGREGATE_CSV,
        family="benchmark clients",
        description="AIPerf profile_export_aiperf.csv and GenAI-Perf profile_export_genai_perf.csv aggregates",
        tables=(),
        attributes="the run's latency percentiles, request throughput and counts, as the tool computed them (the "
        "CSV's two-decimal figures)",
        sniff=aggregate_csv.sniff,
        ingest=aggregate_csv.ingest,
        markers=(b"Metric,avg,min,max", b"Metric,Value", b"Time To First Token", b"Request Latency"),
        versions=(
            "GenAI-Perf csv_exporter ({:,.2f}): fixture from source; 0.0.16's (p99 down to p1): real file (own run)",
            "AIPerf csv_exporter (STAT_KEYS columns, GPU telemetry sections not read): fixture from source",
        ),
    ),
    Format(
        name=llmperf.LLMPERF_SUMMARY,
        family="benchmark clients",
        description="Ray LLMPerf *_summary.json",
        tables=(),
        attributes="the run's latency quantiles and error rate, as the client computed them",
        sniff=llmperf.sniff_llmperf_summary,
        ingest=llmperf.ingest_llmperf_summary,
        markers=(b'"results_', b'"num_concurrent_requests"'),
        versions=(
            "V2 summary (results_* statistics, Dec 2023 on): real file",
            "first release results (llmperf.py: arguments, num_valid, mean_ttft ms): fixture from source",
        ),
    ),
    Format(
        name=sglang.SCHEDULER_LOG,
        family="SGLang",
        description="SGLang server log: Prefill/Decode batch lines (2025-03 to 2026 variants), Retract "
        "requests, Req Time Stats; the request lines of --log-requests (Finish: text, or JSON request.finished)",
        tables=("engine_steps", "engine_stats", "requests"),
        attributes="prefill batches (tokens, cached tokens), running / queued requests and KV token usage over "
        "time, retractions (preemptions); per-request queue time where Req Time Stats are logged; per request from "
        "Finish lines: arrival, sizes, cached tokens, server e2e, queue time, streamed TTFT, retractions, aborts",
        sniff=sglang.sniff_scheduler_log,
        ingest=sglang.ingest_scheduler_log,
        markers=(b"Prefill batch", b"Decode batch", b"#running-req", b"#queue-req", b"Finish: obj="),
        versions=(
            "2025-03 to 2026 Prefill / Decode batch lines: real excerpt",
            "SGLang 0.5.10 Finish line (meta_info with epoch stamps; context-parallel rank headers): real excerpt",
            "earlier Finish lines (e2e_latency only), --log-requests-format json: fixture from source",
        ),
    ),
    Format(
        name=trtllm.TRTLLM_REQUESTS,
        family="TensorRT-LLM",
        description="`trtllm-bench --request_json` request records (ns timestamps)",
        tables=("requests",),
        attributes="per request: client TTFT and e2e, sizes, errors",
        sniff=trtllm.sniff_trtllm_requests,
        ingest=trtllm.ingest_trtllm_requests,
        markers=(b'"start_timestamp"', b'"first_token_timestamp"', b'"num_input_tokens"'),
        versions=("trtllm-bench --request_json: fixture from source",),
    ),
    Format(
        name=trtllm.TRTLLM_REPORT,
        family="TensorRT-LLM",
        description="`trtllm-bench --report_json` summary of a throughput or latency run",
        tables=(),
        attributes="the run's request latency (and, streamed, TTFT and TPOT) percentiles, request and token "
        "throughput, mean sizes and concurrency, as trtllm-bench computed them",
        sniff=trtllm.sniff_trtllm_report,
        ingest=trtllm.ingest_trtllm_report,
        markers=(b'"request_info"', b'"performance"', b'"world_info"', b'"request_latency_percentiles_ms"'),
        versions=(
            "get_statistics_dict (reporting.py @0249976575): streamed and not streamed; fixture from source",
            "PercentileStats without p90 (statistics.py @3856265): fixture from source",
        ),
    ),
    Format(
        name=trtllm.TRTLLM_ITERATIONS,
        family="TensorRT-LLM",
        description="per-iteration stats (`--iteration_log`, iteration perf stats): JSON lines or array",
        tables=("engine_steps", "engine_stats"),
        attributes="per iteration: context/generation requests and tokens, latency; queued and active requests, "
        "KV blocks in use, paused (preempted) requests",
        sniff=trtllm.sniff_trtllm_iterations,
        ingest=trtllm.ingest_trtllm_iterations,
        markers=(b'"iterLatencyMS"', b'"numActiveRequests"', b'"kvCacheStats"'),
        versions=("trtllm-serve /metrics iteration stats: real documentation example",),
    ),
    Format(
        name=tgi.TGI_LOG,
        family="TGI",
        description="Hugging Face TGI router log lines (Rust duration strings: s, ms, µs, ns)",
        tables=("requests",),
        attributes="per request: queue time and server total; inference (prefill + decode) not split",
        sniff=tgi.sniff_tgi_log,
        ingest=tgi.ingest_tgi_log,
        markers=(b"queue_time=", b"inference_time=", b"total_time="),
        versions=("router log lines: fixture from source",),
    ),
    Format(
        name=bench_clients.GENAI_PERF,
        family="benchmark clients",
        description="GenAI-Perf / Perf Analyzer profile_export.json",
        tables=("requests",),
        attributes="per request: send time, client TTFT and e2e (token counts need re-tokenizing: NULL)",
        sniff=bench_clients.sniff_genai_perf,
        ingest=bench_clients.ingest_genai_perf,
        markers=(b'"experiments"', b'"response_timestamps"', b'"service_kind"'),
        versions=(
            "profile_export.json 2023-08 (response timestamps only): fixture from source",
            "2024-02 (response outputs as text): fixture from source",
            "2024-03 (named outputs, request_inputs): fixture from source",
            "2024-05 on (service_kind, endpoint; OpenAI bodies with usage): fixture from source; perf_analyzer "
            "2.51 under GenAI-Perf 0.0.16: real file (lltrace's own run against vLLM 0.32)",
        ),
    ),
    Format(
        name=bench_clients.AIPERF,
        family="benchmark clients",
        description="AIPerf profile_export.jsonl",
        tables=("requests",),
        attributes="per request: ids, send time, sizes, client TTFT and e2e, errors (code, type and message)",
        sniff=bench_clients.sniff_aiperf,
        ingest=bench_clients.ingest_aiperf,
        markers=(b'"metadata"', b'"metrics"', b'"request_start_ns"'),
        versions=(
            "record schema 2025-10 pre-release (metadata.timestamp_ns, credit_phase, metric ttft): real file",
            "record schema 2025-10 from #325 (request_start_ns, benchmark_phase, was_cancelled): real file",
            "metric ttft renamed time_to_first_token (#343): fixture from source",
            "AIPerf 0.13 (usage_* counts beside its own): real file (lltrace's own run against vLLM 0.32)",
        ),
    ),
    Format(
        name=bench_clients.GUIDELLM,
        family="benchmark clients",
        description="guidellm benchmarks.json (current and <= 0.3 schemas)",
        tables=("requests",),
        attributes="per request: send time, sizes, cached tokens, client TTFT and e2e, errors (text; an HTTP "
        "status where the text names one), the engine's id",
        sniff=bench_clients.sniff_guidellm,
        ingest=bench_clients.ingest_guidellm,
        markers=(b'"benchmarks"', b'"requests"', b'"successful"'),
        versions=(
            "0.1 (GuidanceReport: benchmarks[].benchmarks[].results, errors): fixture from source",
            "0.2-0.3 (start_time, end_time): real file",
            ">= 0.4 (request_start_time, the scheduler_metrics measurement window, metadata.guidellm_version): "
            "fixture from source",
            "0.8 (response_id: the engine's id, the join's key): real file (lltrace's own run against vLLM 0.32)",
        ),
    ),
    Format(
        name=guidellm_csv.GUIDELLM_CSV,
        family="benchmark clients",
        description="guidellm's CSV report (benchmarks.csv, written beside benchmarks.json by default since 0.4)",
        tables=(),
        attributes="each benchmark's own statistics (client_summary): strategy and rate, request counts, duration, "
        "mean / median / p90 / p99 of TTFT, TPOT, ITL and request latency, throughput; the JSON's kept where both "
        "are given",
        sniff=guidellm_csv.sniff_guidellm_csv,
        ingest=guidellm_csv.ingest_guidellm_csv,
        markers=(b"Run Info,", b"Request Latency", b"Time to First Token", b"Percentiles"),
        versions=("0.8.1 (guidellm export of lltrace's own runs K_guidellm and M_guidellm_streams): real files",),
    ),
    Format(
        name=vllm_log.STATS_CSV,
        family="vLLM",
        description="vLLM V0 engine stats sampled into CSV by a client (BurstGPT replay tooling; KV usage in %)",
        tables=("engine_stats",),
        attributes="running / pending / swapped requests and KV usage over time (monotonic clock)",
        sniff=vllm_log.sniff_stats_csv,
        ingest=vllm_log.ingest_stats_csv,
        markers=(b"timestamp", b"prompt_throughput", b"num_running", b"gpu_kvcache_usage"),
        versions=("V0 stats sampled by a client: real file",),
    ),
    Format(
        name=vllm_log.REPLAY_CONFIG,
        family="vLLM",
        description="BurstGPT replay run configuration (JSON objects appended back to back)",
        tables=(),
        attributes="the run's model, QPS and trace scale (metadata)",
        sniff=vllm_log.sniff_replay_config,
        ingest=vllm_log.ingest_replay_config,
        markers=(b'"server_config"', b'"prompt_config"', b'"model path"'),
        versions=("run config: real file",),
    ),
    Format(
        name=tgi.TGI_HEADERS,
        family="TGI",
        description="TGI response headers saved per response (JSON lines or CSV; x-* times in integer ms)",
        tables=("requests",),
        attributes="per request: queue time and server total, token counts (inference not split)",
        sniff=tgi.sniff_tgi_headers,
        ingest=tgi.ingest_tgi_headers,
        markers=(b"x-queue-time", b"x-inference-time", b"x-total-time", b"x-generated-tokens"),
        versions=("x-* response headers, JSON lines or CSV: fixture from source",),
    ),
)


def closest_formats(head: bytes, n: int = 3) -> list[str]:
    """Formats whose marker words the head shares most, for an error message (best first)."""
    scores = []
    for fmt in FORMATS:
        hits = sum(m in head for m in fmt.markers)
        if hits:
            scores.append((hits / len(fmt.markers), fmt.name))
    return [name for _, name in sorted(scores, reverse=True)[:n]]


def detect(path: str | Path) -> Format | None:
    """The format of a file judged from its first bytes, or None.

    Raises ``UnknownFormat`` when the head fits more than one format (ambiguous).
    """
    head = read_head(path)
    head = head[3:] if head.startswith(b"\xef\xbb\xbf") else head  # a byte-order mark: accepted everywhere
    hits = [fmt for fmt in FORMATS if fmt.sniff(head)]
    if len(hits) > 1:
        raise UnknownFormat(f"{path}: ambiguous: the file looks like {', '.join(f.name for f in hits)}")
    if not hits:
        check_stream(path, head)
    return hits[0] if hits else None


def utf16_format(head: bytes) -> Format | None:
    """The format a UTF-16 text would have in UTF-8 (PowerShell 5's ``>`` and Windows editors write UTF-16):
    judged from the head with a UTF-16 byte-order mark, or with NULs at every other byte of a text, else None."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        codec = "utf-16"
    elif len(head) >= 16 and head[1:32:2].count(0) == len(head[1:32:2]) and head[0:32:2].count(0) == 0:
        codec = "utf-16-le"
    elif len(head) >= 16 and head[0:32:2].count(0) == len(head[0:32:2]) and head[1:32:2].count(0) == 0:
        codec = "utf-16-be"
    else:
        return None
    text = head[: len(head) - len(head) % 2].decode(codec, errors="ignore").encode()
    hits = [fmt for fmt in FORMATS if fmt.sniff(text)]
    return hits[0] if len(hits) == 1 else None


def by_name(name: str) -> Format:
    """Look a format up by name."""
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise KeyError(name)

"""The formats engines write: profiler traces, request spans, server logs, iteration and forward-pass traces,
metrics scrapes, the engines' own benchmark tools (one ``Format`` each: ``lltrace.parsers.format``)."""

from __future__ import annotations

from lltrace.parsers import (
    dynamo,
    kineto,
    kineto_steps,
    otlp,
    prometheus,
    prometheus_api,
    sglang,
    sglang_requests,
    tgi,
    trtllm,
    vllm,
    vllm_log,
    vllm_responses,
)
from lltrace.parsers.format import Format

ENGINE_FORMATS: tuple[Format, ...] = (
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
        name=vllm_responses.RESPONSES,
        family="vLLM",
        description="vLLM's per-request metrics (--enable-per-request-metrics, 0.32+) in response bodies a client "
        "saved: JSON lines or an array of completion / chat-completion responses (a streamed one's last chunk)",
        tables=("requests",),
        attributes="per request, the engine's own stamps: queue, prefill (its time_to_first_token_ms starts at "
        "scheduling) and decode, sizes, cached tokens; the arrival to the second; no TTFT or e2e (nothing times the "
        "frontend)",
        sniff=vllm_responses.sniff,
        ingest=vllm_responses.ingest,
        saved_by_client=True,
        markers=(b'"metrics"', b'"queue_time_ms"', b'"generation_time_ms"', b'"time_to_first_token_ms"'),
        versions=("vLLM 0.32 (build_per_request_timing_metrics): real file, lltrace's own run, its spans beside it",),
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
        name=dynamo.FPM_TRACE,
        family="NVIDIA Dynamo",
        description="Dynamo's forward-pass metrics trace (dynamo.fpm.trace.v1, DYN_FPM_TRACE=1): JSON lines, gzipped "
        "segments, one record per forward pass (full) or per interval (sampled), per worker and data-parallel rank",
        tables=("engine_steps", "engine_stats"),
        attributes="per forward pass: prefill and decode requests, prompt tokens computed, iteration time, requests "
        "waiting; a full trace is the engine's whole step timeline (queue split by what the engine was out of, "
        "prefill interference, replay calibration), a sampled one a sample of its steps",
        sniff=dynamo.sniff,
        ingest=dynamo.ingest,
        markers=(b"dynamo.fpm.trace", b'"fpm"', b'"scheduled_requests"', b'"queued_requests"', b'"wall_time"'),
        versions=(
            "v1 (ForwardPassMetrics version 1; fpm-trace reference and dynamo.vllm.instrumented_scheduler, 2026): "
            "converted by its rules from lltrace's real vLLM 0.32 runs' iteration logs (no Dynamo run here)",
        ),
    ),
    Format(
        name=dynamo.REQUEST_TRACE,
        family="NVIDIA Dynamo",
        description="Dynamo's request trace (dynamo.request.trace.v1, DYN_REQUEST_TRACE=1): JSON lines, gzipped "
        "segments, one request_end record per chat or completion request",
        tables=("requests",),
        attributes="per request, as Dynamo's frontend timed it: arrival, dispatch to a worker (routing and the "
        "router's wait before it), TTFT, total time, sizes, cached tokens, prefix block hashes; disaggregated: "
        "the workers and the estimated KV transfer; the engine's queue and prefill stay one part",
        sniff=dynamo.sniff_requests,
        ingest=dynamo.ingest_requests,
        markers=(b"dynamo.request.trace", b'"request_end"', b'"request_received_ms"', b'"ttft_ms"'),
        versions=(
            "v1 (RequestTracker, request-trace reference, 2026): fixtures from the documentation's examples, and "
            "lltrace's real vLLM run A's spans written by the tracker's rules (no Dynamo run here)",
        ),
    ),
    Format(
        name=sglang_requests.METRICS_EXPORT,
        family="SGLang",
        description="SGLang's request metrics export (--export-metrics-to-file: sglang-request-metrics-<hour>.log, "
        "one JSON line per finished request)",
        tables=("requests",),
        attributes="per request, as the Finish line of its request log: sizes, cached tokens, the scheduler's queue "
        "time, server e2e, retractions, aborts with their status; arrival, finish and (streamed) TTFT where the "
        "meta_info has its epoch stamps (2026)",
        sniff=sglang_requests.sniff_metrics_export,
        ingest=sglang_requests.ingest_metrics_export,
        markers=(b'"request_parameters"', b'"e2e_latency"', b'"meta_info"', b'"prompt_tokens"'),
        versions=(
            "FileRequestMetricsExporter (sglang/srt/observability/request_metrics_exporter.py, 2025-2026): fixture "
            "from source, the record built from a real SGLang 0.5.10 Finish line's meta_info",
        ),
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

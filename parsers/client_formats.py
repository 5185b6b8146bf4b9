"""The formats benchmark clients and workload sources write: client results and summaries, production arrival
traces, llm-d's benchmark report and lltrace's own request format (one ``Format`` each: ``lltrace.parsers.format``)."""

from __future__ import annotations

from lltrace.parsers import (
    aggregate_csv,
    bench_clients,
    guidellm_csv,
    inference_perf,
    llmd_report,
    llmperf,
    workloads,
)
from lltrace.parsers.format import Format

CLIENT_FORMATS: tuple[Format, ...] = (
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
        name=llmd_report.LLMD_REPORT,
        family="benchmark clients",
        description="llm-d benchmark report (llm-d-benchmark's vendor-neutral summary of any client's run), YAML or "
        "JSON, schema 0.2 and 0.2.1",
        tables=(),
        attributes="the run's request counts, sizes, TTFT / TPOT / ITL / request latency (mean, median, p90, p99) and "
        "throughput as the client computed them and llm-d's converter copied them (client_summary), with the load's "
        "generator, stage, asked rate and concurrency",
        sniff=llmd_report.sniff,
        ingest=llmd_report.ingest,
        markers=(b"request_performance", b"input_seq_len", b"output_token_rate", b"normalized_time_per_output_token"),
        versions=(
            "0.2 and 0.2.1 written by llm-d-benchmark's own converter (benchmark_report @8bc9f1dd, 2026-08) from "
            "lltrace's real vLLM bench, guidellm 0.8.1 and AIPerf 0.13.0 results and an inference-perf stage: real "
            "files",
        ),
    ),
)

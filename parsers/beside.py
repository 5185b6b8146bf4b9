"""Files that sit beside the ones lltrace reads and hold nothing more for it: what each is, said when it is
skipped (inside a folder) or refused (named alone), instead of "no known format" or "damaged"."""

from __future__ import annotations

# Files the tools write beside the ones lltrace reads that hold nothing more for it: (a CSV's header or a JSON
# document's head, the marker words it has, what the file is). Inside a folder they are skipped with that
# reason, not as damage.
_NOTHING_MORE = (
    (
        "csv",
        (b"run_number", b"request_throughput", b"duration"),
        "vllm bench sweep's summary.csv: its runs' results again (their run=N.json files are read)",
    ),
    ("json", (b'"session_id"', b'"payloads"'), "AIPerf's inputs.json: the request payloads it sent, no timings"),
    # GenAI-Perf 0.0.16's (a real run: sample_traces/vllm_cpu_limits/P_genai_perf): {"data": [{"payload": [{...}]}]}
    ("json", (b'"data"', b'"payload"'), "GenAI-Perf's inputs.json: the request payloads it sent, no timings"),
    # AIPerf 0.13's other files beside its exports (a real run: sample_traces/vllm_cpu_limits/L_aiperf)
    (
        "text",
        (b"AIPerf Server Metrics Export",),
        "AIPerf's server-metrics export (CSV): its statistics of the server's /metrics over the run, not read (lltrace "
        "reads the /metrics scrapes themselves)",
    ),
    (
        "json",
        (b'"aiperf_version"', b'"endpoints_configured"'),
        "AIPerf's server-metrics export (JSON): its statistics of the server's /metrics over the run, not read "
        "(lltrace reads the /metrics scrapes themselves)",
    ),
    ("text", (b"NVIDIA AIPerf |",), "AIPerf's console tables: the figures of profile_export_aiperf.json again"),
    ("text", (b" - aiperf.",), "AIPerf's own log"),
    ("text", (b"INFO", b"Profiling these models:"), "GenAI-Perf's console output: its log and its tables again"),
    (
        "json",
        (b'"ready"', b'"was_cancelled"', b'"partial"'),
        "AIPerf's .aiperf_results_ready.json: its exports are written",
    ),
    # guidellm's reports beside its benchmarks.json (>= 0.4 writes json, csv and html by default; real ones of 0.8.1,
    # `guidellm export` of lltrace's run K_guidellm: sample_traces/guidellm_exports; its CSV is read: guidellm-csv)
    (
        "head",
        (b"<title>GuideLLM Benchmark Report</title>",),
        "guidellm's HTML report: a few percentiles per benchmark, for viewing (lltrace reads benchmarks.json, which "
        "guidellm writes beside it)",
    ),
    (
        "head",
        (b"benchmarks:", b"module: guidellm."),
        "guidellm's YAML report: its benchmarks.json in YAML (lltrace reads the JSON: `guidellm export "
        "benchmarks.yaml --output kind=json` writes it)",
    ),
    # vLLM's offline benchmarks' --output-json (vllm/benchmarks/throughput.py, latency.py; benchmark_throughput.py,
    # benchmark_latency.py before them): one figure for a whole batch, no request served
    (
        "json",
        (b'"elapsed_time"', b'"num_requests"', b'"requests_per_second"', b'"tokens_per_second"'),
        "vLLM's offline throughput result (vllm bench throughput --output-json): one batch's requests and tokens per "
        "second, no request served or timed; lltrace reads serving runs (vllm bench serve --save-result, the engine's "
        "spans, logs and metrics)",
    ),
    (
        "json",
        (b'"avg_latency"', b'"latencies"', b'"percentiles"'),
        "vLLM's offline latency result (vllm bench latency --output-json): the time of one whole batch, repeated, no "
        "request served; lltrace reads serving runs (vllm bench serve --save-result, the engine's spans, logs and "
        "metrics)",
    ),
    # PyTorch's ExecutionTraceObserver (Chakra schema): a real one of torch 2.13 starts
    # {"schema": "1.1.1-chakra.0.0.4", "pid": …, "time": …, "start_ts": …, "nodes": [{"id": 2, …, "inputs": {…
    (
        "json",
        (b'"schema"', b'"nodes"', b'"inputs"'),
        "a PyTorch execution trace (ExecutionTraceObserver, Chakra schema): operators, their inputs and "
        "dependencies, no times; lltrace reads the profiler trace of the same run (export_chrome_trace or "
        "tensorboard_trace_handler)",
    ),
    # rocprofv3 --output-format json (rocprofiler-sdk; a real one in AMD-AGI/TraceLens' tests):
    # {"rocprofiler-sdk-tool": [{"metadata": …, "agents": …, "buffer_records": {"kernel_dispatch": […]}}]}
    (
        "json",
        (b'"rocprofiler-sdk-tool"',),
        "rocprofiler-sdk's JSON (rocprofv3 --output-format json): AMD's kernel dispatch records, a format lltrace does "
        "not read; lltrace reads the PyTorch profiler trace of the same run (its ROCm traces hold the same kernels)",
    ),
)


def nothing_more(head: bytes) -> str | None:
    """What a file is that a tool writes beside the ones lltrace reads and that holds nothing more for it (the
    sweep's CSV of its results, AIPerf's sent payloads), else None."""
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    is_json = text[:1] in (b"{", b"[")
    header = text.split(b"\n", 1)[0]
    for kind, markers, why in _NOTHING_MORE:
        where = header if kind == "text" else text  # "head": anywhere in a text's head (its first lines vary)
        # (a text's first line may start with "[" too: a log's "[2026-12-03 11:59:24] INFO ...")
        if (is_json if kind == "json" else text[:1] != b"{") and all(m in where for m in markers):
            return why
    return None

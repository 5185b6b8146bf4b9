"""vLLM serving sources: ``vllm bench serve`` result JSON, its client log, OTLP ``llm_request`` spans
(collector JSON lines, single documents, Jaeger UI export) and Prometheus ``/metrics`` scrapes.

Each parser writes source-shaped rows to a staging table (``_bench``, ``_spans``, ``engine_stats``); the
run's files are joined into the canonical ``requests`` table afterwards (``lltrace.assemble``), because a
request's client-side and server-side records come from different files. Field facts:
docs/SERVING_FORMATS.md §A.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lltrace.errors import TraceFormatError
from lltrace.parsers._lines import json_lines, read_text
from lltrace.parsers.kineto import SourceInfo
from lltrace.parsers.kineto_steps import STEP_SCHEMA
from lltrace.parsers.schema import table_from_rows

BENCH = "vllm-bench"
CLIENT_LOG = "vllm-bench-client-log"
OTLP = "otlp-traces"
PROMETHEUS = "prometheus"
SERVER_LOG = "vllm-server-log"


def _write(stage: Path, table: str, part: int, rows: list[dict[str, Any]], schema: pa.Schema) -> int:
    (stage / table).mkdir(parents=True, exist_ok=True)
    pq.write_table(table_from_rows(rows, schema), stage / table / f"part-{part:05d}.parquet")
    return len(rows)


def _strip(head: bytes) -> bytes:
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")


# -- vllm bench serve result JSON ---------------------------------------------------------------------


def sniff_bench(head: bytes) -> bool:
    """A ``vllm bench serve`` / ``benchmark_serving.py`` result: a JSON object with its summary keys."""
    text = _strip(head)
    sglang_only = (b'"total_output_tokens_retokenized"', b'"sharegpt_output_len"', b'"accept_length"')
    return (
        text.startswith(b"{")
        and (b'"backend"' in text or b'"endpoint_type"' in text)
        and any(k in text for k in (b'"request_throughput"', b'"input_lens"', b'"completed"', b'"num_prompts"'))
        and not any(k in text for k in sglang_only)
    )


BENCH_SCHEMA = pa.schema(
    [
        ("part", pa.int32()),
        ("client_id", pa.string()),
        ("client_file", pa.string()),
        ("idx", pa.int64()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("ttft_s", pa.float64()),
        ("e2e_s", pa.float64()),
        ("client_start_s", pa.float64()),
        ("client_queue_s", pa.float64()),
        ("itl_count", pa.int64()),
        ("itl_sum_s", pa.float64()),
        ("error", pa.string()),
        ("status", pa.string()),
    ]
)

_PER_REQUEST = ("input_lens", "output_lens", "ttfts", "latencies", "start_times", "queue_times", "itls", "errors")


def _bench_objects(path: str, text: str) -> list[dict]:
    """One or more JSON objects (``--append-result`` puts them back to back); ``Infinity``/``NaN`` allowed."""
    dec = json.JSONDecoder()
    objs, pos = [], 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos >= len(text):
            break
        try:
            obj, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            line = text.count("\n", 0, exc.pos) + 1
            raise TraceFormatError(path, f"line {line}", f"invalid JSON in a bench result ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise TraceFormatError(path, f"line {text.count(chr(10), 0, pos) + 1}", "expected a JSON object")
        objs.append(obj)
    return objs


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, str):
        if v.lower() in ("inf", "infinity"):
            return math.inf
        try:
            return float(v)
        except ValueError:
            return None
    return float(v) if isinstance(v, (int, float)) else None


def ingest_bench(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per-request rows of a bench result (when saved with details) and its summary into the metadata."""
    info = SourceInfo(path=path, format=BENCH)
    try:
        text = read_text(path)
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, f"byte {exc.start}", "invalid UTF-8") from None
    rows: list[dict[str, Any]] = []
    summaries = []
    stem = os.path.basename(path)
    for k, obj in enumerate(_bench_objects(path, text)):
        client_id = stem if k == 0 else f"{stem}#{k}"
        summary = {key: v for key, v in obj.items() if key not in _PER_REQUEST + ("generated_texts",)}
        if "request_goodput:" in summary:  # benchmark_serving.py <= early 2025 wrote the key with a colon
            summary.setdefault("request_goodput", summary.pop("request_goodput:"))
        if isinstance(summary.get("request_rate"), str) or summary.get("request_rate") == math.inf:
            summary["request_rate"] = "inf"
        summary["client_id"] = client_id
        summaries.append(summary)
        lens = obj.get("input_lens")
        if not isinstance(lens, list):
            continue
        n = len(lens)
        cols = {key: obj.get(key) for key in _PER_REQUEST}
        for key, val in cols.items():
            if val is not None and (not isinstance(val, list) or len(val) != n):
                raise TraceFormatError(
                    path, f"object {k + 1}", f"per-request list {key!r} has {len(val)} entries, input_lens has {n}"
                )

        def at(key: str, i: int, cols: dict[str, Any] = cols) -> Any:
            v = cols[key]
            return v[i] if v is not None else None

        for i in range(n):
            err = at("errors", i)
            itl = at("itls", i)
            ok = err in (None, "")
            rows.append(
                {
                    "part": part,
                    "client_id": client_id,
                    "client_file": stem,
                    "idx": i,
                    "input_tokens": at("input_lens", i),
                    "output_tokens": at("output_lens", i) if ok else None,  # 0 for a failed request means "none"
                    "ttft_s": _num(at("ttfts", i)) if ok else None,
                    "e2e_s": _num(at("latencies", i)) if ok else None,
                    "client_start_s": _num(at("start_times", i)),
                    "client_queue_s": _num(at("queue_times", i)),
                    "itl_count": len(itl) if isinstance(itl, list) else None,
                    "itl_sum_s": float(sum(itl)) if isinstance(itl, list) else None,
                    "error": err or None,
                    "status": "ok" if ok else "error",
                }
            )
    # records read: per-request rows where the file has them, else its result objects
    info.records = _write(stage, "_bench", part, rows, BENCH_SCHEMA) or len(summaries)
    info.version = "detailed (per-request lists)" if rows else "summary only"
    info.details["bench"] = summaries
    return info


# -- the bench client's stdout --------------------------------------------------------------------------

_NS_FIELD = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[\w.+-]+)")


def sniff_client_log(head: bytes) -> bool:
    """The stdout of ``vllm bench serve``: its ``Namespace(...)`` dump of the options."""
    return b"Namespace(" in head and b"bench_type='serve'" in head


def ingest_client_log(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """The options that join a bench file to the engine's spans (``request_id_prefix``, ``result_filename``)."""
    info = SourceInfo(path=path, format=CLIENT_LOG)
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    m = re.search(r"Namespace\((.*)\)\s*$", text, re.MULTILINE)
    if m is None:
        raise TraceFormatError(path, "line 1", "no Namespace(...) line with the bench options")
    fields = {}
    for key, raw in _NS_FIELD.findall(m.group(1)):
        fields[key] = raw[1:-1] if raw[:1] in "'\"" else raw
    keep = (
        "request_id_prefix",
        "result_filename",
        "result_dir",
        "num_prompts",
        "request_rate",
        "seed",
        "dataset_name",
        "model",
        "base_url",
        "host",
        "port",
        "max_concurrency",
    )
    info.details["client"] = {k: fields[k] for k in keep if k in fields}
    info.records = 1
    info.version = "vllm bench serve stdout"
    return info


# -- OpenTelemetry spans -------------------------------------------------------------------------------


def sniff_otlp(head: bytes) -> bool:
    """OTLP/JSON ExportTraceServiceRequest (collector JSON lines or one document), or a Jaeger UI export."""
    text = _strip(head)
    if re.match(rb'\{\s*"resourceSpans"', text):
        return True
    return re.match(rb'\{\s*"data"\s*:\s*\[\s*\{\s*"traceID"', text) is not None


SPAN_SCHEMA = pa.schema(
    [
        ("part", pa.int32()),
        ("request_id", pa.string()),
        ("trace_id", pa.string()),
        ("span_id", pa.string()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("queue_s", pa.float64()),
        ("prefill_s", pa.float64()),
        ("decode_s", pa.float64()),
        ("inference_s", pa.float64()),
        ("ttft_s", pa.float64()),
        ("e2e_s", pa.float64()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("max_tokens", pa.int64()),
        ("num_preemptions", pa.int64()),
        ("finish_status", pa.string()),
        ("process", pa.string()),
        ("journey", pa.string()),  # [[event, time_ns], ...] from journey.* span events, JSON text
    ]
)

_ATTR = {
    "gen_ai.latency.time_in_queue": "queue_s",
    "gen_ai.latency.time_in_model_prefill": "prefill_s",
    "gen_ai.latency.time_in_model_decode": "decode_s",
    "gen_ai.latency.time_in_model_inference": "inference_s",
    "gen_ai.latency.time_to_first_token": "ttft_s",
    "gen_ai.latency.e2e": "e2e_s",
    "gen_ai.usage.prompt_tokens": "prompt_tokens",
    "gen_ai.usage.completion_tokens": "completion_tokens",
    "gen_ai.request.max_tokens": "max_tokens",
    "gen_ai.request.id": "request_id",
}
_INT_COLS = {"prompt_tokens", "completion_tokens", "max_tokens"}


def _otlp_value(v: dict) -> Any:
    for key in ("stringValue", "doubleValue", "intValue", "boolValue"):
        if key in v:
            val = v[key]
            return int(val) if key == "intValue" else val  # OTLP/JSON writes int64 as a string
    return None


def _span_row(part: int, span: dict, process: str | None) -> dict[str, Any] | None:
    if span.get("name") != "llm_request":
        return None
    attrs = {a["key"]: _otlp_value(a.get("value", {})) for a in span.get("attributes", [])}
    row: dict[str, Any] = {c: None for c in SPAN_SCHEMA.names}
    row.update(part=part, trace_id=span.get("traceId"), span_id=span.get("spanId"), process=process)
    row["start_ns"] = int(span["startTimeUnixNano"])
    row["end_ns"] = int(span["endTimeUnixNano"])
    for key, col in _ATTR.items():
        if key in attrs and attrs[key] is not None:
            row[col] = int(attrs[key]) if col in _INT_COLS else attrs[key]
    events = span.get("events") or []
    journey = [e for e in events if str(e.get("name", "")).startswith("journey.")]
    if journey:
        row["num_preemptions"] = sum(1 for e in journey if e.get("name") == "journey.PREEMPTED")
        fin = [e for e in journey if e.get("name") == "journey.FINISHED"]
        if fin:
            fattrs = {a["key"]: _otlp_value(a.get("value", {})) for a in fin[-1].get("attributes", [])}
            row["finish_status"] = fattrs.get("finish.status")
        row["journey"] = json.dumps(
            [[e["name"].split(".", 1)[1].lower(), int(e["timeUnixNano"])] for e in journey if e.get("timeUnixNano")]
        )
    return row


def _jaeger_rows(part: int, doc: dict) -> tuple[list[dict], int]:
    rows, other = [], 0
    for trace in doc.get("data", []):
        for sp in trace.get("spans", []):
            if sp.get("operationName") != "llm_request":
                other += 1
                continue
            tags = {t["key"]: t.get("value") for t in sp.get("tags", [])}
            start_ns = int(sp["startTime"]) * 1000
            span = {
                "name": "llm_request",
                "traceId": sp.get("traceID"),
                "spanId": sp.get("spanID"),
                "startTimeUnixNano": start_ns,
                "endTimeUnixNano": start_ns + int(sp.get("duration", 0)) * 1000,
                "attributes": [
                    {"key": k, "value": {"stringValue": v} if isinstance(v, str) else {"doubleValue": v}}
                    for k, v in tags.items()
                ],
            }
            rows.append(_span_row(part, span, None))
    return rows, other


_SGLANG_STAGES = {"prefill_waiting": "queue_s", "prefill_forward": "prefill_s", "decode_forward": "decode_s"}


def _sglang_requests(part: int, spans: list[dict]) -> list[dict[str, Any]]:
    """SGLang ``Req <rid>`` root spans: the split comes from their stage spans (``prefill_waiting`` = queue,
    ``prefill_forward``, ``decode_forward`` summed), preferred over the root's own gen_ai.latency attributes,
    which do not add up in real exports (docs/SERVING_FORMATS.md §B2)."""
    children: dict[str, list[dict]] = {}
    for sp in spans:
        if sp.get("parentSpanId"):
            children.setdefault(sp["parentSpanId"], []).append(sp)
    out = []
    for sp in spans:
        name = str(sp.get("name", ""))
        if not name.startswith("Req "):
            continue
        row = _span_row(part, sp | {"name": "llm_request"}, "sglang")
        if row is None:
            continue
        if row["request_id"] is None:
            row["request_id"] = name[4:]
        stages: dict[str, float] = {}
        stack, n_desc = list(children.get(sp.get("spanId"), [])), 0
        while stack:
            c = stack.pop()
            n_desc += 1
            stack.extend(children.get(c.get("spanId"), []))
            col = _SGLANG_STAGES.get(c.get("name"))
            if col:
                dur = (int(c["endTimeUnixNano"]) - int(c["startTimeUnixNano"])) / 1e9
                stages[col] = stages.get(col, 0.0) + dur
        row.update(stages)  # measured stage spans win over the root's attributes
        row["_stage_spans"] = n_desc
        out.append(row)
    return out


def ingest_otlp(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """``llm_request`` spans → ``_spans`` rows (other spans, such as startup spans, are counted and dropped)."""
    info = SourceInfo(path=path, format=OTLP)
    rows: list[dict[str, Any]] = []
    all_spans: list[dict] = []
    other = 0
    text = read_text(path)
    docs: list[dict] = []
    stripped = text.strip()
    try:
        docs = [json.loads(stripped)]
        info.version = "OTLP/JSON document"
    except json.JSONDecodeError:
        info.version = "OTLP/JSON lines (collector file exporter)"
        docs = json_lines(path, info, "JSON", text)
    for doc in docs:
        if "data" in doc and "resourceSpans" not in doc:
            info.version = "Jaeger UI export"
            r, o = _jaeger_rows(part, doc)
            rows.extend(r)
            all_spans.extend({} for _ in range(o))
            continue
        for rs in doc.get("resourceSpans", []):
            res = {a["key"]: _otlp_value(a.get("value", {})) for a in rs.get("resource", {}).get("attributes", [])}
            process = res.get("vllm.process_kind") or res.get("service.name")
            for ss in rs.get("scopeSpans", rs.get("instrumentationLibrarySpans", [])):
                for span in ss.get("spans", []):
                    row = _span_row(part, span, process)
                    if row is None:
                        all_spans.append(span)
                    else:
                        rows.append(row)
    sglang = _sglang_requests(part, all_spans)
    rows.extend(sglang)
    other = len(all_spans) - sum(1 + r.pop("_stage_spans") for r in sglang)
    if sglang:
        info.version += ", SGLang request spans with stage spans"
    if other:
        info.dropped["spans other than request spans"] = other
    info.records = _write(stage, "_spans", part, rows, SPAN_SCHEMA) + other
    return info


# -- Prometheus text scrapes ---------------------------------------------------------------------------


def sniff_prometheus(head: bytes) -> bool:
    """Prometheus text exposition with vLLM (or SGLang) metric families."""
    text = _strip(head)
    return (
        (text.startswith(b"# ") or text[:5].isalpha())
        and (b"# TYPE " in text or b"# HELP " in text)
        and (b"vllm:" in text or b"sglang:" in text)
    )


STATS_SCHEMA = pa.schema(
    [
        ("part", pa.int32()),
        ("ts_s", pa.float64()),
        ("engine", pa.string()),
        ("running", pa.float64()),
        ("waiting", pa.float64()),
        ("waiting_capacity", pa.float64()),
        ("waiting_deferred", pa.float64()),
        ("swapped", pa.float64()),
        ("kv_usage", pa.float64()),
        ("preemptions_total", pa.float64()),
        ("prompt_tokens_total", pa.float64()),
        ("generation_tokens_total", pa.float64()),
        ("prefix_cache_queries_total", pa.float64()),
        ("prefix_cache_hits_total", pa.float64()),
        ("source", pa.string()),
        # histogram sums and counts (cumulative): differences between scrapes give a window's mean
        ("queue_time_sum_s", pa.float64()),
        ("queue_time_count", pa.float64()),
        ("ttft_sum_s", pa.float64()),
        ("ttft_count", pa.float64()),
        ("e2e_sum_s", pa.float64()),
        ("e2e_count", pa.float64()),
        ("prefill_time_sum_s", pa.float64()),
        ("decode_time_sum_s", pa.float64()),
    ]
)

# column ← metric names across vLLM versions (first present wins)
_PROM = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs"),
    "swapped": ("vllm:num_requests_swapped",),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
    "preemptions_total": ("vllm:num_preemptions_total", "sglang:num_retracted_reqs_total", "sglang:num_retracted_reqs"),
    "prompt_tokens_total": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total"),
    "generation_tokens_total": ("vllm:generation_tokens_total", "sglang:generation_tokens_total"),
    "prefix_cache_queries_total": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits_total": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "queue_time_sum_s": ("vllm:request_queue_time_seconds_sum", "sglang:queue_time_seconds_sum"),
    "queue_time_count": ("vllm:request_queue_time_seconds_count", "sglang:queue_time_seconds_count"),
    "ttft_sum_s": ("vllm:time_to_first_token_seconds_sum", "sglang:time_to_first_token_seconds_sum"),
    "ttft_count": ("vllm:time_to_first_token_seconds_count", "sglang:time_to_first_token_seconds_count"),
    "e2e_sum_s": ("vllm:e2e_request_latency_seconds_sum", "sglang:e2e_request_latency_seconds_sum"),
    "e2e_count": ("vllm:e2e_request_latency_seconds_count", "sglang:e2e_request_latency_seconds_count"),
    "prefill_time_sum_s": ("vllm:request_prefill_time_seconds_sum",),
    "decode_time_sum_s": ("vllm:request_decode_time_seconds_sum",),
}
_SAMPLE = re.compile(r"^([A-Za-z_:][\w:]*)(?:\{([^}]*)\})?\s+(\S+)(?:\s+(-?\d+))?\s*$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _number(path: str, line: int, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise TraceFormatError(path, f"line {line}", f"not a number: {text[:40]!r}") from None


def ingest_prometheus(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """One scrape → one ``engine_stats`` row per engine; the scrape time comes from a ``# scrape_unix_ts``
    line or the samples' own timestamps, else it stays NULL (a file's mtime is not a scrape time)."""
    info = SourceInfo(path=path, format=PROMETHEUS, version="Prometheus text exposition")
    ts: float | None = None
    per_engine: dict[str, dict[str, float]] = {}
    for n, line in enumerate(read_text(path).splitlines(), start=1):
        if line.startswith("# scrape_unix_ts"):
            ts = _number(path, n, line.split()[2] if len(line.split()) > 2 else "")
            continue
        if not line.strip() or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            raise TraceFormatError(path, f"line {n}", f"not a Prometheus sample: {line[:80]!r}")
        name, labels, value, sample_ts = m.groups()
        if not name.startswith(("vllm:", "sglang:")):
            continue
        lab = dict(_LABEL.findall(labels or ""))
        engine = lab.get("engine", "0")
        stats = per_engine.setdefault(engine, {})
        if sample_ts is not None and ts is None:
            ts = int(sample_ts) / 1000
        v = _number(path, n, value)
        if name == "vllm:num_requests_waiting_by_reason":
            stats[f"waiting_{lab.get('reason', 'other')}"] = stats.get(f"waiting_{lab.get('reason', 'other')}", 0) + v
            continue
        stats[name] = stats.get(name, 0.0) + v
    rows = []
    for engine, stats in sorted(per_engine.items()):
        row: dict[str, Any] = {"part": part, "ts_s": ts, "engine": engine, "source": "prometheus"}
        for col, names in _PROM.items():
            row[col] = next((stats[n] for n in names if n in stats), None)
        row["waiting_capacity"] = stats.get("waiting_capacity")
        row["waiting_deferred"] = stats.get("waiting_deferred")
        rows.append(row)
    if ts is None:
        info.warnings.append(
            f"{path}: no scrape time in the file (# scrape_unix_ts or sample timestamps); ts_s is NULL"
        )
    info.records = _write(stage, "engine_stats", part, rows, STATS_SCHEMA)
    info.details["scrape_unix_ts"] = ts
    return info


# -- server log lines ----------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_HEADER = re.compile(r"(?:INFO|WARNING|ERROR|DEBUG)\s+(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.\d+)?\s+\[?[\w./-]+:\d+\]")
_F = r"(\d+(?:\.\d+)?)"  # a plain decimal number, as the loggers print them
_V1_STATS = re.compile(
    rf"Engine (\d+): Avg prompt throughput: {_F} tokens/s, Avg generation throughput: {_F} tokens/s, "
    rf"Running: (\d+) reqs, Waiting: (\d+) reqs,(?: Preemptions: (\d+),)?\s*(?:\w+ )?KV cache usage: {_F}%"
    rf"(?:, Prefix cache hit rate: {_F}%)?"
)
_V0_STATS = re.compile(
    rf"Avg prompt throughput: {_F} tokens/s, Avg generation throughput: {_F} tokens/s, Running: (\d+) reqs, "
    rf"Swapped: (\d+) reqs, Pending: (\d+) reqs(?:, GPU KV cache usage: {_F}%)?"
)
_ITERATION = re.compile(
    r"Engine (\d+): Iteration\((\d+)\): (\d+) context requests, (\d+) context tokens, (\d+) generation requests, "
    rf"(\d+) generation tokens, iteration elapsed time: {_F} ms(?:, (?:\w+ )?KV cache usage: {_F}%)?"
)
_ITERATION_START = re.compile(r"Engine \d+: Iteration\(")
_V0_PREEMPT = re.compile(r"is preempted by PreemptionMode\.(\w+) mode.*?total_num_cumulative_preemption=(\d+)")


def sniff_server_log(head: bytes) -> bool:
    """A vLLM server log: its logger header lines with stats, iteration or startup lines."""
    text = head.decode("utf-8", "replace")
    return _HEADER.search(text) is not None and any(
        k in text for k in ("vLLM", "vllm", "Avg prompt throughput", "Iteration(", "api_server", "loggers.py")
    )


LOG_STATS_SCHEMA = pa.schema(
    [
        *STATS_SCHEMA,
        ("log_stamp", pa.string()),
        ("prompt_throughput", pa.float64()),
        ("generation_throughput", pa.float64()),
        ("prefix_cache_hit_rate", pa.float64()),
    ]
)
# The profiler's step columns (NULL here: a log line has no GPU data) plus what the log adds.
LOG_STEP_SCHEMA = pa.schema(
    [*STEP_SCHEMA, ("engine", pa.string()), ("kv_usage", pa.float64()), ("log_stamp", pa.string())]
)


_ARG_INT = re.compile(
    r"'(num_gpu_blocks_override|max_num_seqs|max_num_batched_tokens|block_size|max_model_len|tensor_parallel_size)'"
    r": (\d+)"
)
_ARG_STR = re.compile(r"'(model|kv_cache_dtype|quantization|dtype)': '([^']*)'")
_ARG_BOOL = re.compile(r"'(enable_chunked_prefill|enable_prefix_caching)': (True|False)")
_KV_TOKENS = re.compile(r"KV cache size: ([\d,]+) tokens")


def _engine_config(text: str) -> dict[str, Any]:
    """Scheduler settings the log states: the ``non-default args`` line and the KV cache size line.

    Only what the log prints; defaults the engine applied silently are not guessed here.
    """
    config: dict[str, Any] = {}
    if (start := text.find("non-default args:")) >= 0:
        line = text[start : text.find("\n", start)]
        config.update({k: int(v) for k, v in _ARG_INT.findall(line)})
        config.update({k: v == "True" for k, v in _ARG_BOOL.findall(line)})
        config.update(dict(_ARG_STR.findall(line)))
    if m := _KV_TOKENS.search(text):
        config["kv_cache_tokens"] = int(m.group(1).replace(",", ""))
    return config


def ingest_server_log(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Stats lines (V0 and V1) → ``engine_stats``; ``Iteration(k)`` lines → ``engine_steps`` (source log).

    Log times are ``MM-DD HH:MM:SS`` with no year or zone; they are kept as ``log_stamp`` and placed on the
    run clock when the run is assembled (year from another source of the run; zone assumed UTC).
    """
    info = SourceInfo(path=path, format=SERVER_LOG)
    text = _ANSI.sub("", Path(path).read_text(encoding="utf-8", errors="replace"))
    stats: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    heads = list(_HEADER.finditer(text))
    v0 = v1 = unparsed = 0
    for i, h in enumerate(heads):
        body = text[h.end() : heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        stamp = f"{h.group(1)}-{h.group(2)} {h.group(3)}:{h.group(4)}:{h.group(5)}"
        if m := _ITERATION.search(body):
            eng, k, nc, tc, ng, tg, ms, kv = m.groups()
            tc_i, tg_i = int(tc), int(tg)
            kind = "mixed" if tc_i and tg_i else "prefill" if tc_i else "decode" if tg_i else "idle"
            steps.append(
                {
                    "part": part,
                    "step_id": int(k),
                    "engine": eng,
                    "kind": kind,
                    "kind_from": "log counts",
                    "prefill_reqs": int(nc),
                    "prefill_tokens": tc_i,
                    "decode_reqs": int(ng),
                    "decode_tokens": tg_i,
                    "wall_s": float(ms) / 1e3,
                    "kv_usage": float(kv) / 100 if kv else None,
                    "log_stamp": stamp,
                    "detection": "vllm iteration log",
                    "source": "log",
                }
            )
            v1 += 1
        elif m := _V1_STATS.search(body):
            eng, pt, gt, run, wait, pre, kv, hit = m.groups()
            stats.append(
                {
                    "part": part,
                    "engine": eng,
                    "running": float(run),
                    "waiting": float(wait),
                    "preemptions_total": float(pre) if pre else None,
                    "kv_usage": float(kv) / 100,
                    "prompt_throughput": float(pt),
                    "generation_throughput": float(gt),
                    "prefix_cache_hit_rate": float(hit) / 100 if hit else None,
                    "log_stamp": stamp,
                    "source": "log",
                }
            )
            v1 += 1
        elif m := _V0_STATS.search(body):
            pt, gt, run, swapped, pending, kv = m.groups()
            stats.append(
                {
                    "part": part,
                    "engine": "0",
                    "running": float(run),
                    "waiting": float(pending),
                    "swapped": float(swapped),
                    "kv_usage": float(kv) / 100 if kv else None,
                    "prompt_throughput": float(pt),
                    "generation_throughput": float(gt),
                    "log_stamp": stamp,
                    "source": "log",
                }
            )
            v0 += 1
        elif m := _V0_PREEMPT.search(body):
            # Logged only every 50th preemption: the cumulative count is the figure, not the line count.
            stats.append(
                {
                    "part": part,
                    "engine": "0",
                    "preemptions_total": float(m.group(2)),
                    "log_stamp": stamp,
                    "source": "log",
                }
            )
        elif "Avg prompt throughput:" in body or _ITERATION_START.search(body):
            unparsed += 1  # a stats or iteration line mangled past reading
    if unparsed:
        info.dropped["unreadable_stats_lines"] = unparsed
        info.warnings.append(f"{path}: {unparsed} stats or iteration lines that do not parse: skipped")
    if not stats and not steps:
        info.warnings.append(f"{path}: no stats or iteration lines found in the log")
    _write(stage, "engine_stats", part, stats, LOG_STATS_SCHEMA)
    if steps:
        _write(stage, "engine_steps", part, steps, LOG_STEP_SCHEMA)
    info.records = len(heads)
    info.version = "V0 (metrics.py)" if v0 and not v1 else "V1 (loggers.py)" if v1 else "no stats lines"
    info.details["log_lines"] = {"stats": len(stats), "iterations": len(steps)}
    if config := _engine_config(text):
        info.details["engine_config"] = config
    return info


# -- custom engine-stats scrapes (BurstGPT replay tooling) ---------------------------------------------------

STATS_CSV = "vllm-stats-csv"
REPLAY_CONFIG = "burstgpt-replay-config"


def sniff_stats_csv(head: bytes) -> bool:
    """A CSV of vLLM V0 engine stats sampled by a client (liao4s/BurstGPT_test ``vllm_log_*.csv``)."""
    first = head.split(b"\n", 1)[0].strip()
    return first.startswith(b"timestamp,prompt_throughput,generation_throughput,num_running")


def ingest_stats_csv(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Samples → ``engine_stats``. ``timestamp`` is a monotonic clock (arbitrary origin) and the KV usage
    columns are percentages (0–100), as the capture script writes them."""
    import csv as _csv

    info = SourceInfo(path=path, format=STATS_CSV, version="V0 stats sampled by a client")
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        reader = _csv.DictReader(f)
        need = {"timestamp", "num_running", "num_pending", "gpu_kvcache_usage"}
        missing = need - set(reader.fieldnames or [])
        if missing:
            raise TraceFormatError(path, "line 1", f"missing column(s): {', '.join(sorted(missing))}")
        for n, r in enumerate(reader, start=2):
            try:
                rows.append(
                    {
                        "part": part,
                        "ts_s": float(r["timestamp"]),
                        "engine": "0",
                        "source": "scrape",
                        "running": float(r["num_running"]),
                        "waiting": float(r["num_pending"]),
                        "swapped": float(r["num_swapped"]) if r.get("num_swapped") not in (None, "") else None,
                        "kv_usage": float(r["gpu_kvcache_usage"]) / 100,
                        "prompt_throughput": float(r["prompt_throughput"]) if r.get("prompt_throughput") else None,
                        "generation_throughput": float(r["generation_throughput"])
                        if r.get("generation_throughput")
                        else None,
                    }
                )
            except ValueError as exc:
                raise TraceFormatError(path, f"line {n}", f"not a number ({exc})") from None
    _write(stage, "engine_stats", part, rows, LOG_STATS_SCHEMA)
    info.records = len(rows)
    info.details["clock"] = {"origin": "client monotonic seconds (arbitrary origin); not aligned to wall clock"}
    return info


def sniff_replay_config(head: bytes) -> bool:
    """The run configuration the BurstGPT replay tool appends (objects back to back, no separator)."""
    text = _strip(head)
    return text.startswith(b"{") and b'"server_config"' in text and b'"prompt_config"' in text


def ingest_replay_config(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """The configurations (model, QPS, trace scale) into the run metadata; no rows."""
    info = SourceInfo(path=path, format=REPLAY_CONFIG, version="appended JSON objects")
    text = read_text(path)
    objs = _bench_objects(path, text)
    info.details["configs"] = objs
    info.records = len(objs)
    return info

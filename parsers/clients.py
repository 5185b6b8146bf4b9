"""Benchmark clients other than vLLM's: SGLang ``bench_serving`` JSONL and Ray LLMPerf outputs.

SGLang's per-request lists (``--output-details``) have vLLM's semantics and go through the same bench
staging (joined later if spans exist); LLMPerf rows carry no ids and no timestamps, only durations in
completion order, so they become ``requests`` rows directly with ``request_id`` and ``arrival_s`` NULL.
Field facts: docs/SERVING_FORMATS.md §B1, §D2.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from lltrace.errors import TraceFormatError
from lltrace.parsers import vllm
from lltrace.parsers._lines import json_lines, read_text
from lltrace.parsers.kineto import SourceInfo
from lltrace.parsers.schema import REQUEST_SCHEMA, table_from_rows

SGLANG_BENCH = "sglang-bench"
LLMPERF = "llmperf"
LLMPERF_SUMMARY = "llmperf-summary"


def sniff_sglang_bench(head: bytes) -> bool:
    """SGLang bench_serving output: JSON lines whose keys include SGLang-only fields."""
    line = head.lstrip().split(b"\n", 1)[0]
    return (
        line.startswith(b"{")
        and b'"backend"' in line
        and any(k in line for k in (b'"total_output_tokens_retokenized"', b'"sharegpt_output_len"', b'"accept_length"'))
    )


def ingest_sglang_bench(path: str, stage: Path, part: int, **kw: Any) -> SourceInfo:
    """One object per line (a run per request rate), bare ``Infinity``/``NaN`` allowed."""
    info = vllm.ingest_bench(path, stage, part, **kw)
    info.format = SGLANG_BENCH
    return info


def sniff_llmperf(head: bytes) -> bool:
    """LLMPerf ``*_individual_responses.json``: a JSON array of per-request result objects."""
    text = head.lstrip()
    return text.startswith(b"[") and b'"end_to_end_latency_s"' in text and b'"ttft_s"' in text


def sniff_llmperf_summary(head: bytes) -> bool:
    """LLMPerf ``*_summary.json``: one flat object of ``results_*`` statistics."""
    text = head.lstrip()
    return text.startswith(b"{") and b'"results_' in text and b'"num_concurrent_requests"' in text


def _load(path: str) -> Any:
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise TraceFormatError(path, f"line {exc.lineno}", f"invalid JSON ({exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, f"byte {exc.start}", "invalid UTF-8") from None


def ingest_llmperf(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per-request rows in completion order; errored rows kept with status ``error``.

    LLMPerf's ``inter_token_latency_s`` is a mean for successes but the sum of gaps for errored rows; it is
    not a requests column, so the quirk only matters for the summary kept in the metadata.
    """
    info = SourceInfo(path=path, format=LLMPERF, version="individual responses")
    data = _load(path)
    if not isinstance(data, list):
        raise TraceFormatError(path, "line 1", "expected a JSON array of per-request objects")
    rows = []
    errors = 0
    name = Path(path).name
    for i, r in enumerate(data):
        if not isinstance(r, dict):
            raise TraceFormatError(path, f"element {i}", "expected an object")
        failed = r.get("error_code") not in (None, 0) or bool(r.get("error_msg"))
        errors += failed
        rows.append(
            {
                "client_id": name,
                "client_index": i,
                "input_tokens": r.get("number_input_tokens"),
                "output_tokens": r.get("number_output_tokens"),
                "status": "error" if failed else "ok",
                "ttft_s": r.get("ttft_s"),
                "e2e_s": r.get("end_to_end_latency_s"),
            }
        )
    (stage / "requests").mkdir(parents=True, exist_ok=True)
    pq.write_table(table_from_rows(rows, REQUEST_SCHEMA), stage / "requests" / f"part-{part:05d}.parquet")
    info.records = len(rows)
    info.details["errored_requests"] = errors
    return info


def ingest_llmperf_summary(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """The summary statistics, kept in the run metadata (no per-request rows)."""
    info = SourceInfo(path=path, format=LLMPERF_SUMMARY, version="summary")
    data = _load(path)
    if not isinstance(data, dict):
        raise TraceFormatError(path, "line 1", "expected one JSON object")
    info.details["summary"] = {k: v for k, v in data.items() if not re.match(r".*_quantiles_p(25|75|95)$", k)}
    info.records = 1
    return info


# -- shared helpers ------------------------------------------------------------------------------------


def _write_requests(stage: Path, part: int, rows: list[dict[str, Any]]) -> int:
    (stage / "requests").mkdir(parents=True, exist_ok=True)
    pq.write_table(table_from_rows(rows, REQUEST_SCHEMA), stage / "requests" / f"part-{part:05d}.parquet")
    return len(rows)


def _check_durations(path: str, rows: list[dict[str, Any]], where: str) -> None:
    """Negative latencies mean broken clocks or fields: a bad-input error, not data."""
    for i, r in enumerate(rows):
        for k in ("ttft_s", "e2e_s", "queue_s", "server_e2e_s"):
            v = r.get(k)
            if v is not None and v < 0:
                raise TraceFormatError(path, f"{where} {i}", f"negative duration {k}={v}")


def _check_ids(path: str, rows: list[dict[str, Any]]) -> None:
    seen: set[str] = set()
    for i, r in enumerate(rows):
        rid = r.get("request_id")
        if rid is None:
            continue
        if rid in seen:
            raise TraceFormatError(path, f"record {i}", f"duplicate request id {rid!r}")
        seen.add(rid)


def _json_lines(path: str, info: SourceInfo | None = None) -> list[dict]:
    out = json_lines(path, info)
    for n, obj in enumerate(out, start=1):
        if not isinstance(obj, dict):
            raise TraceFormatError(path, f"record {n}", "expected a JSON object")
    return out


# -- TensorRT-LLM --------------------------------------------------------------------------------------

TRTLLM_REQUESTS = "trtllm-bench-requests"
TRTLLM_ITERATIONS = "trtllm-iteration-log"


def sniff_trtllm_requests(head: bytes) -> bool:
    """``trtllm-bench --request_json``: a JSON array of RequestRecord dumps (ns timestamps)."""
    text = head.lstrip()
    return text.startswith(b"[") and b'"start_timestamp"' in text and b'"first_token_timestamp"' in text


def ingest_trtllm_requests(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per request: TTFT and e2e from the ns timestamps (monotonic; kept as the client clock)."""
    info = SourceInfo(path=path, format=TRTLLM_REQUESTS, version="RequestRecord list")
    data = _load(path)
    if not isinstance(data, list):
        raise TraceFormatError(path, "line 1", "expected a JSON array of request records")
    rows = []
    for i, r in enumerate(data):
        start, first, end = r.get("start_timestamp"), r.get("first_token_timestamp"), r.get("end_timestamp")
        failed = bool(r.get("error_tokens"))
        rows.append(
            {
                "request_id": str(r["id"]) if r.get("id") is not None else None,
                "client_id": Path(path).name,
                "client_index": i,
                "input_tokens": r.get("num_input_tokens"),
                "output_tokens": r.get("num_output_tokens", r.get("num_generated_tokens")),
                "status": "error" if failed else "ok",
                "ttft_s": (first - start) / 1e9 if first is not None and start is not None else None,
                "e2e_s": (end - start) / 1e9 if end is not None and start is not None else None,
                "client_start_s": start / 1e9 if start is not None else None,
            }
        )
    _check_durations(path, rows, "record")
    _check_ids(path, rows)
    info.records = _write_requests(stage, part, rows)
    info.details["clock"] = {"origin": "trtllm-bench monotonic ns (not aligned to wall clock)"}
    return info


def sniff_trtllm_iterations(head: bytes) -> bool:
    """TensorRT-LLM per-iteration stats (``--iteration_log`` / iteration perf stats): JSON lines or array."""
    return b'"iterLatencyMS"' in head and (b'"numActiveRequests"' in head or b'"kvCacheStats"' in head)


def ingest_trtllm_iterations(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Iterations → ``engine_steps`` (source log) and ``engine_stats`` (queued, active, KV blocks, paused)."""
    from lltrace.parsers.vllm import LOG_STATS_SCHEMA, LOG_STEP_SCHEMA

    info = SourceInfo(path=path, format=TRTLLM_ITERATIONS, version="iteration stats")
    text = read_text(path).strip()
    records = _load(path) if text.startswith("[") else _json_lines(path, info)
    steps, stats = [], []
    for i, r in enumerate(records):
        ifb = r.get("inflightBatchingStats") or {}
        kv = r.get("kvCacheStats") or {}
        n_ctx, n_gen = ifb.get("numContextRequests"), ifb.get("numGenRequests")
        ctx_tokens = ifb.get("numCtxTokens")
        kind = None
        if n_ctx is not None and n_gen is not None:
            kind = "mixed" if n_ctx and n_gen else "prefill" if n_ctx else "decode" if n_gen else "idle"
        ts = r.get("timestamp")
        ts_s = float(ts) if isinstance(ts, (int, float)) else None
        steps.append(
            {
                "part": part,
                "step_id": r.get("iter", i),
                "engine": "0",
                "kind": kind,
                "kind_from": "log counts",
                "prefill_reqs": n_ctx,
                "prefill_tokens": ctx_tokens,
                "decode_reqs": n_gen,
                "decode_tokens": n_gen,  # one token per generation request per iteration (no speculation stats)
                "wall_s": r["iterLatencyMS"] / 1e3 if r.get("iterLatencyMS") is not None else None,
                "end_s": ts_s,
                "start_s": ts_s - r["iterLatencyMS"] / 1e3 if ts_s and r.get("iterLatencyMS") else None,
                "kv_usage": kv["usedNumBlocks"] / kv["maxNumBlocks"] if kv.get("maxNumBlocks") else None,
                "log_stamp": str(ts) if ts is not None and ts_s is None else None,
                "detection": "trtllm iteration log",
                "source": "log",
            }
        )
        stats.append(
            {
                "part": part,
                "ts_s": ts_s,
                "engine": "0",
                "source": "log",
                "running": r.get("numActiveRequests"),
                "waiting": r.get("numQueuedRequests"),
                "swapped": ifb.get("numPausedRequests"),
                "kv_usage": kv["usedNumBlocks"] / kv["maxNumBlocks"] if kv.get("maxNumBlocks") else None,
            }
        )
    for table, rows, schema in (("engine_steps", steps, LOG_STEP_SCHEMA), ("engine_stats", stats, LOG_STATS_SCHEMA)):
        (stage / table).mkdir(parents=True, exist_ok=True)
        pq.write_table(table_from_rows(rows, schema), stage / table / f"part-{part:05d}.parquet")
    info.records = len(records)
    info.details["paused_is_preempted"] = "numPausedRequests (requests paused for KV room) is kept in swapped"
    return info


# -- Hugging Face TGI ------------------------------------------------------------------------------------

TGI_LOG = "tgi-log"
_RUST_DURATION = re.compile(r"([\d.]+)\s*(s|ms|µs|us|ns)$")
_TGI_FIELDS = re.compile(r'(total_time|validation_time|queue_time|inference_time|time_per_token)="([^"]+)"')
_ISO = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)")


def rust_duration_s(text: str) -> float:
    """``1.19s``, ``204.8µs``, ``23.1us``, ``19.9ms``, ``5ns`` → seconds."""
    m = _RUST_DURATION.match(text.strip())
    if m is None:
        raise ValueError(text)
    value, unit = float(m.group(1)), m.group(2)
    return value * {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}[unit]


def sniff_tgi_log(head: bytes) -> bool:
    """TGI router log lines with its per-request timing span fields."""
    text = head.decode("utf-8", "replace")
    return 'queue_time="' in text and 'inference_time="' in text


def ingest_tgi_log(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per request: queue time and server total; inference (prefill + decode) is not split by TGI."""
    info = SourceInfo(path=path, format=TGI_LOG, version="router log")
    rows = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        fields = dict(_TGI_FIELDS.findall(line))
        if "queue_time" not in fields:
            continue
        try:
            d = {k: rust_duration_s(v) for k, v in fields.items()}
        except ValueError as exc:
            raise TraceFormatError(path, f"line {n}", f"not a duration: {exc.args[0]!r}") from None
        ts = _ISO.search(line)
        finished = None
        if ts:
            from datetime import datetime

            finished = datetime.fromisoformat(ts.group(1).replace("Z", "+00:00")).timestamp()
        rows.append(
            {
                "client_id": Path(path).name,
                "client_index": len(rows),
                "queue_s": d.get("queue_time"),
                "server_e2e_s": d.get("total_time"),
                "finished_s": finished,
                "status": "ok",
                "arrival_s": finished - d["total_time"] if finished is not None and "total_time" in d else None,
            }
        )
    _check_durations(path, rows, "request")
    info.records = _write_requests(stage, part, rows)
    return info


# -- GenAI-Perf / AIPerf ----------------------------------------------------------------------------------

GENAI_PERF = "genai-perf-export"
AIPERF = "aiperf-export"


def sniff_genai_perf(head: bytes) -> bool:
    """Perf Analyzer / GenAI-Perf ``profile_export.json``."""
    text = head.lstrip()
    return (
        text.startswith(b"{")
        and b'"experiments"' in text
        and (b'"response_timestamps"' in text or b'"service_kind"' in text or b'"requests"' in text)
    )


def ingest_genai_perf(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per request: send time (epoch ns), TTFT and e2e from the response timestamps.

    Token counts need re-tokenizing the streamed text, which lltrace does not do: they stay NULL.
    """
    info = SourceInfo(path=path, format=GENAI_PERF)
    data = _load(path)
    info.version = str(data.get("version")) if data.get("version") else "profile export"
    rows = []
    for exp in data.get("experiments", []):
        e = exp.get("experiment", {})
        client = f"{e.get('mode')}={e.get('value')}"
        for i, r in enumerate(exp.get("requests", [])):
            t0 = r.get("timestamp")
            resp = r.get("response_timestamps") or []
            rows.append(
                {
                    "client_id": client,
                    "client_index": i,
                    "arrival_ns": t0,
                    "arrival_s": t0 / 1e9 if t0 is not None else None,
                    "ttft_s": (resp[0] - t0) / 1e9 if resp and t0 is not None else None,
                    "e2e_s": (resp[-1] - t0) / 1e9 if resp and t0 is not None else None,
                    "status": "ok" if resp else "error",
                }
            )
    _check_durations(path, rows, "request")
    info.records = _write_requests(stage, part, rows)
    info.details["service_kind"] = data.get("service_kind")
    return info


def sniff_aiperf(head: bytes) -> bool:
    """AIPerf ``profile_export.jsonl``: one record per line with metadata and {value, unit} metrics."""
    line = head.lstrip().split(b"\n", 1)[0]
    return line.startswith(b"{") and b'"metadata"' in line and b'"metrics"' in line and b'"request_start_ns"' in line


def _metric(metrics: dict, name: str) -> float | None:
    m = metrics.get(name)
    if not isinstance(m, dict) or m.get("value") is None or isinstance(m.get("value"), list):
        return None
    scale = {"ms": 1e-3, "s": 1.0, "ns": 1e-9, "us": 1e-6}.get(m.get("unit", ""), 1.0)
    return float(m["value"]) * scale


def ingest_aiperf(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per request: ids, send time, sizes, TTFT and e2e (units read from each metric)."""
    info = SourceInfo(path=path, format=AIPERF, version="profile_export.jsonl")
    rows = []
    for i, r in enumerate(_json_lines(path, info)):
        md, mt = r.get("metadata") or {}, r.get("metrics") or {}
        isl = (
            mt.get("input_sequence_length", {}).get("value")
            if isinstance(mt.get("input_sequence_length"), dict)
            else None
        )
        osl = (
            mt.get("output_sequence_length", {}).get("value")
            if isinstance(mt.get("output_sequence_length"), dict)
            else None
        )
        start = md.get("request_start_ns")
        rows.append(
            {
                "request_id": md.get("x_request_id"),
                "client_id": Path(path).name,
                "client_index": i,
                "arrival_ns": start,
                "arrival_s": start / 1e9 if start is not None else None,
                "input_tokens": int(isl) if isl is not None else r.get("error_isl"),
                "output_tokens": int(osl) if osl is not None else None,
                "ttft_s": _metric(mt, "time_to_first_token"),
                "e2e_s": _metric(mt, "request_latency"),
                "status": "error" if r.get("error") else ("cancelled" if md.get("was_cancelled") else "ok"),
            }
        )
    _check_durations(path, rows, "line")
    _check_ids(path, rows)
    info.records = _write_requests(stage, part, rows)
    return info


# -- guidellm ----------------------------------------------------------------------------------------------

GUIDELLM = "guidellm-benchmarks"


def sniff_guidellm(head: bytes) -> bool:
    """guidellm ``benchmarks.json`` (new and <=0.3 schemas)."""
    text = head.lstrip()
    return (
        text.startswith(b"{")
        and b'"benchmarks"' in text
        and (b'"requests"' in text or b'"metrics"' in text or b'"guidellm' in text or b'"run_id"' in text)
    )


def ingest_guidellm(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per request from ``requests.{successful,incomplete,errored}``; both timing schemas."""
    info = SourceInfo(path=path, format=GUIDELLM)
    data = _load(path)
    rows = []
    old = 0
    for b_i, bench in enumerate(data.get("benchmarks", [])):
        groups = bench.get("requests") or {}
        for status, items in (
            ("ok", groups.get("successful")),
            ("incomplete", groups.get("incomplete")),
            ("error", groups.get("errored")),
        ):
            for r in items or []:
                if "request_start_time" in r or "time_to_first_token_ms" in r:
                    start = r.get("request_start_time")
                    ttft = r.get("time_to_first_token_ms")
                    rows.append(
                        {
                            "request_id": r.get("request_id"),
                            "client_id": f"benchmark-{b_i}",
                            "arrival_s": start,
                            "input_tokens": r.get("prompt_tokens"),
                            "output_tokens": r.get("output_tokens"),
                            "cached_tokens": r.get("cached_tokens"),
                            "ttft_s": ttft / 1e3 if ttft is not None else None,
                            "e2e_s": r.get("request_latency"),
                            "status": status,
                        }
                    )
                else:  # <= 0.3: start_time, first_token_time, end_time (unix s)
                    old += 1
                    start, first, end = r.get("start_time"), r.get("first_token_time"), r.get("end_time")
                    rows.append(
                        {
                            "request_id": r.get("request_id"),
                            "client_id": f"benchmark-{b_i}",
                            "arrival_s": start,
                            "input_tokens": r.get("prompt_tokens"),
                            "output_tokens": r.get("output_tokens"),
                            "ttft_s": first - start if first is not None and start is not None else None,
                            "e2e_s": end - start if end is not None and start is not None else None,
                            "status": status,
                        }
                    )
    _check_durations(path, rows, "request")
    info.version = "<= 0.3 schema" if old and old == len(rows) else "current schema"
    info.records = _write_requests(stage, part, rows)
    return info


TGI_HEADERS = "tgi-response-headers"
_TGI_MS = {"x-queue-time": "queue_s", "x-total-time": "server_e2e_s"}


def sniff_tgi_headers(head: bytes) -> bool:
    """TGI response headers saved by a client, one response per JSON line or CSV row."""
    first = head.lstrip().split(b"\n", 1)[0]
    return b"x-queue-time" in first and (b"x-inference-time" in first or b"x-total-time" in first)


def ingest_tgi_headers(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per response: queue and total time (integer ms headers), prompt and generated tokens.

    ``x-inference-time`` covers prefill and decode together (TGI does not split it), and
    ``x-time-per-token`` is inference time over generated tokens, prefill included; both stay in the
    metadata's description, not in the requests columns.
    """
    import csv as _csv

    info = SourceInfo(path=path, format=TGI_HEADERS)
    text = read_text(path)
    if text.lstrip().startswith("{"):
        records, info.version = _json_lines(path, info), "JSON lines"
    else:
        records, info.version = list(_csv.DictReader(text.splitlines())), "CSV"
    rows = []
    for i, h in enumerate(records):
        h = {str(k).lower(): v for k, v in h.items()}

        def num(key: str, h: dict = h) -> float | None:
            v = h.get(key)
            return float(v) if v not in (None, "") else None

        row: dict[str, Any] = {
            "client_id": Path(path).name,
            "client_index": i,
            "status": "ok",
            "input_tokens": int(num("x-prompt-tokens")) if num("x-prompt-tokens") is not None else None,
            "output_tokens": int(num("x-generated-tokens")) if num("x-generated-tokens") is not None else None,
        }
        for key, col in _TGI_MS.items():
            v = num(key)
            row[col] = v / 1e3 if v is not None else None
        rows.append(row)
    _check_durations(path, rows, "response")
    info.records = _write_requests(stage, part, rows)
    return info

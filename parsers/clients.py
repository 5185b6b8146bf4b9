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

import pyarrow as pa
import pyarrow.parquet as pq

from lltrace.errors import TraceFormatError
from lltrace.parsers import vllm
from lltrace.parsers.kineto import SourceInfo
from lltrace.parsers.schema import REQUEST_SCHEMA

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
        return json.loads(Path(path).read_text(encoding="utf-8"))
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
    pq.write_table(pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA), stage / "requests" / f"part-{part:05d}.parquet")
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

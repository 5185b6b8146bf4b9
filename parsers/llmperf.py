"""Ray LLMPerf: per-request results and the summary, in both schemas it has published: V2
(``token_benchmark_ray.py``, Dec 2023 on; its keys unchanged through Dec 2024) and the first release
(``llmperf.py``, Oct-Dec 2023).

LLMPerf rows carry no ids and no timestamps, only durations in completion order, so they become ``requests``
rows with ``request_id`` and ``arrival_s`` NULL. What each file holds: docs/formats.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import check_ids, error_code, error_line, error_message, load_json, write_rows
from lltrace.source_info import SourceInfo

LLMPERF = "llmperf"
LLMPERF_SUMMARY = "llmperf-summary"


def sniff_llmperf(head: bytes) -> bool:
    """LLMPerf ``*_individual_responses.json`` (V2, Dec 2023 on): a JSON array of per-request result objects;
    or the first release's ``{framework}-{ts}_raw.json`` (``llmperf.py``, Oct-Dec 2023): pandas' column-wise
    ``to_json`` of (valid, ttft, total_time, tokens_in, tokens_out, cause, id)."""
    text = head.lstrip()
    if text.startswith(b"["):
        return b'"end_to_end_latency_s"' in text and b'"ttft_s"' in text
    return text.startswith(b'{"valid":{') and b'"total_time":{' in text and b'"tokens_out":{' in text


def sniff_llmperf_summary(head: bytes) -> bool:
    """LLMPerf ``*_summary.json``: one flat object of ``results_*`` statistics (V2); or the first release's
    ``{framework}-{ts}.json``: its arguments with ``num_valid``, ``mean_ttft`` (ms) and the other means."""
    text = head.lstrip()
    if not text.startswith(b"{"):
        return False
    v2 = b'"results_' in text and b'"num_concurrent_requests"' in text
    return v2 or (b'"num_valid"' in text and b'"mean_ttft"' in text and b'"concur_requests"' in text)


def _error_text(r: dict[str, Any]) -> str | None:
    """A failed response's text: LLMPerf keeps the body of a refused request (its message kept, where it is an
    OpenAI-style error), or the message of an error sent in the stream with its ``error.code`` (a word for some
    servers: then kept here, not as a number)."""
    word = r.get("error_code") if error_code(r.get("error_code")) is None else None
    return error_line(": ".join(str(x) for x in (word, error_message(r.get("error_msg"))) if x))


def ingest_llmperf(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per-request rows in completion order; errored rows kept with status ``error``.

    LLMPerf's ``inter_token_latency_s`` is a mean for successes but the sum of gaps for errored rows; it is
    not a requests column, so the quirk only matters for the summary kept in the metadata.
    """
    info = SourceInfo(path=path, format=LLMPERF, version="individual responses")
    data = load_json(path)
    if isinstance(data, dict) and isinstance(data.get("valid"), dict):
        return _llmperf_v1(path, stage, part, data, info)
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
        code = error_code(r.get("error_code"))  # -1: LLMPerf's own, for an exception before any response
        rows.append(
            {
                "client_id": name,
                "client_index": i,
                "input_tokens": r.get("number_input_tokens"),
                "output_tokens": r.get("number_output_tokens"),
                "status": "error" if failed else "ok",
                "error_code": code if failed else None,
                "error": _error_text(r) if failed else None,
                "ttft_s": r.get("ttft_s"),
                "e2e_s": r.get("end_to_end_latency_s"),
            }
        )
    info.records = write_rows(stage, "requests", part, rows)
    info.details["errored_requests"] = errors
    return info


def _llmperf_v1(path: str, stage: Path, part: int, data: dict[str, Any], info: SourceInfo) -> SourceInfo:
    """The first release's raw results (``llmperf.py`` ``results_analysis``): one column per field, keyed by
    row index. ``validate`` returns ``("Exception", -1, -1, -1, -1, cause, "")`` for a failed request (the -1s
    are no values: NULL here); ``Mismatch`` (the reply did not repeat the number asked for) is a completed
    request, and LLMPerf's own means include it (they exclude only exceptions). Times in seconds."""
    info.version = "llmperf.py first release (Oct-Dec 2023): raw results"
    columns = {k: v for k, v in data.items() if isinstance(v, dict)}
    if set(columns) < {"valid", "ttft", "total_time", "tokens_in", "tokens_out"}:
        raise TraceFormatError(path, "line 1", "expected the columns valid, ttft, total_time, tokens_in, tokens_out")
    order = sorted(columns["valid"], key=lambda k: int(k) if str(k).isdigit() else str(k))
    rows = []
    failed = mismatched = 0
    name = Path(path).name
    for i, key in enumerate(order):
        valid = columns["valid"].get(key)
        error = valid == "Exception"
        failed += error
        mismatched += valid == "Mismatch"

        def value(col: str, error: bool = error, key: str = key) -> Any:
            return None if error else columns.get(col, {}).get(key)

        rows.append(
            {
                "client_id": name,
                "client_index": i,
                "request_id": (columns.get("id", {}).get(key) or None) if not error else None,
                "input_tokens": value("tokens_in"),
                "output_tokens": value("tokens_out"),
                "status": "error" if error else "ok",
                "error": error_line(columns.get("cause", {}).get(key)) if error else None,  # the exception's text
                "ttft_s": value("ttft"),
                "e2e_s": value("total_time"),
            }
        )
    check_ids(path, rows)
    info.records = write_rows(stage, "requests", part, rows)
    info.details["errored_requests"] = failed
    info.details["mismatched_responses"] = mismatched
    return info


def ingest_llmperf_summary(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """The summary statistics, kept in the run metadata (no per-request rows)."""
    info = SourceInfo(path=path, format=LLMPERF_SUMMARY, version="summary")
    data = load_json(path)
    if not isinstance(data, dict):
        raise TraceFormatError(path, "line 1", "expected one JSON object")
    if "num_valid" in data and "mean_ttft" in data:
        info.version = "llmperf.py first release (Oct-Dec 2023): results (arguments and means)"
    summary = {k: v for k, v in data.items() if not re.match(r".*_quantiles_p(25|75|95)$", k)}
    # the figures the client summary reads: a text where LLMPerf writes a number is dropped, and said
    text = sorted(
        k
        for k, v in summary.items()
        if _LLMPERF_FIGURE.match(k) and v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)))
    )
    for k in text:
        summary[k] = None
    if text:
        info.warnings.append(
            f"{path}: {len(text)} figure(s) are not numbers, left NULL: {', '.join(text[:5])}"
            + (f" and {len(text) - 5} more" if len(text) > 5 else "")
        )
        info.details["text_figures"] = len(text)
    info.details["summary"] = summary
    info.records = 1
    return info


# the LLMPerf summary keys read as figures (min and max LLMPerf itself writes as text: not read)
_LLMPERF_FIGURE = re.compile(
    r"^(num_concurrent_requests|results_num_completed_requests(_per_min)?|results_number_errors"
    r"|results_mean_output_throughput_token_per_s|results_\w+_(mean|quantiles_p(50|90|99))"
    r"|num_valid|num_exceptions|num_mismatch|total_requests|concur_requests|mean_ttft|total_time"
    r"|mean_tokens_(in|out))$"
)

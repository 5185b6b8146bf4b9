"""vLLM's per-request metrics in its responses (``--enable-per-request-metrics``, vLLM 0.32 and later), as a client
saved the response bodies: JSON lines (or one JSON array) of OpenAI completion or chat-completion responses, each
with the ``metrics`` object vLLM adds (for a streamed response, the last chunk, which carries the usage and metrics
with ``stream_options.include_usage``).

Read from the source (vLLM 0.32 ``entrypoints/generate/base/serving.py``, ``build_per_request_timing_metrics``): the
figures are the engine's own ``RequestStateStats`` stamps, the same ones its OTLP span is built from:
``queue_time_ms`` is scheduled less queued (the engine queue), ``time_to_first_token_ms`` is the first token less
*scheduled* (the prefill, not the TTFT a client sees: the time before scheduling is not in it) and
``generation_time_ms`` the last token less the first (the decode). The response's ``created`` is the frontend's
receipt, a whole second (``int(time.time())``): the arrival, to the second. Nothing times the frontend, so no TTFT
or end-to-end figure: a client's own timings, or the spans, give those.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import check_ids, duration_ms, json_objects, load_json, whole_count, write_rows
from lltrace.source_info import SourceInfo

RESPONSES = "vllm-response-metrics"
_PARTS = (("queue_s", "queue_time_ms"), ("prefill_s", "time_to_first_token_ms"), ("decode_s", "generation_time_ms"))


def sniff(head: bytes) -> bool:
    """Saved response bodies whose ``metrics`` hold vLLM's per-request figures."""
    text = head.lstrip()
    return (
        text[:1] in (b"{", b"[")
        and b'"metrics"' in text
        and (b'"queue_time_ms"' in text or b'"generation_time_ms"' in text)
        and (b'"text_completion"' in text or b'"chat.completion' in text)
    )


def _records(path: str, info: SourceInfo) -> list[Any]:
    with open(path, "rb") as f:
        first = f.read(4096).lstrip()[:1]
    if first == b"[":
        data = load_json(path)
        if not isinstance(data, list):
            raise TraceFormatError(path, "line 1", "expected a JSON array of responses")
        info.version = "a JSON array of responses"
        return data
    info.version = "JSON lines of responses"
    return json_objects(path, info)


def ingest(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Each response with metrics a request: the engine's queue, prefill and decode, its sizes and cached tokens."""
    info = SourceInfo(path=path, format=RESPONSES)
    rows, without = [], 0
    for i, r in enumerate(_records(path, info)):
        m = r.get("metrics") if isinstance(r, dict) else None
        if not isinstance(m, dict):
            without += 1
            continue
        where = f"record {i + 1}"
        usage = r.get("usage") if isinstance(r.get("usage"), dict) else {}
        details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
        created = r.get("created")
        reasons = [c.get("finish_reason") for c in r.get("choices") or [] if isinstance(c, dict)]
        rows.append(
            {
                "part": part,
                "request_id": str(r.get("id"))[:200] if r.get("id") is not None else None,
                "engine_request_id": str(r.get("id"))[:200] if r.get("id") is not None else None,
                "client_id": Path(path).name,
                "client_index": i,
                "arrival_s": float(created) if isinstance(created, int) and not isinstance(created, bool) else None,
                "arrival_resolution_s": 1.0 if isinstance(created, int) else None,
                "input_tokens": whole_count(path, f"{where} usage.prompt_tokens", usage.get("prompt_tokens")),
                "output_tokens": whole_count(path, f"{where} usage.completion_tokens", usage.get("completion_tokens")),
                "cached_tokens": whole_count(path, f"{where} cached_tokens", details.get("cached_tokens")),
                "status": "cancelled" if "abort" in reasons else "ok",
                **{col: duration_ms(path, f"{where} metrics.{key}", m.get(key)) for col, key in _PARTS},
            }
        )
    if not rows:
        raise TraceFormatError(path, "line 1", "no response with vLLM's per-request metrics")
    if without:
        info.dropped["responses_without_metrics"] = without
        info.warnings.append(
            f"{path}: {without} response(s) without metrics (a streamed chunk before the last, or a server without "
            "--enable-per-request-metrics): skipped"
        )
    check_ids(path, rows)
    write_rows(stage, "requests", part, rows)
    info.records = len(rows)
    info.version = f"vLLM per-request metrics, {info.version}: {len(rows):,} requests"
    return info

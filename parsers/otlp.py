"""OpenTelemetry request spans: vLLM's ``llm_request`` spans and SGLang's ``Req`` spans with their stage spans,
as collector JSON lines of ExportTraceServiceRequest, one OTLP/JSON document, or a Jaeger UI export.

Spans are staged (``_spans``) and joined with any bench file of the run into ``requests``
(``lltrace.ingest.join``). Field facts: docs/SERVING_FORMATS.md §A2, §B2.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import check_wall_clock, strip_bom, write_rows
from lltrace.parsers._lines import DuplicateKey, duplicate_at, json_lines, read_text, unique_keys
from lltrace.tables import SPANS, SourceInfo

OTLP = "otlp-traces"


def sniff_otlp(head: bytes) -> bool:
    """OTLP/JSON ExportTraceServiceRequest (collector JSON lines or one document), or a Jaeger UI export."""
    text = strip_bom(head)
    if re.match(rb'\{\s*"resourceSpans"', text):
        return True
    return re.match(rb'\{\s*"data"\s*:\s*\[\s*\{\s*"traceID"', text) is not None


_ATTR = {
    "gen_ai.latency.time_in_queue": "queue_s",
    "gen_ai.latency.time_in_model_prefill": "prefill_s",
    "gen_ai.latency.time_in_model_decode": "decode_s",
    "gen_ai.latency.time_in_model_inference": "inference_s",
    "gen_ai.latency.time_to_first_token": "ttft_s",
    "gen_ai.latency.e2e": "e2e_s",
    "gen_ai.usage.prompt_tokens": "prompt_tokens",
    "gen_ai.usage.completion_tokens": "completion_tokens",
    "gen_ai.usage.cached_tokens": "cached_tokens",  # engines that report prefix-cache hits per request
    "gen_ai.request.max_tokens": "max_tokens",
    "gen_ai.request.id": "request_id",
}
_INT_COLS = {"prompt_tokens", "completion_tokens", "cached_tokens", "max_tokens"}


def _otlp_value(v: dict) -> Any:
    for key in ("stringValue", "doubleValue", "intValue", "boolValue"):
        if key in v:
            val = v[key]
            if key == "intValue":
                return int(val)  # OTLP/JSON writes int64 as a string
            if key == "doubleValue" and isinstance(val, str):
                return float(val)  # proto3 JSON: "NaN", "Infinity", "-Infinity" or a decimal as text
            return val
    return None


def _span_row(part: int, span: dict, process: str | None) -> dict[str, Any] | None:
    if span.get("name") != "llm_request":
        return None
    attrs = {a["key"]: _otlp_value(a.get("value", {})) for a in span.get("attributes", [])}
    row: dict[str, Any] = {c: None for c in SPANS.names}
    row.update(part=part, trace_id=span.get("traceId"), span_id=span.get("spanId"), process=process)
    row["start_ns"] = int(span["startTimeUnixNano"])
    row["end_ns"] = int(span["endTimeUnixNano"])
    for key, col in _ATTR.items():
        if key in attrs and attrs[key] is not None:
            v = attrs[key]  # token counts: whole numbers (a fraction is NULLed and counted when written)
            row[col] = int(v) if col in _INT_COLS and isinstance(v, str) and v.lstrip("-").isdigit() else v
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
        docs = [json.loads(stripped, object_pairs_hook=unique_keys)]
        info.version = "OTLP/JSON document"
    except DuplicateKey as exc:
        raise TraceFormatError(path, duplicate_at(text, exc.key), f"invalid OTLP/JSON ({exc})") from None
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
    for r in rows:  # span times are epoch nanoseconds: a wall clock
        for key in ("start_ns", "end_ns"):
            if r.get(key) is not None:
                check_wall_clock(path, f"span {r.get('span_id') or r.get('request_id')}", r[key] / 1e9, key)
    other = len(all_spans) - sum(1 + r.pop("_stage_spans") for r in sglang)
    if sglang:
        info.version += ", SGLang request spans with stage spans"
    if other:
        info.dropped["spans other than request spans"] = other
    info.records = write_rows(stage, "_spans", part, rows) + other
    return info

"""OpenTelemetry request spans: vLLM's ``llm_request`` spans and SGLang's ``Req`` spans with their stage spans,
in every OTLP-shaped wrapper collectors and UIs write: collector JSON lines of ExportTraceServiceRequest, one
ExportTraceServiceRequest document, a Jaeger UI export (``data[].spans``, µs times, ``references``, ``tags``,
``logs``), or a flat span list (``{"spans": [...]}`` or a bare array; attribute lists or objects, times as
nanosecond strings). Every wrapper is first turned into one span shape (``_span``), then read alike.

Spans are staged (``_spans``) and joined with any bench file of the run into ``requests``
(``lltrace.ingest.join``). What each file holds: docs/formats.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import check_wall_clock, strip_bom, write_rows
from lltrace.parsers._lines import DuplicateKey, duplicate_at, json_lines, read_text, unique_keys
from lltrace.source_info import SourceInfo
from lltrace.tables import SPANS

OTLP = "otlp-traces"


def sniff_otlp(head: bytes) -> bool:
    """Request spans in any OTLP-shaped wrapper: ExportTraceServiceRequest (collector JSON lines or one
    document), Grafana Tempo's trace API answer (v1 ``batches``, v2 ``trace``), a Jaeger UI export, or a flat span
    list (``{"spans": [...]}`` or a bare array of spans)."""
    text = strip_bom(head)
    if re.match(rb'\{\s*"resourceSpans"', text):
        return True
    # Grafana Tempo's trace API: v1 {"batches": [ResourceSpans...]}, v2 {"trace": {"resourceSpans": [...]}}
    if re.match(rb'\{\s*"trace"\s*:\s*\{\s*"resourceSpans"', text) or (
        re.match(rb'\{\s*"batches"\s*:\s*\[', text)
        and (b'"scopeSpans"' in text or b'"instrumentationLibrarySpans"' in text)
    ):
        return True
    if re.match(rb'\{\s*"data"\s*:\s*\[\s*\{\s*"traceID"', text):
        return True
    flat = re.match(rb'\{\s*"spans"\s*:\s*\[', text) or re.match(rb"\[\s*\{", text)
    return (
        bool(flat)
        and any(k in text for k in (b'"spanId"', b'"spanID"', b'"span_id"'))
        and any(k in text for k in (b'"startTimeUnixNano"', b'"start_time_unix_nano"', b'"startTime"'))
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
    "gen_ai.usage.cached_tokens": "cached_tokens",  # engines that report prefix-cache hits per request
    "gen_ai.request.max_tokens": "max_tokens",
    "gen_ai.request.id": "request_id",
}
_INT_COLS = {"prompt_tokens", "completion_tokens", "cached_tokens", "max_tokens"}


def _otlp_value(v: Any) -> Any:
    """An OTLP AnyValue (``{"intValue": "8"}``…), or a plain value as Jaeger and flat lists write them."""
    if not isinstance(v, dict):
        return v
    for key in ("stringValue", "doubleValue", "intValue", "boolValue"):
        if key in v:
            val = v[key]
            if key == "intValue":
                return int(val)  # OTLP/JSON writes int64 as a string
            if key == "doubleValue" and isinstance(val, str):
                return float(val)  # proto3 JSON: "NaN", "Infinity", "-Infinity" or a decimal as text
            return val
    return None


def _attrs(raw: Any) -> dict[str, Any]:
    """Attributes as a mapping: an OTLP list of {key, value: AnyValue}, Jaeger tags {key, type, value}, or
    a plain {key: value} object."""
    if isinstance(raw, dict):
        return {k: _otlp_value(v) for k, v in raw.items()}
    out = {}
    for a in raw or []:
        if not isinstance(a, dict) or "key" not in a:
            raise _Malformed(f"an attribute without a key: {json.dumps(a)[:80]}")
        out[a["key"]] = _otlp_value(a.get("value"))
    return out


class _Malformed(ValueError):
    """A span that no OTLP wrapper writes (an attribute without a key)."""


def _first(span: dict, *keys: str) -> Any:
    return next((span[k] for k in keys if span.get(k) not in (None, "")), None)


def _span(sp: dict, process: str | None, micro: bool = False) -> dict[str, Any]:
    """One span in the shape the readers below use, from any wrapper: OTLP (``startTimeUnixNano``, ns, often
    as strings), Jaeger (``startTime`` and ``duration`` in µs, parent in ``references``) or a flat list with
    either spelling."""
    parent = _first(sp, "parentSpanId", "parentSpanID", "parent_span_id")
    for ref in sp.get("references") or []:
        if isinstance(ref, dict) and ref.get("refType", "CHILD_OF") == "CHILD_OF" and parent is None:
            parent = ref.get("spanID") or ref.get("spanId")
    start = _first(sp, "startTimeUnixNano", "start_time_unix_nano")
    end = _first(sp, "endTimeUnixNano", "end_time_unix_nano")
    if start is None and sp.get("startTime") is not None:  # Jaeger: microseconds and a duration
        micro = True
    if micro:
        start = int(sp["startTime"]) * 1000
        end = start + int(sp.get("duration") or 0) * 1000
    events = []
    for e in sp.get("events") or []:
        events.append(
            {"name": e.get("name"), "timeUnixNano": e.get("timeUnixNano"), "attributes": _attrs(e.get("attributes"))}
        )
    for log in sp.get("logs") or []:  # Jaeger span logs: fields, the event name among them
        fields = _attrs(log.get("fields"))
        ts = log.get("timestamp")
        events.append(
            {
                "name": fields.pop("event", None),
                "timeUnixNano": int(ts) * 1000 if ts is not None else None,
                "attributes": fields,
            }
        )
    return {
        "name": _first(sp, "name", "operationName"),
        "traceId": _first(sp, "traceId", "traceID", "trace_id"),
        "spanId": _first(sp, "spanId", "spanID", "span_id"),
        "parentSpanId": parent,
        "startTimeUnixNano": int(start) if start is not None else None,
        "endTimeUnixNano": int(end) if end is not None else None,
        "attributes": _attrs(sp.get("attributes") if "attributes" in sp else sp.get("tags")),
        "events": events,
        "process": process,
    }


def _spans_of(doc: Any) -> tuple[list[dict[str, Any]], str]:
    """Every span of one parsed document, whatever wrapper holds them, and the wrapper's name."""
    if isinstance(doc, list):
        return [_span(sp, None) for sp in doc if isinstance(sp, dict)], "flat span list"
    if isinstance(doc.get("trace"), dict) and "resourceSpans" in doc["trace"]:  # Grafana Tempo's API v2
        return _spans_of(doc["trace"])[0], "Grafana Tempo trace (API v2)"
    if "resourceSpans" in doc or "batches" in doc:  # (Grafana Tempo's API v1 names the list "batches")
        out = []
        for rs in doc.get("resourceSpans", doc.get("batches")) or []:
            res = _attrs((rs.get("resource") or {}).get("attributes"))
            process = res.get("vllm.process_kind") or res.get("service.name")
            for ss in rs.get("scopeSpans", rs.get("instrumentationLibrarySpans", [])) or []:
                out += [_span(sp, process) for sp in ss.get("spans") or []]
        return out, "OTLP" if "resourceSpans" in doc else "Grafana Tempo trace (API v1)"
    if "data" in doc:
        out = []
        for trace in doc.get("data") or []:
            procs = trace.get("processes") or {}
            for sp in trace.get("spans") or []:
                proc = procs.get(sp.get("processID")) or {}
                out.append(_span(sp, proc.get("serviceName"), micro=True))
        return out, "Jaeger UI export"
    if isinstance(doc.get("spans"), list):
        return [_span(sp, None) for sp in doc["spans"] if isinstance(sp, dict)], "flat span list"
    return [], "OTLP"


def _span_row(part: int, span: dict, process: str | None) -> dict[str, Any] | None:
    if span.get("name") != "llm_request":
        return None
    attrs = span["attributes"]
    row: dict[str, Any] = {c: None for c in SPANS.names}
    row.update(part=part, trace_id=span.get("traceId"), span_id=span.get("spanId"), process=process)
    row["start_ns"] = span["startTimeUnixNano"]
    row["end_ns"] = span["endTimeUnixNano"]
    wrong = []
    for key, col in _ATTR.items():
        if key not in attrs:
            continue
        v = attrs[key]
        if col.endswith("_s") and (v is None or isinstance(v, bool) or not isinstance(v, (int, float))):
            wrong.append(key)  # a latency is a double: a string, a boolean or a null is no time (said, NULL)
            continue
        if v is not None:  # token counts: whole numbers (a fraction is NULLed and counted when written)
            row[col] = int(v) if col in _INT_COLS and isinstance(v, str) and v.lstrip("-").isdigit() else v
    row["_wrong_type"] = wrong
    events = span.get("events") or []
    journey = [e for e in events if str(e.get("name", "")).startswith("journey.")]
    if journey:
        row["num_preemptions"] = sum(1 for e in journey if e.get("name") == "journey.PREEMPTED")
        fin = [e for e in journey if e.get("name") == "journey.FINISHED"]
        if fin:
            row["finish_status"] = fin[-1]["attributes"].get("finish.status")
        row["journey"] = json.dumps(
            [[e["name"].split(".", 1)[1].lower(), int(e["timeUnixNano"])] for e in journey if e.get("timeUnixNano")]
        )
    return row


_SGLANG_STAGES = {"prefill_waiting": "queue_s", "prefill_forward": "prefill_s", "decode_forward": "decode_s"}


def _sglang_requests(part: int, spans: list[dict]) -> list[dict[str, Any]]:
    """SGLang ``Req <rid>`` root spans: the split comes from their stage spans (``prefill_waiting`` = queue,
    ``prefill_forward``, ``decode_forward`` summed), preferred over the root's own gen_ai.latency attributes,
    which do not add up in real exports (docs/formats.md)."""
    children: dict[str, list[dict]] = {}
    for sp in spans:
        if sp.get("parentSpanId"):
            children.setdefault(sp["parentSpanId"], []).append(sp)
    out = []
    for sp in spans:
        name = str(sp.get("name", ""))
        if not name.startswith("Req "):
            continue
        row = _span_row(part, sp | {"name": "llm_request"}, sp.get("process") or "sglang")
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
            if col and c["startTimeUnixNano"] is not None and c["endTimeUnixNano"] is not None:
                dur = (c["endTimeUnixNano"] - c["startTimeUnixNano"]) / 1e9
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
    wrappers = set()
    for k, doc in enumerate(docs):
        try:
            spans, wrapper = _spans_of(doc)
        except (_Malformed, TypeError, ValueError, KeyError) as exc:
            where = f"JSON record {k + 1}" if len(docs) > 1 else "the document"
            raise TraceFormatError(path, where, f"malformed span ({exc})") from None
        wrappers.add(wrapper)
        for span in spans:
            if span["startTimeUnixNano"] is None or span["endTimeUnixNano"] is None:
                all_spans.append(span)  # no times: counted with the other spans, never a request
                continue
            row = _span_row(part, span, span["process"])
            if row is None:
                all_spans.append(span)
            else:
                rows.append(row)
    if wrappers - {"OTLP"}:
        info.version = " and ".join(sorted(wrappers - {"OTLP"}))
    sglang = _sglang_requests(part, all_spans)
    rows.extend(sglang)
    for r in rows:  # span times are epoch nanoseconds: a wall clock
        for key in ("start_ns", "end_ns"):
            if r.get(key) is not None:
                check_wall_clock(path, f"span {r.get('span_id') or r.get('request_id')}", r[key] / 1e9, key)
    wrong = [k for r in rows for k in r.pop("_wrong_type", [])]
    if wrong:
        info.dropped["latency_attributes_not_numbers"] = len(wrong)
        info.warnings.append(
            f"{path}: {len(wrong)} latency attribute(s) not a number (a string, a boolean or a null where OTLP "
            f"carries a double: {', '.join(sorted(set(wrong))[:3])}): set NULL"
        )
    other = len(all_spans) - sum(1 + r.pop("_stage_spans") for r in sglang)
    if sglang:
        info.version += ", SGLang request spans with stage spans"
    if other:
        info.dropped["spans other than request spans"] = other
    info.records = write_rows(stage, "_spans", part, rows) + other
    return info

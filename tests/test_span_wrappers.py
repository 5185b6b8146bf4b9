"""Request spans read alike from every OTLP-shaped wrapper (issue 17): the collector's JSON lines, one
ExportTraceServiceRequest, Grafana Tempo's trace API answers, a Jaeger UI export and a flat span list, for vLLM's
``llm_request`` spans (the real export of run A) and SGLang's ``Req`` spans with their stage spans."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA

import lltrace

REAL = DATA / "vllm_cpu" / "A_baseline" / "otlp" / "traces.otlp.jsonl"


def _otlp_spans(lines: list[dict]) -> list[tuple[str | None, dict]]:
    """(process, span) for every span of collector lines."""
    out = []
    for doc in lines:
        for rs in doc["resourceSpans"]:
            attrs = {a["key"]: a["value"].get("stringValue") for a in rs["resource"]["attributes"]}
            for ss in rs["scopeSpans"]:
                out += [(attrs.get("vllm.process_kind"), sp) for sp in ss["spans"]]
    return out


def _plain(v: dict) -> Any:
    (kind, val), *_ = v.items()
    return int(val) if kind == "intValue" else val


def _one_document(lines: list[dict]) -> dict:
    return {"resourceSpans": [rs for doc in lines for rs in doc["resourceSpans"]]}


def _jaeger(spans: list[tuple[str | None, dict]]) -> dict:
    """The Jaeger UI's JSON: µs start and duration, parent as a CHILD_OF reference, tags, span logs."""
    procs = {p or "none": {"serviceName": p or "none", "tags": []} for p, _ in spans}
    out = []
    for p, sp in spans:
        start = int(sp["startTimeUnixNano"])
        j = {
            "traceID": sp["traceId"],
            "spanID": sp["spanId"],
            "operationName": sp["name"],
            "references": [{"refType": "CHILD_OF", "traceID": sp["traceId"], "spanID": sp["parentSpanId"]}]
            if sp.get("parentSpanId")
            else [],
            "startTime": start // 1000,
            "duration": (int(sp["endTimeUnixNano"]) - start) // 1000,
            "tags": [{"key": a["key"], "type": "x", "value": _plain(a["value"])} for a in sp.get("attributes", [])],
            "logs": [
                {
                    "timestamp": int(e["timeUnixNano"]) // 1000,
                    "fields": [{"key": "event", "type": "string", "value": e["name"]}]
                    + [{"key": a["key"], "type": "x", "value": _plain(a["value"])} for a in e.get("attributes", [])],
                }
                for e in sp.get("events", [])
            ],
            "processID": p or "none",
        }
        out.append(j)
    return {"data": [{"traceID": "all", "spans": out, "processes": procs}]}


def _flat(spans: list[tuple[str | None, dict]]) -> dict:
    """A bare ``{"spans": [...]}`` list: attributes as plain objects, times as nanosecond strings."""
    return {
        "spans": [
            sp | {"attributes": {a["key"]: _plain(a["value"]) for a in sp.get("attributes", [])}} for _, sp in spans
        ]
    }


def _rows(path: Path, store: Path) -> list[dict]:
    run = lltrace.ingest([path], store=store)
    keep = ("request_id", "queue_s", "prefill_s", "decode_s", "e2e_s", "input_tokens", "output_tokens", "arrival_s")
    rows = [{k: r.get(k) for k in keep} for r in run.table("requests").to_dicts()]
    return sorted(rows, key=lambda r: (r["request_id"] or "", r["arrival_s"] or 0))


def _write(tmp: Path, name: str, doc: Any, lines: bool = False) -> Path:
    path = tmp / name
    path.write_text("".join(json.dumps(d) + "\n" for d in doc) if lines else json.dumps(doc))
    return path


def _sglang_lines() -> list[dict]:
    t0, ms = 1_700_000_000_000_000_000, 1_000_000

    def span(sid, name, start, end, parent=None, attrs=()):
        return {
            "traceId": "t",
            "spanId": sid,
            "parentSpanId": parent or "",
            "name": name,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(end),
            "attributes": [{"key": k, "value": v} for k, v in attrs],
        }

    spans = [
        span("r", "Req abc", t0, t0 + 190 * ms, attrs=[("gen_ai.request.id", {"stringValue": "abc"})]),
        span("s", "Scheduler [TP 0]", t0, t0 + 190 * ms, parent="r"),
        span("w", "prefill_waiting", t0, t0 + 22 * ms, parent="s"),
        span("p", "prefill_forward", t0 + 22 * ms, t0 + 47 * ms, parent="s"),
        span("d1", "decode_forward", t0 + 47 * ms, t0 + 120 * ms, parent="s"),
        span("d2", "decode_forward", t0 + 120 * ms, t0 + 184 * ms, parent="s"),
    ]
    res = {"attributes": [{"key": "service.name", "value": {"stringValue": "sglang"}}]}
    return [{"resourceSpans": [{"resource": res, "scopeSpans": [{"spans": spans}]}]}]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_every_wrapper_gives_the_same_requests(engine: str, tmp_path: Path) -> None:
    lines = [json.loads(x) for x in REAL.read_text().splitlines() if x.strip()] if engine == "vllm" else _sglang_lines()
    spans = _otlp_spans(lines)
    wrappers = {
        "collector lines": _write(tmp_path, "lines.jsonl", lines, lines=True),
        "one ExportTraceServiceRequest": _write(tmp_path, "one.json", _one_document(lines)),
        # Grafana Tempo's trace API (its docs: v1 /api/traces/<id> {"batches": [...]}, v2 {"trace": {...}})
        "Tempo API v1": _write(tmp_path, "tempo1.json", {"batches": _one_document(lines)["resourceSpans"]}),
        "Tempo API v2": _write(tmp_path, "tempo2.json", {"trace": _one_document(lines)}),
        "Jaeger UI export": _write(tmp_path, "jaeger.json", _jaeger(spans)),
        "flat span list": _write(tmp_path, "flat.json", _flat(spans)),
        "bare span array": _write(tmp_path, "bare.json", _flat(spans)["spans"]),
    }
    read = {name: _rows(path, tmp_path / name.replace(" ", "_")) for name, path in wrappers.items()}
    reference = read["collector lines"]
    assert reference and all(r["request_id"] for r in reference)
    if engine == "sglang":
        assert [(r["queue_s"], r["prefill_s"], r["decode_s"]) for r in reference] == [
            (pytest.approx(0.022), pytest.approx(0.025), pytest.approx(0.137))
        ]
    else:
        assert len(reference) == sum(1 for _, sp in spans if sp["name"] == "llm_request")
    for name, rows in read.items():
        # Jaeger keeps microseconds: times agree to the µs, the rest exactly
        assert rows == [
            {k: pytest.approx(v, abs=2e-6) if isinstance(v, float) else v for k, v in r.items()} for r in reference
        ], name

"""Dynamo's request trace (dynamo.request.trace.v1): the records of its documentation and source, and lltrace's real
run A's engine spans written by Dynamo's RequestTracker rules, read into requests."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA
from typer.testing import CliRunner

import lltrace
from lltrace.cli import app

SCHEMA = "dynamo.request.trace.v1"
# the request-trace reference's context-free row, and a row with every RequestTraceMetrics field (the struct of
# lib/llm request_trace, as its sink test builds one), disaggregated
DOC_ROWS = [
    {
        "schema": SCHEMA,
        "event_type": "request_end",
        "event_time_unix_ms": 1777312801000,
        "request": {
            "request_id": "dynamo-request-id",
            "request_received_ms": 1777312800000,
            "output_tokens": 16,
            "replay": {
                "trace_block_size": 64,
                "input_length": 128,
                "input_sequence_hashes": [14879255164371896291, 274632075616497421],
            },
        },
    },
    {
        "schema": SCHEMA,
        "event_type": "request_end",
        "event_time_unix_ms": 1777312802000,
        "event_source": "dynamo",
        "agent_context": {"session_id": "research-run-42:researcher"},
        "request": {
            "request_id": "dynamo-request-2",
            "x_request_id": "llm-call-42",
            "model": "my-model",
            "input_tokens": 4096,
            "output_tokens": 512,
            "cached_tokens": 3584,
            "request_received_ms": 1777312801000,
            "prefill_wait_time_ms": 12.1,
            "prefill_time_ms": 70.3,
            "ttft_ms": 82.4,
            "total_time_ms": 1000.1,
            "avg_itl_ms": 1.8,
            "kv_hit_rate": 0.875,
            "kv_transfer_estimated_latency_ms": 4.2,
            "queue_depth": 3,
            "worker": {"prefill_worker_id": 0, "prefill_dp_rank": 0, "decode_worker_id": 1, "decode_dp_rank": 0},
            "finish_reason_metadata": {"finish_reason": "tool_calls"},
        },
    },
    {
        "schema": SCHEMA,
        "event_type": "tool_end",
        "event_time_unix_ms": 1777312801500,
        "session_id": "research-run-42:researcher",
        "tool": {"tool_call_id": "call-abc", "tool_class": "web_search", "status": "succeeded", "duration_ms": 420.5},
    },
]


def _write(path: Path, rows: list[dict[str, Any]], envelope: bool = False) -> Path:
    with gzip.open(path, "wt") as f:
        for i, r in enumerate(rows):
            f.write(json.dumps({"timestamp": i, "event": r} if envelope else r) + "\n")
    return path


@pytest.mark.parametrize("envelope", [False, True], ids=["bare", "sink-envelope"])
def test_the_documented_records(envelope: bool, tmp_path: Path) -> None:
    run = lltrace.ingest([_write(tmp_path / "trace.jsonl.gz", DOC_ROWS, envelope)], store=tmp_path / "s")
    (src,) = run.metadata["sources"]
    assert src["format"] == "dynamo-request-trace" and "1 tool events" in src["version"]
    a, b = run.table("requests").sort("client_index").to_dicts()
    assert a["request_id"] == "dynamo-request-id" and a["arrival_s"] == 1777312800.0
    assert a["input_tokens"] == 128 and a["output_tokens"] == 16 and a["server_ttft_s"] is None
    assert a["prefix_block_ids"] == [14879255164371896291 - 2**64, 274632075616497421]  # the same 64 bits
    assert b["request_id"] == "llm-call-42" and b["engine_request_id"] == "dynamo-request-2"
    assert b["queued_s"] == pytest.approx(1777312801.0121) and b["first_token_s"] == pytest.approx(1777312801.0824)
    assert b["server_ttft_s"] == pytest.approx(0.0824) and b["server_e2e_s"] == pytest.approx(1.0001)
    assert b["decode_s"] == pytest.approx(1.0001 - 0.0824) and b["cached_tokens"] == 3584
    assert b["kv_transfer_s"] == pytest.approx(0.0042)
    assert (b["prefill_worker"], b["decode_worker"]) == ("0/0", "1/0")


def test_run_a_spans_as_dynamos_frontend_would_time_them(tmp_path: Path) -> None:
    """Run A's engine spans (arrival at the frontend, entry to the engine's queue, first token, end) written as
    RequestTracker would: received, prefill start (the dispatch to the worker), TTFT, total. The trace gives the
    run the same TTFT and e2e as the spans, and the same time before the engine's queue."""
    spans = lltrace.ingest([DATA / "vllm_cpu" / "A_baseline" / "otlp"], store=tmp_path / "a")
    rows = spans.sql(
        "SELECT request_id, arrival_s, queued_s, server_ttft_s, server_e2e_s, input_tokens, output_tokens FROM requests"
    ).to_dicts()
    records = [
        {
            "schema": SCHEMA,
            "event_type": "request_end",
            "event_time_unix_ms": round((r["arrival_s"] + r["server_e2e_s"]) * 1e3),
            "request": {
                "request_id": r["request_id"],
                "input_tokens": r["input_tokens"],
                "output_tokens": r["output_tokens"],
                "request_received_ms": round(r["arrival_s"] * 1e3),
                "prefill_wait_time_ms": (r["queued_s"] - r["arrival_s"]) * 1e3,
                "ttft_ms": r["server_ttft_s"] * 1e3,
                "total_time_ms": r["server_e2e_s"] * 1e3,
            },
        }
        for r in rows
    ]
    trace = _write(tmp_path / "dynamo-request-trace.000000.jsonl.gz", records, envelope=True)
    docs = [lltrace.analyze(spans, store=tmp_path / "a").to_dict()["requests"]]
    docs.append(lltrace.analyze(str(trace), store=tmp_path / "b").to_dict()["requests"])
    for metric in ("ttft_s", "e2e_s"):
        for stat in ("mean", "p50", "p90"):
            assert docs[1][metric][stat] == pytest.approx(docs[0][metric][stat], abs=1e-9)
    got = lltrace.ingest([trace], store=tmp_path / "c").sql("SELECT avg(queued_s - arrival_s) AS w FROM requests")
    want = spans.sql("SELECT avg(queued_s - arrival_s) AS w FROM requests")
    assert got["w"][0] == pytest.approx(want["w"][0], abs=1e-6)  # arrival to the ms, as Dynamo stamps it


def test_damage_is_said(tmp_path: Path) -> None:
    bad = json.loads(json.dumps(DOC_ROWS[:2]))
    bad[1]["request"]["ttft_ms"] = "fast"
    r = CliRunner().invoke(app, ["ingest", str(_write(tmp_path / "t.jsonl.gz", bad)), "--store", str(tmp_path / "s")])
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("lltrace: error:")]
    assert r.exit_code == 1 and len(lines) == 1 and "record 2" in lines[0] and "ttft_ms" in lines[0]

"""vLLM 0.32's per-request metrics in saved response bodies (--enable-per-request-metrics), from lltrace's own real
run (sample_traces/vllm_cpu_responses): each response a request, and the same queue, prefill and decode as the
engine's span of that request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import DATA

import lltrace

RUN = DATA / "vllm_cpu_responses" / "R1"


def test_every_response_is_a_request_with_the_engines_parts(tmp_path: Path) -> None:
    raw = [json.loads(ln) for ln in (RUN / "responses.jsonl").read_text().splitlines()]
    run = lltrace.ingest([RUN / "responses.jsonl"], store=tmp_path / "a")
    rows = {r["request_id"]: r for r in run.table("requests").to_dicts()}
    assert len(rows) == len(raw) == 60
    assert sum(r["choices"] == [] for r in raw) == 30  # the streamed half: each its last chunk, usage and metrics
    for r in raw:
        row, m = rows[r["id"]], r["metrics"]
        assert row["queue_s"] == pytest.approx(m["queue_time_ms"] / 1e3, abs=1e-12)
        assert row["prefill_s"] == pytest.approx(m["time_to_first_token_ms"] / 1e3, abs=1e-12)
        assert row["decode_s"] == pytest.approx(m["generation_time_ms"] / 1e3, abs=1e-12)
        assert (row["input_tokens"], row["output_tokens"]) == (
            r["usage"]["prompt_tokens"],
            r["usage"]["completion_tokens"],
        )
        assert row["arrival_s"] == r["created"] and row["arrival_resolution_s"] == 1.0


def test_the_parts_are_the_spans_parts(tmp_path: Path) -> None:
    """The engine's OTLP span of each request (cmpl-<x>-0 for the response cmpl-<x>) holds the same stamps."""
    spans = lltrace.ingest([RUN / "otlp"], store=tmp_path / "a").table("requests").to_dicts()
    by_id = {s["request_id"]: s for s in spans}
    rows = lltrace.ingest([RUN / "responses.jsonl"], store=tmp_path / "b").table("requests").to_dicts()
    for row in rows:
        span = by_id[f"{row['request_id']}-0"]
        for part in ("queue_s", "prefill_s", "decode_s"):
            assert row[part] == pytest.approx(span[part], abs=2e-6), (row["request_id"], part)
    both = lltrace.ingest([RUN / "responses.jsonl", RUN / "otlp"], store=tmp_path / "c")
    assert both.sql("SELECT count(*) AS n FROM requests")["n"][0] == 60  # one row a request: joined by id

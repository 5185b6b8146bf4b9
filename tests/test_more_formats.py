"""Formats with no real sample in sample_traces/: fixtures built field by field from the documented schemas
(docs/formats.md, and the upstream sources each fixture cites)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import SAMPLES

import lltrace
from lltrace.errors import TraceFormatError
from lltrace.parsers.tgi import rust_duration_s


def _one(path, store):
    run = lltrace.ingest([path], store=store)
    return run, run.table("requests").to_dicts()


def test_trtllm_request_json(store, tmp_path):
    recs = [
        {
            "id": 0,
            "num_input_tokens": 128,
            "error_tokens": 0,
            "start_timestamp": 1_000_000_000,
            "first_token_timestamp": 1_050_000_000,
            "end_timestamp": 2_000_000_000,
            "num_output_tokens": 64,
        },
        {
            "id": 1,
            "num_input_tokens": 256,
            "error_tokens": 3,
            "start_timestamp": 1_100_000_000,
            "first_token_timestamp": 1_300_000_000,
            "end_timestamp": 1_400_000_000,
            "num_output_tokens": 2,
        },
    ]
    path = tmp_path / "requests.json"
    path.write_text(json.dumps(recs))
    run, rows = _one(path, store)
    rows.sort(key=lambda r: r["request_id"])
    assert [(r["request_id"], r["ttft_s"], r["e2e_s"], r["status"]) for r in rows] == [
        ("0", 0.05, 1.0, "ok"),
        ("1", 0.2, pytest.approx(0.3), "error"),
    ]
    assert run.metadata["sources"][0]["format"] == "trtllm-bench-requests"
    recs[1]["end_timestamp"] = 1_000_000_000  # ends before it starts: one policy for every format
    path.write_text(json.dumps(recs))
    with pytest.warns(lltrace.errors.InputWarning, match=r"requests: \d+ rows break physical limits"):
        run, rows = _one(path, store)
    assert {r["request_id"]: r["e2e_s"] for r in rows}["1"] is None  # NULL, counted, never used
    with pytest.raises(TraceFormatError, match=r"requests\.e2e_s: 1 values break >= 0"):
        lltrace.ingest([path], store=tmp_path / "strict", strict=True)


def test_trtllm_iteration_log(store, tmp_path):
    lines = [
        {
            "iter": 0,
            "iterLatencyMS": 12.5,
            "numActiveRequests": 2,
            "numQueuedRequests": 5,
            "kvCacheStats": {"maxNumBlocks": 100, "usedNumBlocks": 40, "freeNumBlocks": 60, "tokensPerBlock": 64},
            "inflightBatchingStats": {
                "numContextRequests": 2,
                "numGenRequests": 0,
                "numCtxTokens": 900,
                "numPausedRequests": 0,
            },
        },
        {
            "iter": 1,
            "iterLatencyMS": 8.0,
            "numActiveRequests": 2,
            "numQueuedRequests": 5,
            "kvCacheStats": {"maxNumBlocks": 100, "usedNumBlocks": 100},
            "inflightBatchingStats": {
                "numContextRequests": 0,
                "numGenRequests": 2,
                "numCtxTokens": 0,
                "numPausedRequests": 1,
            },
        },
    ]
    path = tmp_path / "iter.log"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    run = lltrace.ingest([path], store=store)
    steps = run.sql("SELECT step_id, kind, prefill_tokens, decode_reqs, wall_s FROM engine_steps ORDER BY 1").rows()
    assert steps == [(0, "prefill", 900, 0, 0.0125), (1, "decode", 0, 2, 0.008)]
    stats = run.sql("SELECT waiting, kv_usage, swapped FROM engine_stats ORDER BY kv_usage").rows()
    assert stats == [(5.0, 0.4, 0.0), (5.0, 1.0, 1.0)]


def test_tgi_log_rust_durations(store, tmp_path):
    assert rust_duration_s("204.8µs") == pytest.approx(204.8e-6)
    assert rust_duration_s("19.9ms") == pytest.approx(0.0199) and rust_duration_s("1.19s") == 1.19
    line = (
        "2024-05-01T10:00:02.000000Z  INFO generate{parameters=...}: text_generation_router::server: "
        'router/src/server.rs:305: Success total_time="1.19s" validation_time="204.8µs" queue_time="23.1µs" '
        'inference_time="1.19s" time_per_token="19.9ms" seed="None"'
    )
    path = tmp_path / "tgi.log"
    path.write_text(line + "\nINFO something else\n")
    run, rows = _one(path, store)
    r = rows[0]
    assert (r["queue_s"], r["server_e2e_s"]) == (pytest.approx(23.1e-6), 1.19)
    assert r["arrival_s"] == pytest.approx(1714557602.0 - 1.19)
    assert r["prefill_s"] is None and r["decode_s"] is None  # TGI does not split inference time


def _chunk(content: str | None = None, role: str | None = None, usage: dict | None = None) -> dict:
    delta = {k: v for k, v in (("role", role), ("content", content)) if v is not None}
    body = {"id": "abc", "object": "chat.completion.chunk", "choices": [] if usage else [{"index": 0, "delta": delta}]}
    if usage:
        body["usage"] = usage
    return {"response": "data: " + json.dumps(body) + "\n\n"}


def test_genai_perf_profile_export(store, tmp_path):
    """GenAI-Perf times first and last token on the responses with content (its LLMProfileDataParser test
    ``test_openai_llm_profile_data``: sent at 1, responses at 3 (role only), 5, 8, 12 (content), 13 (empty),
    14 ([DONE]) give TTFT 4 and request latency 11); an OpenAI server's ``usage`` chunk gives the token
    counts; a request sent without ``"stream": true`` has no first-token time of its own."""
    s = 1_000_000_000
    t0 = 1_700_000_000 * s
    streamed = {
        "timestamp": t0 + 1 * s,
        "request_inputs": {"payload": json.dumps({"messages": [], "model": "m", "stream": True})},
        "response_timestamps": [t0 + k * s for k in (3, 5, 8, 12, 13, 13, 14)],
        "response_outputs": [
            _chunk(role="assistant"),
            _chunk("I"),
            _chunk(" like"),
            _chunk(" dogs"),
            _chunk(),
            _chunk(usage={"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}),
            {"response": "data: [DONE]\n\n"},
        ],
    }
    whole = {
        "timestamp": t0 + 2 * s,
        "request_inputs": {"payload": json.dumps({"messages": [], "model": "m"})},
        "response_timestamps": [t0 + 6 * s],
        "response_outputs": [
            {
                "response": json.dumps(
                    {
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi there"}}],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
                    }
                )
            }
        ],
    }
    doc = {
        "service_kind": "openai",
        "endpoint": "v1/chat/completions",
        "version": "0.0.8",
        "experiments": [{"experiment": {"mode": "concurrency", "value": 4}, "requests": [streamed, whole]}],
    }
    path = tmp_path / "profile_export.json"
    path.write_text(json.dumps(doc))
    run, rows = _one(path, store)
    got = sorted((r["ttft_s"], r["e2e_s"], r["input_tokens"], r["output_tokens"]) for r in rows if r["ttft_s"])
    assert got == [(pytest.approx(4.0), pytest.approx(11.0), 7, 3)]
    (plain,) = [r for r in rows if r["ttft_s"] is None]
    assert (plain["e2e_s"], plain["input_tokens"], plain["output_tokens"]) == (pytest.approx(4.0), 5, 2)
    src = run.metadata["sources"][0]
    assert src["not_streamed"] == 1 and any("TTFT equals e2e" in w for w in src["warnings"])


def test_aiperf_jsonl_and_its_bad_input(store, tmp_path):
    def rec(rid, err=None):
        return {
            "metadata": {
                "x_request_id": rid,
                "request_start_ns": 1_700_000_000_000_000_000,
                "request_end_ns": 1_700_000_001_000_000_000,
            },
            "metrics": {
                "input_sequence_length": {"value": 550, "unit": "tokens"},
                "time_to_first_token": {"value": 120.0, "unit": "ms"},
                "request_latency": {"value": 1000.0, "unit": "ms"},
                "output_sequence_length": {"value": 150, "unit": "tokens"},
            },
            "error": err,
        }

    path = tmp_path / "profile_export.jsonl"
    path.write_text(json.dumps(rec("a")) + "\n" + json.dumps(rec("b", {"code": 500})) + "\n")
    run, rows = _one(path, store)
    rows.sort(key=lambda r: r["request_id"])
    assert [(r["request_id"], r["ttft_s"], r["input_tokens"], r["status"]) for r in rows] == [
        ("a", 0.12, 550, "ok"),
        ("b", 0.12, 550, "error"),
    ]
    path.write_text(json.dumps(rec("a")) + "\n" + json.dumps(rec("a")) + "\n")
    with pytest.raises(TraceFormatError, match="duplicate request id 'a'"):
        lltrace.ingest([path], store=store)
    path.write_text(json.dumps(rec("a")) + "\n" + json.dumps(rec("b"))[:40] + "\n")  # truncated last line
    with pytest.raises(TraceFormatError, match="line 2: invalid JSON line"):
        lltrace.ingest([path], store=store)


@pytest.mark.parametrize("old", [False, True])
def test_guidellm_both_schemas(old, store, tmp_path):
    if old:
        req = {
            "request_id": "r1",
            "start_time": 1_749_157_100.0,  # unix seconds, as guidellm writes them
            "first_token_time": 1_749_157_100.25,
            "end_time": 1_749_157_101.0,
            "prompt_tokens": 10,
            "output_tokens": 5,
        }
    else:
        req = {
            "request_id": "r1",
            "request_start_time": 1_749_157_100.0,
            "time_to_first_token_ms": 250.0,
            "request_latency": 1.0,
            "prompt_tokens": 10,
            "output_tokens": 5,
            "cached_tokens": 4,
        }
    doc = {"benchmarks": [{"metrics": {}, "requests": {"successful": [req], "incomplete": [], "errored": []}}]}
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(doc))
    run, rows = _one(path, store)
    assert [(r["request_id"], r["arrival_s"], r["ttft_s"], r["e2e_s"]) for r in rows] == [
        ("r1", 1_749_157_100.0, 0.25, 1.0)
    ]
    assert run.metadata["sources"][0]["version"] == (
        "<= 0.3 schema (start_time, end_time)" if old else ">= 0.4 schema (request_start_time, scheduler_metrics)"
    )


def test_sglang_otel_stage_spans_win_over_root_attributes(store, tmp_path):
    def span(sid, name, start, end, parent=None, attrs=()):
        return {
            "traceId": "t",
            "spanId": sid,
            "parentSpanId": parent or "",
            "name": name,
            "kind": 1,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(end),
            "attributes": [{"key": k, "value": v} for k, v in attrs],
        }

    t0 = 1_700_000_000_000_000_000
    ms = 1_000_000
    spans = [
        span(
            "r",
            "Req abc",
            t0,
            t0 + 190 * ms,
            attrs=[
                ("gen_ai.request.id", {"stringValue": "abc"}),
                ("gen_ai.usage.prompt_tokens", {"intValue": "8"}),
                ("gen_ai.latency.time_in_model_prefill", {"doubleValue": 0.1865}),
                ("gen_ai.latency.time_in_model_decode", {"doubleValue": 0.000044}),
            ],
        ),
        span("s", "Scheduler [TP 0]", t0, t0 + 190 * ms, parent="r"),
        span("w", "prefill_waiting", t0, t0 + 22 * ms, parent="s"),
        span("p", "prefill_forward", t0 + 22 * ms, t0 + 47 * ms, parent="s"),
        span("d1", "decode_forward", t0 + 47 * ms, t0 + 120 * ms, parent="s"),
        span("d2", "decode_forward", t0 + 120 * ms, t0 + 184 * ms, parent="s"),
    ]
    doc = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": spans}]}]}
    path = tmp_path / "sglang.otlp.json"
    path.write_text(json.dumps(doc))
    run, rows = _one(path, store)
    r = rows[0]
    assert r["request_id"] == "abc"
    assert (r["queue_s"], r["prefill_s"], r["decode_s"]) == (
        pytest.approx(0.022),
        pytest.approx(0.025),
        pytest.approx(0.137),
    )


def test_jaeger_ui_export(store, tmp_path):
    doc = {
        "data": [
            {
                "traceID": "abc",
                "spans": [
                    {
                        "traceID": "abc",
                        "spanID": "1",
                        "operationName": "llm_request",
                        "startTime": 1_700_000_000_000_000,
                        "duration": 1_500_000,
                        "tags": [
                            {"key": "gen_ai.request.id", "type": "string", "value": "cmpl-x-0"},
                            {"key": "gen_ai.latency.time_in_queue", "type": "float64", "value": 0.25},
                            {"key": "gen_ai.latency.time_in_model_prefill", "type": "float64", "value": 0.05},
                        ],
                    },
                    {
                        "traceID": "abc",
                        "spanID": "2",
                        "operationName": "Load weights",
                        "startTime": 1,
                        "duration": 1,
                        "tags": [],
                    },
                ],
            }
        ],
        "processes": {},
    }
    path = tmp_path / "jaeger.json"
    path.write_text(json.dumps(doc))
    run, rows = _one(path, store)
    assert [(r["request_id"], r["queue_s"], r["prefill_s"], r["finished_s"]) for r in rows] == [
        ("cmpl-x-0", 0.25, 0.05, pytest.approx(1_700_000_001.5))
    ]
    src = run.metadata["sources"][0]
    assert src["version"] == "Jaeger UI export" and src["dropped"] == {"spans other than request spans": 1}


def test_vllm_log_with_ansi_colours_and_process_prefix(store, tmp_path):
    line = (
        "\x1b[1;36m(APIServer pid=7)\x1b[0;0m INFO 03-17 15:38:10 [loggers.py:259] Engine 000: Avg prompt "
        "throughput: 23998.2 tokens/s, Avg generation throughput: 18.1 tokens/s, Running: 10 reqs, Waiting: 90 "
        "reqs, GPU KV cache usage: 19.3%, Prefix cache hit rate: 0.0%\n"
    )
    path = tmp_path / "server.log"
    path.write_text("INFO 03-17 15:38:00 [api_server.py:1] vLLM API server version 0.9\n" + line)
    run = lltrace.ingest([path], store=store)
    row = run.table("engine_stats").to_dicts()[0]
    assert (row["running"], row["waiting"], row["kv_usage"], row["prompt_throughput"]) == (10, 90, 0.193, 23998.2)
    assert row["ts_s"] == 0.0  # no other dated source: the log's own clock, seconds from its first stamp


def test_sglang_bench_with_output_details(store, tmp_path):
    obj = {
        "backend": "sglang",
        "dataset_name": "random",
        "request_rate": float("inf"),
        "completed": 2,
        "total_output_tokens_retokenized": 30,
        "input_lens": [100, 200],
        "output_lens": [10, 20],
        "ttfts": [0.1, 0.2],
        "itls": [[0.01] * 9, [0.01] * 19],
        "generated_texts": ["", ""],
        "errors": ["", ""],
    }
    path = tmp_path / "sglang.jsonl"
    path.write_text(json.dumps(obj) + "\n")  # json.dumps writes the bare Infinity token, as SGLang does
    run, rows = _one(path, store)
    assert sorted((r["input_tokens"], r["ttft_s"]) for r in rows) == [(100, 0.1), (200, 0.2)]
    assert run.metadata["sources"][0]["format"] == "sglang-bench"


def test_sglang_prometheus_names(store, tmp_path):
    """SGLang's metric names (docs.sglang.io production metrics; no real scrape of SGLang's in sample_traces/)."""
    path = tmp_path / "sglang.prom"
    path.write_text(
        "# scrape_unix_ts 1700000000.5\n# HELP sglang:num_running_reqs running\n"
        "# TYPE sglang:num_running_reqs gauge\n"
        'sglang:num_running_reqs{model_name="m"} 12.0\nsglang:num_queue_reqs{model_name="m"} 40.0\n'
        'sglang:token_usage{model_name="m"} 0.97\n'
    )
    run = lltrace.ingest([path], store=store)
    row = run.table("engine_stats").to_dicts()[0]
    assert (row["ts_s"], row["running"], row["waiting"], row["kv_usage"]) == (1700000000.5, 12.0, 40.0, 0.97)
    # its families name the engine: advice and verdict name SGLang's arguments
    assert run.metadata["sources"][0]["engine_config"] == {"engine": "sglang"}


def test_vllm_journey_events_give_request_events_and_measured_preemption(store, tmp_path):
    """A span with journey events (builds with request journey tracing; docs/formats.md)."""
    from conftest import write_journey_span

    path = tmp_path / "journey.json"
    write_journey_span(path)
    run = lltrace.ingest([path], store=store)
    events = run.sql("SELECT event, basis FROM request_events ORDER BY ts_s").rows()
    assert [e for e, _ in events] == ["queued", "scheduled", "first_token", "preempted", "scheduled", "finished"]
    assert {b for _, b in events} == {"measured"}
    r = run.sql("SELECT prefill_s, decode_s, preempted_s, overhead_s FROM attribution_request").rows()[0]
    assert r == (pytest.approx(0.2), pytest.approx(0.6 - 0.15), pytest.approx(0.15), pytest.approx(0.1))
    att = lltrace.analyze(run).to_dict()["attribution"]
    assert att["preempted"]["basis"] == "measured" and att["preempted"]["total_s"] == pytest.approx(0.15)


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_tgi_response_headers(kind, store, tmp_path):
    """TGI's response headers (router/src/server.rs; integer ms) as a client saved them."""
    hdr = {
        "x-compute-time": "1.19",
        "x-total-time": "1210",
        "x-validation-time": "1",
        "x-queue-time": "23",
        "x-inference-time": "1186",
        "x-time-per-token": "19",
        "x-prompt-tokens": "550",
        "x-generated-tokens": "62",
    }
    path = tmp_path / f"headers.{kind}"
    if kind == "jsonl":
        path.write_text(json.dumps(hdr) + "\n")
    else:
        path.write_text(",".join(hdr) + "\n" + ",".join(hdr.values()) + "\n")
    run, rows = _one(path, store)
    assert [(r["queue_s"], r["server_e2e_s"], r["input_tokens"], r["output_tokens"]) for r in rows] == [
        (0.023, 1.21, 550, 62)
    ]
    assert run.metadata["sources"][0]["format"] == "tgi-response-headers"


def test_trtllm_iteration_stats_state_the_kv_pool_and_its_reuse(store):
    """The real docs example: kvCacheStats gives the KV pool (blocks, tokens per block) and the block manager's
    reuse counts; their ratio is the record's own cacheHitRate."""
    from conftest import data_file

    path = data_file("serving", "trtllm", "trtllm-serve_metrics_iter154.docs-example.json")
    (raw,) = json.loads(path.read_text())
    kv = raw["kvCacheStats"]
    run = lltrace.ingest([path], store=store)
    config = {r["setting"]: (r["value"], r["basis"]) for r in run.table("engine_config").to_dicts()}
    assert config["block_size"] == (kv["tokensPerBlock"], "stated")
    assert config["kv_blocks"] == (kv["maxNumBlocks"], "stated")
    assert config["kv_cache_tokens"] == (kv["tokensPerBlock"] * kv["maxNumBlocks"], "derived")
    assert "max_num_seqs" not in config  # the example has no maxBatchSizeRuntime
    hit_rate, basis = run.sql("SELECT hit_rate, hit_basis FROM engine_prefix_cache").row(0)
    assert hit_rate == pytest.approx(kv["cacheHitRate"], abs=5e-6) and basis == "engine counters"


def test_trtllm_runtime_limits_bind_per_iteration(store, tmp_path):
    """maxBatchSizeRuntime and maxNumTokensRuntime (the micro-batch scheduler's limits, in every record of newer
    versions): an iteration at the batch limit is a slot wait, at the token limit a budget wait."""

    def rec(i: int, ctx: int, gen: int, tokens: int, batch: int = 4) -> dict:
        return {
            "iter": i,
            "timestamp": 1000.0 + i,
            "iterLatencyMS": 500.0,
            "numActiveRequests": ctx + gen,
            "numQueuedRequests": 3,
            "maxBatchSizeRuntime": batch,
            "maxNumTokensRuntime": 256,
            "kvCacheStats": {"maxNumBlocks": 1000, "usedNumBlocks": 10, "tokensPerBlock": 32},
            "inflightBatchingStats": {"numContextRequests": ctx, "numGenRequests": gen, "numCtxTokens": tokens},
        }

    path = tmp_path / "iter.log"
    path.write_text("\n".join(json.dumps(r) for r in (rec(0, 1, 3, 10), rec(1, 1, 1, 255), rec(2, 0, 2, 0))) + "\n")
    run = lltrace.ingest([path], store=store)
    config = {r["setting"]: (r["value"], r["origin"]) for r in run.table("engine_config").to_dicts()}
    assert config["max_num_seqs"] == (4, "TensorRT-LLM iteration stats (maxBatchSizeRuntime)")
    assert config["max_num_batched_tokens"] == (256, "TensorRT-LLM iteration stats (maxNumTokensRuntime)")
    causes = run.sql("SELECT cause FROM engine_state ORDER BY start_s")["cause"].to_list()
    assert causes == ["slot", "budget", None]  # 4 scheduled; 255 context + 1 generation tokens; 2 of 4, 2 tokens
    tuned = tmp_path / "tuned.log"  # the batch tuner changed the limit: no one value is stated
    tuned.write_text("\n".join(json.dumps(r) for r in (rec(0, 1, 3, 10, batch=4), rec(1, 1, 1, 10, batch=8))) + "\n")
    run = lltrace.ingest([tuned], store=store)
    assert "max_num_seqs" not in set(run.table("engine_config")["setting"])


@pytest.mark.parametrize(
    ("schema", "outputs", "inputs"),
    [
        ("2023-08 (response timestamps only)", None, None),
        ("2024-02 (outputs as text)", ["I", " like", " dogs", ""], None),
        ("2024-03 (named outputs, request_inputs)", [{"text_output": t} for t in ("I", " like", " dogs", "")], True),
    ],
)
def test_genai_perf_export_schemas_before_service_kind(schema, outputs, inputs, store, tmp_path):
    """Perf Analyzer's profile export as its exporter wrote it before ``service_kind`` (profile_data_exporter.cc
    at d7dfe0a7, e1314582, 79b5e266): uint64 ns times, a decoupled (streaming) Triton model's responses; the
    empty last response is the final flag, not a token. First token at +3 s, last content at +8 s."""
    s, t0 = 1_000_000_000, 1_700_000_000 * 1_000_000_000
    stamps = [t0 + k * s for k in (3, 5, 8, 9)]
    request = {"timestamp": t0, "sequence_id": 1, "response_timestamps": stamps if outputs else stamps[:3]}
    if outputs is not None:
        request["response_outputs"] = outputs
    if inputs:
        request["request_inputs"] = {"text_input": "Tell me about dogs", "max_tokens": 3}
    doc = {
        "experiments": [
            {
                "experiment": {"mode": "concurrency", "value": 1},
                "requests": [request],
                "window_boundaries": [t0, t0 + 20 * s],
            }
        ],
        "version": "2.41.0",
    }
    path = tmp_path / "profile_export.json"
    path.write_text(json.dumps(doc))
    run, rows = _one(path, store)
    assert [(r["ttft_s"], r["e2e_s"], r["status"]) for r in rows] == [(3.0, 8.0, "ok")]
    assert run.metadata["sources"][0]["version"] == f"perf_analyzer 2.41.0 · {schema}"


def test_a_pytorch_execution_trace_is_named_not_guessed(tmp_path):
    """PyTorch's ExecutionTraceObserver file (Chakra schema) has operators and no times: one line saying what it is
    and what to pass instead, not "closest: prometheus-api". The head is a real one's (torch 2.13, a CPU run)."""
    head = (
        '{\n  "schema": "1.1.1-chakra.0.0.4", "pid": 18022, "time": "2026-12-03 04:41:36", "start_ts": 9870307,\n'
        '  "nodes": [\n      {\n        "id": 2, "name": "[pytorch|profiler|execution_trace|thread]", "ctrl_deps": 1,\n'
        '        "inputs": {"values": [], "shapes": [], "types": [], "strides": []},\n'
        '        "outputs": {"values": [], "shapes": [], "types": [], "strides": []}, "attrs": []}\n  ],\n'
        '  "finish_ts": 9870412\n}\n'
    )
    _refused_as(head, tmp_path, "not read: a PyTorch execution trace", "export_chrome_trace")


def _refused_as(text: str, tmp_path, said: str, hint: str) -> None:
    """A file of ``text``, named alone, is refused with one line that says ``said`` and ``hint``; nothing stored."""
    path = tmp_path / "file.json"
    path.write_text(text)
    with pytest.raises(lltrace.errors.UnknownFormat, match=said) as err:
        lltrace.ingest([path], store=tmp_path / "store")
    assert hint in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "store").exists() or not lltrace.Store(tmp_path / "store").run_ids()


def test_a_rocprofiler_sdk_json_is_named_not_guessed(tmp_path):
    """rocprofv3's JSON (rocprofiler-sdk) is a profiler of its own, not a PyTorch trace: named, not "closest:
    aiperf-export". The head and the dispatch record are a real one's (AMD-AGI/TraceLens' tests, a ROCm run),
    cut to one record."""
    doc = (
        '{"rocprofiler-sdk-tool":[{"metadata":{"node":{"id":0,"hash":0,"system_name":"Linux","hardware_name":"x86_64"},'
        '"pid":908,"init_time":63855948165371,"fini_time":63875155697841},"buffer_records":{"kernel_dispatch":[{"size":'
        '184,"kind":11,"operation":2,"thread_id":908,"correlation_id":{"internal":1,"external":0},"start_timestamp":'
        '63857982592000,"end_timestamp":63857982594840,"dispatch_info":{"kernel_id":8,"dispatch_id":1}}]}}]}'
    )
    _refused_as(doc, tmp_path, "not read: rocprofiler-sdk's JSON", "PyTorch profiler trace")


def test_guidellms_other_reports_are_named_beside_its_json(tmp_path):
    """guidellm >= 0.4 writes benchmarks.json, .csv and .html by default (and .yaml on request): the real reports of
    run K_guidellm (guidellm 0.8.1's `export`) in one folder with the JSON: the JSON read, the CSV read once (the
    JSON's figures kept: tests/test_guidellm_csv.py), the others skipped as what they are; named alone, each
    refused with one line saying so."""
    exports = [f for f in (SAMPLES / "guidellm_exports").iterdir() if f.is_file()]
    folder = tmp_path / "guidellm"
    folder.mkdir()
    shutil.copy(SAMPLES / "vllm_cpu_limits" / "K_guidellm" / "bench" / "benchmarks.json", folder)
    for f in exports:
        shutil.copy(f, folder)
    with pytest.warns(lltrace.InputWarning, match="read once"):
        run = lltrace.ingest([folder], store=tmp_path / "store")
    assert [s["format"] for s in run.metadata["sources"]] == ["guidellm-csv", "guidellm-benchmarks"]
    said = {Path(s["path"]).name: s["reason"] for s in run.metadata["skipped"]}
    assert sorted(said) == ["benchmarks.html", "benchmarks.yaml.gz"]
    assert said["benchmarks.html"].startswith("guidellm's HTML report")
    assert said["benchmarks.yaml.gz"].startswith("guidellm's YAML report") and "kind=json" in said["benchmarks.yaml.gz"]
    for f in exports:
        if f.suffix == ".csv":
            continue
        with pytest.raises(lltrace.errors.UnknownFormat, match="not read: guidellm's") as err:
            lltrace.ingest([f], store=tmp_path / "alone")
        assert "\n" not in str(err.value)


def test_vllms_offline_benchmark_results_are_named(tmp_path):
    """``vllm bench throughput`` / ``latency`` --output-json (built from vllm/benchmarks/throughput.py and latency.py:
    the keys they dump, ``json.dump(results, f, indent=4)``): one batch's figures, no request served; named."""
    throughput = {
        "elapsed_time": 12.5,
        "num_requests": 1000,
        "total_num_tokens": 512000,
        "requests_per_second": 80.0,
        "tokens_per_second": 40960.0,
    }
    (tmp_path / "t").mkdir()
    _refused_as(json.dumps(throughput, indent=4), tmp_path / "t", "offline throughput result", "vllm bench serve")
    latency = {"avg_latency": 1.25, "latencies": [1.2, 1.3], "percentiles": {"10": 1.21, "50": 1.25, "99": 1.3}}
    (tmp_path / "l").mkdir()
    _refused_as(json.dumps(latency, indent=4), tmp_path / "l", "offline latency result", "vllm bench serve")


def _tgi_exposition(queue: list[float], e2e: list[float], waiting: int, batch: int) -> str:
    """A TGI router's /metrics as router/src/server.rs sets it up (duration buckets 0.0001 x 1.5^k, k = 1..35, for
    every family ending in "duration") and metrics-exporter-prometheus renders it: HELP, TYPE, buckets, sum,
    count per family."""
    bounds, v = [], 0.0001
    for _ in range(35):
        v *= 1.5
        bounds.append(v)

    def hist(name: str, obs: list[float]) -> str:
        rows = [f"# HELP {name} (TGI)", f"# TYPE {name} histogram"]
        rows += [f'{name}_bucket{{le="{b!r}"}} {sum(o <= b for o in obs)}' for b in bounds]
        rows += [f'{name}_bucket{{le="+Inf"}} {len(obs)}', f"{name}_sum {sum(obs)!r}", f"{name}_count {len(obs)}"]
        return "\n".join(rows) + "\n\n"

    gauges = "".join(
        f"# HELP {n} (TGI)\n# TYPE {n} gauge\n{n} {x}\n\n"
        for n, x in (("tgi_queue_size", waiting), ("tgi_batch_current_size", batch))
    )
    counter = "# HELP tgi_request_count (TGI)\n# TYPE tgi_request_count counter\ntgi_request_count 13\n\n"
    return gauges + counter + hist("tgi_request_queue_duration", queue) + hist("tgi_request_duration", e2e)


def test_tgis_metrics_give_its_queue_batch_and_latency_histograms(tmp_path):
    """TGI's /metrics (its router's tgi_* families; a fixture from its source, no real scrape at hand): the queue
    and batch gauges as waiting and running, its queue-time and request-duration histograms as the engine's own
    queue and e2e, the engine named TGI (so advice names its launcher's arguments)."""
    queue, e2e = [0.0004, 0.0009, 0.012, 0.35, 1.2], [0.8, 1.1, 1.9, 2.6, 3.4]
    path = tmp_path / "tgi_metrics.prom"
    path.write_text("# scrape_unix_ts 1764547200\n" + _tgi_exposition(queue, e2e, waiting=3, batch=8))
    run = lltrace.ingest([path], store=tmp_path / "store")
    (src,) = run.metadata["sources"]
    assert src["format"] == "prometheus" and src["engine_config"] == {"engine": "tgi"}
    (row,) = run.sql(
        "SELECT waiting, running, queue_time_sum_s, queue_time_count, e2e_sum_s, e2e_count, ts_s FROM engine_stats"
    ).rows()
    assert row == pytest.approx((3, 8, sum(queue), 5, sum(e2e), 5, 1764547200))
    (n_buckets,) = run.sql("SELECT count(*) FROM engine_histograms WHERE metric = 'queue_time'").rows()[0]
    assert n_buckets == 36
    latency = lltrace.analyze(run).to_dict()["engine_latency"]
    assert latency["queue_mean_s"] == pytest.approx(sum(queue) / 5)
    assert latency["e2e_mean_s"] == pytest.approx(sum(e2e) / 5)

"""A vLLM server log's request lines (--enable-log-requests; the default before 0.10) as the run's requests,
never counted twice. Expected values come from the raw log text and the bench's own files."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest
from conftest import DATA, SAMPLES

import lltrace
from lltrace.ingest.log_requests import LOG_CLIENT

RUN = SAMPLES / "vllm_cpu_limits" / "T_log_requests"


def _raw_requests() -> tuple[dict[str, str], dict[str, str]]:
    """From the raw log: each generation request's Received stamp, and the stamps of the Aborted lines by the
    frontend's id (the engine's id less its suffix)."""
    raw = (RUN / "server.log").read_text()
    received = dict(
        (rid, stamp)
        for stamp, rid in re.findall(
            r"INFO (\d\d-\d\d \d\d:\d\d:\d\d) \[[\w.]+:\d+\] Received request (\S+): params: SamplingParams", raw
        )
    )
    aborted = {
        eid.rsplit("-", 1)[0]: stamp
        for stamp, eid in re.findall(
            r"INFO (\d\d-\d\d \d\d:\d\d:\d\d) \[[\w.]+:\d+\] Aborted request\(s\) (\S+)\.", raw
        )
    }
    return received, aborted


def _epoch(stamp: str) -> float:
    return datetime.strptime(f"2026-{stamp}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()


def test_a_log_alone_lists_its_requests_and_the_aborted_ones(tmp_path):
    received, aborted = _raw_requests()
    assert len(received) == 86 and len(aborted) == 6  # the bench's 80 and curl's 6 (README of the run)
    run = lltrace.ingest([RUN / "server.log"], store=tmp_path / "s")
    rows = run.sql("SELECT request_id, arrival_s, status, client_id FROM requests ORDER BY request_id").rows()
    assert sorted(r[0] for r in rows) == sorted(received)
    assert {r[0] for r in rows if r[2] == "aborted"} == set(aborted)
    assert {r[3] for r in rows} == {LOG_CLIENT}
    # on the log's own clock (no dated source beside it): seconds from its first stamp, so differences hold
    first = min(received, key=lambda rid: _epoch(received[rid]))
    at = {rid: a for rid, a, _, _ in rows}
    for rid, stamp in received.items():
        assert at[rid] - at[first] == _epoch(stamp) - _epoch(received[first])
    assert run.metadata["log_requests"]["used"].startswith("the run's requests")
    doc = lltrace.analyze(run).to_dict()
    assert doc["requests"]["count"] == 86 and doc["requests"]["counted"] == 80
    assert [(e["outcome"], e["requests"]) for e in doc["requests"]["excluded"]] == [("aborted", 6)]
    # the workload: the 80 counted arrivals, no sizes (0.32 logs none at INFO); their stamps, to the second, span
    # too little for a rate
    counted = [_epoch(received[rid]) for rid in received if rid not in aborted]
    mix = doc["workload"]
    assert (mix["requests"], mix["sized"], mix["input_p50"]) == (80, 0, None)
    assert mix["span_s"] == max(counted) - min(counted) and mix["arrival_resolution_s"] == 1.0
    assert mix["rate_per_s"] is None


def test_beside_the_spans_only_the_aborted_requests_are_added(tmp_path):
    """The spans are the 80 bench requests; vLLM exports none for an aborted request, which the log names: the
    run holds 86, the 80 as the spans and the bench measure them (the same figures as without the log)."""
    received, aborted = _raw_requests()
    others = [p for p in RUN.rglob("*") if p.is_file() and p.name != "server.log"]
    without = lltrace.analyze(lltrace.ingest(others, store=tmp_path / "a")).to_dict()
    run = lltrace.ingest([RUN], store=tmp_path / "b")
    spans = (RUN / "otlp" / "traces.otlp.jsonl").read_text()
    assert spans.count('"gen_ai.request.id"') == 80 and "abort-" not in spans
    report = run.metadata["log_requests"]
    assert report["added"] == 6 and report["in_spans"] == 80 and report["in_neither"] == 0
    got = run.sql("SELECT request_id, arrival_s, status, matched_by FROM requests").rows()
    assert len(got) == 86
    added = {rid: a for rid, a, status, _ in got if status == "aborted"}
    assert added == {rid: _epoch(received[rid]) for rid in aborted}  # the Received stamp, UTC as checked
    doc = lltrace.analyze(run).to_dict()
    assert doc["requests"]["count"] == 86 and doc["requests"]["counted"] == without["requests"]["counted"] == 80
    for key in ("ttft_s", "e2e_s"):
        assert doc["requests"][key] == without["requests"][key]
    bench = json.loads((RUN / "bench" / "bench.json").read_text())
    assert bench["completed"] == 80


def test_beside_a_clients_records_without_spans_the_log_adds_nothing(tmp_path):
    run = lltrace.ingest([RUN / "bench" / "bench.json", RUN / "server.log"], store=tmp_path / "s")
    report = run.metadata["log_requests"]
    assert report["added"] == 0 and report["requests"] == 86 and report["aborted"] == 6
    assert report["used"].startswith("not added")
    assert run.sql("SELECT count(*) FROM requests").rows() == [(80,)]


# The request lines of older versions, built from vLLM's source: entrypoints/logger.py (0.5-0.7: "Received request
# %s: prompt: %r, params: %s, prompt_token_ids: %s, lora_request: %s, prompt_adapter_request: %s."),
# engine/async_llm_engine.py ("Added request %s.", "Finished request %s.", "Aborted request %s."), the stats line of
# engine/metrics.py, and a dated config's stamps to the millisecond (NVIDIA NIM's "INFO 2025-09-10 16:32:05.957").
_V0 = """\
INFO 2025-09-10 16:32:05.100 logger.py:37] Received request chatcmpl-a1: prompt: '<s>Hi, params: SamplingParams(x)', \
params: SamplingParams(n=1, temperature=0.7, max_tokens=64, min_tokens=0), prompt_token_ids: [1, 15043, 29892, 3], \
lora_request: None, prompt_adapter_request: None.
INFO 2025-09-10 16:32:05.102 async_llm_engine.py:211] Added request chatcmpl-a1.
INFO 2025-09-10 16:32:05.300 logger.py:37] Received request tokenize-9: prompt: 'x', params: None, \
prompt_token_ids: [1], lora_request: None, prompt_adapter_request: None.
INFO 2025-09-10 16:32:05.400 logger.py:37] Received request embd-2: prompt: 'x', params: PoolingParams(), \
prompt_token_ids: [1, 2], lora_request: None, prompt_adapter_request: None.
INFO 2025-09-10 16:32:06.000 logger.py:37] Received request chatcmpl-b2: prompt: 'long', \
params: SamplingParams(n=1, max_tokens=None), prompt_token_ids: [1, 2, 3, 4, 5, 6, 7, 8], lora_request: None, \
prompt_adapter_request: None.
INFO 2025-09-10 16:32:06.001 async_llm_engine.py:211] Added request chatcmpl-b2.
INFO 2025-09-10 16:32:07.250 async_llm_engine.py:179] Finished request chatcmpl-a1.
INFO 2025-09-10 16:32:07.500 metrics.py:351] Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 5.0 \
tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.4%, CPU KV cache usage: 0.0%.
INFO 2025-09-10 16:32:08.000 async_llm_engine.py:64] Aborted request chatcmpl-b2.
INFO 2025-09-10 16:32:09.000 async_llm_engine.py:179] Finished request chatcmpl-zz.
"""


def test_older_request_lines_give_prompt_sizes_and_exact_latencies(tmp_path):
    path = tmp_path / "server.log"
    path.write_text(_V0)
    run = lltrace.ingest([path], store=tmp_path / "s")
    rows = {r["request_id"]: r for r in run.sql("SELECT * FROM requests").to_dicts()}
    assert set(rows) == {"chatcmpl-a1", "chatcmpl-b2"}  # not the tokenize call, not the embedding
    a, b = rows["chatcmpl-a1"], rows["chatcmpl-b2"]
    t0 = datetime(2025, 9, 10, 16, 32, 5, tzinfo=timezone.utc).timestamp()
    assert a["arrival_s"] == pytest.approx(t0 + 0.1, abs=1e-6) and a["finished_s"] == pytest.approx(t0 + 2.25)
    assert a["server_e2e_s"] == pytest.approx(2.15, abs=1e-6)  # both stamps to the millisecond
    assert a["input_tokens"] == 4 and a["status"] == "finished" and a["arrival_resolution_s"] is None
    assert b["status"] == "aborted" and b["input_tokens"] == 8 and b["server_e2e_s"] is None
    (src,) = run.metadata["sources"]
    lines = src["log_requests"]
    assert lines["received"] == 2 and lines["not_generation"] == 2 and lines["unknown_ids"] == 1
    assert lines["finished"] == 1 and lines["aborted"] == 1


def test_a_prompt_list_cut_by_max_log_len_gives_no_size_and_whole_seconds_no_latency(tmp_path):
    text = "INFO 09-10 16:32:00 api_server.py:1] non-default args: {'max_log_len': 4}\n" + _V0.replace(
        "INFO 2025-", "INFO "
    ).replace(".100 ", " ").replace(".250 ", " ")
    text = re.sub(r"(INFO \d\d-\d\d \d\d:\d\d:\d\d)\.\d{3} ", r"\1 ", text)
    path = tmp_path / "server.log"
    path.write_text(text)
    run = lltrace.ingest([path], store=tmp_path / "s")
    rows = {r["request_id"]: r for r in run.sql("SELECT * FROM requests").to_dicts()}
    # a1 listed 4 ids with --max-log-len 4: perhaps cut, so no size; b2's 8 cannot be whole either
    assert rows["chatcmpl-a1"]["input_tokens"] is None and rows["chatcmpl-b2"]["input_tokens"] is None
    # stamps to the second: the finish time is kept, no latency made of two whole-second stamps
    assert rows["chatcmpl-a1"]["server_e2e_s"] is None and rows["chatcmpl-a1"]["finished_s"] is not None


# --enable-log-outputs (serve/utils/request_logger.py, 0.32: "Generated response %s%s: output: %r, finish_reason: %s",
# the stream's deltas " (streaming delta)", its end " (streaming complete)"), with 0.32's request and engine lines
_OUTPUTS = """\
INFO 12-05 04:45:56 [request_logger.py:65] Received request chatcmpl-c3: params: SamplingParams(n=1, max_tokens=16), \
lora_request: None.
INFO 12-05 04:45:56 [async_llm.py:578] Added request chatcmpl-c3-0a1b2c3d.
INFO 12-05 04:45:56 [request_logger.py:109] Generated response chatcmpl-c3 (streaming delta): output: 'Hi', \
finish_reason: None
INFO 12-05 04:45:57 [request_logger.py:109] Generated response chatcmpl-c3 (streaming complete): output: 'Hi there', \
finish_reason: length
INFO 12-05 04:45:57 [request_logger.py:65] Received request chatcmpl-d4: params: SamplingParams(n=1, max_tokens=8), \
lora_request: None.
INFO 12-05 04:45:57 [async_llm.py:578] Added request chatcmpl-d4-9f8e7d6c.
INFO 12-05 04:45:58 [request_logger.py:109] Generated response chatcmpl-d4: output: 'Yes', finish_reason: stop
"""


def test_generated_response_lines_end_their_requests(tmp_path):
    path = tmp_path / "server.log"
    path.write_text(_OUTPUTS)
    run = lltrace.ingest([path], store=tmp_path / "s")
    rows = {r["request_id"]: r for r in run.sql("SELECT * FROM requests").to_dicts()}
    assert set(rows) == {"chatcmpl-c3", "chatcmpl-d4"}
    assert rows["chatcmpl-c3"]["engine_request_id"] == "chatcmpl-c3-0a1b2c3d"
    assert {r["status"] for r in rows.values()} == {"finished"}
    # whole-second stamps: the end is kept, one second after the arrival, and no latency is made of them
    assert rows["chatcmpl-c3"]["finished_s"] - rows["chatcmpl-c3"]["arrival_s"] == 1.0
    assert rows["chatcmpl-c3"]["server_e2e_s"] is None
    (src,) = run.metadata["sources"]
    assert src["log_requests"]["generated"] == 2 and src["log_requests"]["received"] == 2


def test_an_id_received_again_is_a_request_of_its_own(tmp_path):
    """A server restarted in one log, or a client reusing its ids (a bench's --request-id-prefix run twice): the same
    id received again is another request, named <id>#2, never one request made of two."""
    again = _OUTPUTS.replace("04:45:5", "04:46:5")
    path = tmp_path / "server.log"
    path.write_text(_OUTPUTS + again)
    with pytest.warns(lltrace.InputWarning, match=r"2 request id\(s\) received again"):
        run = lltrace.ingest([path], store=tmp_path / "s")
    rows = {r["request_id"]: r for r in run.sql("SELECT * FROM requests").to_dicts()}
    assert set(rows) == {"chatcmpl-c3", "chatcmpl-d4", "chatcmpl-c3#2", "chatcmpl-d4#2"}
    assert rows["chatcmpl-c3#2"]["arrival_s"] - rows["chatcmpl-c3"]["arrival_s"] == 60.0
    assert rows["chatcmpl-c3#2"]["engine_request_id"] == "chatcmpl-c3-0a1b2c3d"
    assert {r["status"] for r in rows.values()} == {"finished"}


def test_errors_while_serving_and_http_errors_are_said(tmp_path):
    """Run T's real log, with what a failing request adds to it inserted mid-run (in vLLM 0.32's and uvicorn's own
    line formats): a traceback's ERROR records (one error: same stamp and source line) and two 400 responses. Said
    in warnings and counted; the EngineDeadError a killed engine prints after the [shutdown] lines is not."""
    lines = (RUN / "server.log").read_text().splitlines(keepends=True)
    at = next(i for i, x in enumerate(lines) if "Avg prompt throughput" in x) + 1
    head = "(APIServer pid=17308) ERROR 12-05 04:45:57 [serving_completion.py:175] "
    inserted = [
        head + "Error in preprocessing prompt inputs\n",
        head + "Traceback (most recent call last):\n",
        head + "ValueError: This model's maximum context length is 2048 tokens.\n",
        'INFO:     127.0.0.1:50718 - "POST /v1/completions HTTP/1.1" 400 Bad Request\n',
        'INFO:     127.0.0.1:50720 - "POST /v1/completions HTTP/1.1" 400 Bad Request\n',
    ]
    path = tmp_path / "server.log"
    path.write_text("".join(lines[:at] + inserted + lines[at:]))
    with pytest.warns(lltrace.InputWarning) as said:
        run = lltrace.ingest([path], store=tmp_path / "s")
    text = [str(w.message) for w in said]
    assert any(f"line {at + 1}: 1 ERROR record(s) while the server was serving" in w for w in text)
    assert any("2 request(s) answered with an HTTP error" in w and "POST /v1/completions 400 x2" in w for w in text)
    (src,) = run.metadata["sources"]
    raw = (RUN / "server.log").read_text()
    assert src["http"]["responses"] == raw.count(' HTTP/1.1" ') + 2
    assert src["errors"] == {
        "records": 1,
        "while_serving": 1,
        "first": [{"line": at + 1, "message": "Error in preprocessing prompt inputs"}],
        "shutdown_line": next(i for i, x in enumerate(lines) if "[shutdown]" in x) + len(inserted) + 1,
    }


def test_a_killed_engines_errors_after_shutdown_are_not_warned(tmp_path):
    """Run B's real log ends with the EngineDeadError traceback of its killed engine, after the [shutdown] lines."""
    log = DATA / "vllm_cpu" / "B_kvpressure" / "server.log"
    raw = log.read_text()
    assert "EngineDeadError" in raw and raw.index("[shutdown]") < raw.index("EngineDeadError")
    run = lltrace.ingest([log], store=tmp_path / "s")
    (src,) = run.metadata["sources"]
    assert src["errors"]["records"] == 1 and src["errors"]["while_serving"] == 0
    assert not any("ERROR record" in w for w in src["warnings"])


CHAT = SAMPLES / "vllm_cpu_limits" / "U_log_outputs"


def test_a_real_chat_runs_generated_responses_end_its_requests(tmp_path):
    """lltrace's real run U_log_outputs (vLLM 0.32, the chat endpoint, --enable-log-outputs): each stream's
    ``(streaming complete)`` line ends its request (the deltas before it do not); alone, the log gives the 30 requests
    finished at those lines' stamps; beside the spans and the bench, the bench's rows join the spans by id
    (``chatcmpl-<prefix><i>``: the chat endpoint's form) and the log adds none."""
    raw = (CHAT / "server.log").read_text()
    stamp = r"INFO (\d\d-\d\d \d\d:\d\d:\d\d) \[[\w.]+:\d+\] "
    received = {r: t for t, r in re.findall(stamp + r"Received request (chatcmpl-\S+): params: SamplingParams", raw)}
    ends = {r: t for t, r in re.findall(stamp + r"Generated response (chatcmpl-\S+) \(streaming complete\)", raw)}
    assert len(received) == len(ends) == 30 and set(ends) == set(received)
    run = lltrace.ingest([CHAT / "server.log"], store=tmp_path / "log")
    rows = {r[0]: r[1:] for r in run.sql("SELECT request_id, arrival_s, finished_s, status FROM requests").rows()}
    assert set(rows) == set(received) and {r[2] for r in rows.values()} == {"finished"}
    for rid, (arrival, finished, _) in rows.items():
        assert finished - arrival == _epoch(ends[rid]) - _epoch(received[rid])
    (src,) = run.metadata["sources"]
    assert (src["log_requests"]["generated"], src["log_requests"]["not_generation"]) == (30, 1)
    bench = json.loads((CHAT / "bench" / "bench.json").read_text())
    folder = lltrace.ingest([CHAT], store=tmp_path / "all")
    assert folder.sql("SELECT matched_by, count(*) FROM requests GROUP BY 1").rows() == [("request_id", 30)]
    assert folder.metadata["log_requests"]["added"] == 0 and bench["completed"] == 30

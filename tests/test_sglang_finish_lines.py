"""SGLang's request log (--log-requests): each Finish line a request with SGLang's own figures. Expected values are
read from the raw lines' meta_info (a real line from a public SGLang issue; the other forms written from SGLang's
request_logger.py and req_time_stats.py)."""

from __future__ import annotations

import ast
import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

import lltrace

REAL = Path(__file__).parent / "data" / "real" / "sglang" / "glm-5.1_h100_cp_pp.finish_line.log"
_COLUMNS = (
    "request_id, arrival_s, finished_s, status, server_e2e_s, server_ttft_s, queue_s, input_tokens, output_tokens, "
    "cached_tokens, num_preemptions, arrival_resolution_s, error_code, error"
)


def _requests(run: lltrace.Run) -> dict[str, dict]:
    return {r["request_id"]: r for r in run.sql(f"SELECT {_COLUMNS} FROM requests").to_dicts()}


def _meta(line: str) -> dict:
    """The raw line's meta_info, read whole (the real line has nothing cut)."""
    return ast.literal_eval(line[line.rindex("'meta_info': ") + 13 : -1])


def test_a_real_finish_line_is_its_request_with_sglangs_own_figures(tmp_path):
    raw = REAL.read_text().splitlines()
    meta = _meta(next(x for x in raw if "Finish: obj=" in x))
    # the scheduler's exception after it is said: the message before its traceback and the error it ends with
    raised = next(x for x in raw if x.startswith(("RuntimeError", "1779264164797\t2026-05-20T08:02:44.797Z\tRuntime")))
    with pytest.warns(UserWarning, match=re.escape("Scheduler hit an exception: " + raised.split("\t")[-1])):
        run = lltrace.ingest([REAL], store=tmp_path / "s")
    (r,) = _requests(run).values()
    assert r["request_id"] == meta["id"]
    assert r["arrival_s"] == meta["request_received_ts"] and r["finished_s"] == meta["request_finished_ts"]
    assert r["server_e2e_s"] == meta["e2e_latency"]
    assert r["server_e2e_s"] == pytest.approx(meta["request_finished_ts"] - meta["request_received_ts"], abs=1e-5)
    # streamed: its first response went out at the first chunk
    assert r["server_ttft_s"] == pytest.approx(meta["response_sent_to_client_ts"] - meta["request_received_ts"])
    assert (r["input_tokens"], r["output_tokens"], r["cached_tokens"], r["num_preemptions"]) == (32472, 23297, 32320, 0)
    assert r["queue_s"] is None  # queue_time 0.0: the scheduler's stamps never reached the tokenizer manager
    assert r["status"] == "error"  # aborted by the server with 503
    reason = meta["finish_reason"]
    assert (r["error_code"], r["error"]) == (reason["status_code"], reason["message"])  # 503, the timeout
    assert r["arrival_resolution_s"] is None
    (src,) = run.metadata["sources"]
    assert src["finish_lines"]["aborted"] == {"Request running timeout reached. (503)": 1}
    assert src["errors"]["records"] == 1 and src["http"]["by_status"] == {"200": 1}
    assert src["log_lines"]["rank_copies"] == 7
    # the batch lines beside it, each at its collector's stamp: the eight context-parallel ranks' copies of one
    # prefill batch are one step of the engine "PP0" (their headers "PP0 ATTN_CPk TPk"), the decode line a sample
    stamp = datetime(2026, 5, 20, 8, 2, 44, 792000, tzinfo=timezone.utc).timestamp()
    assert sum("] Prefill batch" in x for x in raw) == 8
    assert run.sql("SELECT engine, end_s, prefill_tokens FROM engine_steps").rows() == [
        ("PP0", pytest.approx(stamp), 128)
    ]
    assert run.sql("SELECT engine, count(ts_s) FROM engine_stats GROUP BY engine").rows() == [("PP0", 2)]
    doc = lltrace.analyze(run).to_dict()
    assert doc["requests"]["count"] == 1 and doc["requests"]["excluded"][0]["outcome"] == "failed"
    (cause,) = doc["requests"]["excluded"][0]["causes"]
    assert (cause["cause"], cause["error"]) == ("HTTP 503 Service Unavailable", reason["message"])


_OLD = (
    "[2025-03-24 02:56:41 TP0] Decode batch. #running-req: 2, #token: 700, token usage: 0.01, gen throughput "
    "(token/s): 39.33, #queue-req: 1, \n"
    "[2025-03-24 02:56:43] Finish: obj=GenerateReqInput(text='say \\'meta_info\\': {', rid='r-1', stream=False), "
    "out={'text': 'ok', 'meta_info': {'id': 'r-1', 'finish_reason': {'type': 'length', 'length': 64}, "
    "'prompt_tokens': 128, 'completion_tokens': 64, 'cached_tokens': 0, 'output_token_logprobs': [(-0.1, 5, None), "
    "(-0.2, 6, None)] ... [(-0.3, 7, None)], 'e2e_latency': 1.25}}\n"
    "[2025-03-24 02:56:44] Finish: obj=GenerateReqInput(rid='r-2', stream=True), out={'meta_info': {'id': 'r-2', "
    "'finish_reason': {'type': 'abort', 'message': 'Client disconnected'}, 'prompt_tokens': 100, "
    "'completion_tokens': 3, 'cached_tokens': 0, 'e2e_latency': 0.5}}\n"
)


def test_an_older_line_without_epoch_stamps_arrives_at_its_stamp_less_its_latency(tmp_path):
    """Before 2026 meta_info had no epoch stamps: the request ends at the line's stamp, SGLang's own (to the second),
    and arrives its e2e_latency before; a level-2 line's cut lists (`` ... ``) and a prompt holding the key's text
    do not hide its meta_info."""
    path = tmp_path / "server.log"
    path.write_text(_OLD)
    rows = _requests(lltrace.ingest([path], store=tmp_path / "s"))
    t = datetime(2025, 3, 24, 2, 56, 43, tzinfo=timezone.utc).timestamp()
    a, b = rows["r-1"], rows["r-2"]
    assert a["finished_s"] == t and a["arrival_s"] == t - 1.25 and a["arrival_resolution_s"] == 1.0
    assert (a["status"], a["input_tokens"], a["output_tokens"], a["server_ttft_s"]) == ("length", 128, 64, None)
    assert b["status"] == "aborted" and b["server_ttft_s"] is None  # a client's disconnect: no status code
    assert (b["error_code"], b["error"]) == (None, "Client disconnected")


def test_a_json_request_log_line(tmp_path):
    """``--log-requests-format json``: one JSON object a line, its own local ISO stamp (read as UTC)."""
    meta = {
        "id": "j-1",
        "finish_reason": {"type": "stop", "matched": 2},
        "prompt_tokens": 10,
        "completion_tokens": 20,
        "cached_tokens": 4,
        "e2e_latency": 0.75,
        "queue_time": 0.0125,
        "total_retractions": 1,
    }
    record = {"timestamp": "2026-10-01T12:00:01.250000", "event": "request.finished", "rid": "j-1"}
    record |= {"obj": {"rid": "j-1", "stream": True}, "out": {"meta_info": meta}}
    path = tmp_path / "requests.log"
    path.write_text(json.dumps(record) + "\n")
    (r,) = _requests(lltrace.ingest([path], store=tmp_path / "s")).values()
    t = datetime(2026, 10, 1, 12, 0, 1, 250000, tzinfo=timezone.utc).timestamp()
    assert r["finished_s"] == t and r["arrival_s"] == pytest.approx(t - 0.75) and r["arrival_resolution_s"] is None
    assert (r["queue_s"], r["num_preemptions"], r["cached_tokens"], r["status"]) == (0.0125, 1, 4, "stop")


def test_a_request_with_both_lines_is_one_request(tmp_path):
    """Req Time Stats and Finish lines of one rid: one row, the scheduler's queue time from the stats line where the
    Finish line gives none."""
    text = (
        "[2025-06-01 10:00:00 TP0] Req Time Stats(rid=q-1, input len=50, output len=8, type=unified): "
        "queue_duration=12.50ms, forward_duration=80.00ms\n"
        "[2025-06-01 10:00:01] Finish: obj=GenerateReqInput(rid='q-1', stream=True), out={'meta_info': {'id': 'q-1', "
        "'finish_reason': {'type': 'stop'}, 'prompt_tokens': 50, 'completion_tokens': 8, 'e2e_latency': 0.1}}\n"
        "[2025-06-01 10:00:02 TP0] Req Time Stats(rid=q-2, input len=60, output len=9, type=unified): "
        "queue_duration=1.00ms, forward_duration=70.00ms\n"
    )
    path = tmp_path / "server.log"
    path.write_text(text)
    rows = _requests(lltrace.ingest([path], store=tmp_path / "s"))
    assert sorted(rows) == ["q-1", "q-2"]
    assert rows["q-1"]["queue_s"] == pytest.approx(0.0125) and rows["q-1"]["server_e2e_s"] == 0.1
    assert rows["q-2"]["queue_s"] == pytest.approx(0.001)


def test_stamps_in_a_local_zone_are_read_in_that_zone(tmp_path):
    """SGLang stamps its lines in the server's local time (logs print no zone: read as UTC); the 2026 lines' epoch
    stamps say how far off that is, and the log's own stamps are read in that zone, said in a warning."""
    line = REAL.read_text().splitlines()[1]
    meta = _meta(line)
    finished = datetime.fromtimestamp(meta["request_finished_ts"], tz=timezone.utc)
    local = f"[{finished.replace(hour=finished.hour + 8):%Y-%m-%d %H:%M:%S}"  # UTC+8, stamped by SGLang itself
    path = tmp_path / "server.log"
    path.write_text(
        f"{local} TP0] Decode batch, #running-req: 4, #token: 477376, token usage: 0.90, #queue-req: 6\n"
        f"{local}] {line[line.index('Finish: obj=') :]}\n"
    )
    with pytest.warns(UserWarning, match=r"UTC\+8 h"):
        run = lltrace.ingest([path], store=tmp_path / "s")
    (r,) = _requests(run).values()
    assert r["arrival_s"] == meta["request_received_ts"]  # its own epoch stamps, as they are
    (ts,) = run.sql("SELECT ts_s FROM engine_stats").rows()[0]
    assert ts == int(meta["request_finished_ts"])  # the batch line's stamp, read at UTC+8
    (src,) = run.metadata["sources"]
    assert src["finish_lines"]["stamp_zone_offset_s"] == 8 * 3600 and "UTC+8 h" in src["clock"]["origin"]


def test_a_finish_line_without_meta_info_is_counted_not_read(tmp_path):
    path = tmp_path / "server.log"
    path.write_text(_OLD + "[2025-03-24 02:56:45] Finish: obj=GenerateReqInput(rid='r-3'), out={'text': 'cut\n")
    with pytest.warns(UserWarning, match="1 Finish line"):
        run = lltrace.ingest([path], store=tmp_path / "s")
    assert sorted(_requests(run)) == ["r-1", "r-2"]
    assert run.metadata["sources"][0]["dropped"]["unreadable_finish_lines"] == 1
    assert re.search(r"request lines \(2 finished\)", run.metadata["sources"][0]["version"])


def test_a_logs_requests_are_attributed_with_prefill_estimated_from_its_ttft_less_its_queue(tmp_path):
    """A streamed request's TTFT (first response sent) and the scheduler's queue time are SGLang's measurements;
    prefill is what lies between (labelled estimated: it holds the frontend's tokenization and dispatch), decode
    the rest of SGLang's e2e."""
    lines, want = [], {}
    for i, (queue, ttft, e2e) in enumerate([(0.010, 0.060, 1.5), (0.200, 0.320, 2.0), (0.050, 0.090, 0.8)]):
        received = 1780000000.0 + i
        meta = (
            f"{{'id': 's{i}', 'finish_reason': {{'type': 'stop'}}, 'prompt_tokens': 100, 'completion_tokens': 50, "
            f"'queue_time': {queue}, 'e2e_latency': {e2e}, 'request_received_ts': {received}, "
            f"'response_sent_to_client_ts': {received + ttft}, 'request_finished_ts': {received + e2e}}}"
        )
        stamp = datetime.fromtimestamp(received + e2e, tz=timezone.utc)
        lines.append(
            f"[{stamp:%Y-%m-%d %H:%M:%S}] Finish: obj=GenerateReqInput(rid='s{i}', stream=True), "
            f"out={{'meta_info': {meta}}}"
        )
        want[f"s{i}"] = (queue, ttft - queue, e2e - ttft)
    path = tmp_path / "server.log"
    path.write_text("\n".join(lines) + "\n")
    run = lltrace.ingest([path], store=tmp_path / "s")
    got = run.sql(
        "SELECT request_id, queue_s, queue_basis, prefill_s, prefill_basis, decode_s, decode_basis, overhead_s "
        "FROM attribution_request ORDER BY request_id"
    ).rows()
    for rid, queue, qb, prefill, pb, decode, db, overhead in got:
        assert (qb, pb, db) == ("measured", "estimated", "derived")
        assert (queue, prefill, decode) == pytest.approx(want[rid], abs=1e-6) and overhead == pytest.approx(0, abs=1e-6)
    assert run.metadata["server_prefill_estimated"]["requests"] == 3


def test_a_received_request_no_finish_line_ends_is_incomplete(tmp_path):
    """A Receive line without its Finish line (running when the log ends, lost when the server failed): a request,
    incomplete, at the Receive line's stamp; an embedding's Finish line is no generation request."""
    path = tmp_path / "server.log"
    path.write_text(
        "[2025-03-24 02:56:40] Receive: obj=GenerateReqInput(text='hi', sampling_params={'max_new_tokens': 64}, "
        "rid='r-1', stream=False)\n"
        "[2025-03-24 02:56:42] Receive: obj=GenerateReqInput(text=\"a prompt with rid='x'\", rid='r-9')\n"
        "[2025-03-24 02:56:42] Finish: obj=EmbeddingReqInput(rid='e-1'), out={'meta_info': {'id': 'e-1', "
        "'prompt_tokens': 5, 'e2e_latency': 0.01}}\n" + _OLD
    )
    run = lltrace.ingest([path], store=tmp_path / "s")
    rows = _requests(run)
    assert sorted(rows) == ["r-1", "r-2", "r-9"]
    t = datetime(2025, 3, 24, 2, 56, 42, tzinfo=timezone.utc).timestamp()
    assert rows["r-9"]["status"] == "incomplete" and rows["r-9"]["arrival_s"] == t
    assert rows["r-9"]["arrival_resolution_s"] == 1.0 and rows["r-9"]["finished_s"] is None
    assert rows["r-1"]["status"] == "length"  # received and finished: the Finish line's request
    said = run.metadata["sources"][0]["finish_lines"]
    assert (said["received_not_finished"], said["not_generation"]) == (1, 1)
    doc = lltrace.analyze(run).to_dict()
    assert {e["outcome"]: e["requests"] for e in doc["requests"]["excluded"]} == {"aborted": 1, "incomplete": 1}

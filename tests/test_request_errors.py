"""Why requests failed, as each source says it: the HTTP status and error text kept per request (``requests``
columns ``error_code`` and ``error``), grouped by ``requests_errors`` and shown beside the requests the run's
figures leave out.

Expected values come from the raw files read with the json module; the shapes of the fixtures come from each
client's source (cited at each).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest
from conftest import SAMPLES, data_file

import lltrace
from lltrace.analysis.requests_section import cause_label
from lltrace.documents.attribution import Excluded
from lltrace.parsers._io import ERROR_TEXT_LIMIT, error_line
from lltrace.reports.analysis_lines import cause_lines


def _causes(path_or_paths: Any, store: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    paths = path_or_paths if isinstance(path_or_paths, list) else [path_or_paths]
    run = lltrace.ingest([str(p) for p in paths], store=store)
    doc = lltrace.analyze(run).to_dict()
    return run.table("requests").to_dicts(), doc


@pytest.mark.parametrize("name", ["individual__lepton_70b.json", "individual__bedrock_70b.json"])
def test_llmperf_failures_keep_their_status_and_message(name: str, tmp_path: Path) -> None:
    """LLMPerf keeps a refused request's HTTP status as ``error_code`` and its body (or a streamed error's message)
    as ``error_msg`` (``openai_chat_completions_client.py``); every failed record's pair is on its request."""
    path = data_file("serving", "llmperf", name)
    raw = json.loads(path.read_text())
    failed = [r for r in raw if r["error_code"] not in (None, 0) or r["error_msg"]]
    assert failed, "the file has failures"
    rows, doc = _causes(path, tmp_path / "store")
    by_index = {r["client_index"]: r for r in rows}
    for i, r in enumerate(raw):
        row = by_index[i]
        if r in failed:
            assert (row["error_code"], row["error"]) == (r["error_code"], r["error_msg"] or None)
        else:
            assert (row["error_code"], row["error"]) == (None, None)
    (excluded,) = doc["requests"]["excluded"]
    codes = Counter(r["error_code"] for r in failed)
    assert [(c["error_code"], c["requests"]) for c in excluded["causes"]] == codes.most_common()
    assert excluded["no_cause_given"] == 0 and excluded["other_causes"] == 0
    for c in excluded["causes"]:
        texts = {r["error_msg"] for r in failed if r["error_code"] == c["error_code"] and r["error_msg"]}
        assert c["texts"] == len(texts) and (c["error"] in texts if texts else c["error"] is None)


def test_lepton_run_says_it_was_rate_limited(tmp_path: Path) -> None:
    """The 130 failures of the Lepton run are HTTP 429: the terminal says so under the requests left out."""
    path = data_file("serving", "llmperf", "individual__lepton_70b.json")
    raw = json.loads(path.read_text())
    n = sum(r["error_code"] == 429 for r in raw)
    _, doc = _causes(path, tmp_path / "store")
    (excluded,) = doc["requests"]["excluded"]
    assert excluded["causes"][0]["cause"] == "HTTP 429 Too Many Requests"
    assert cause_lines(msgspec.convert(excluded, Excluded)) == [f"{n} HTTP 429 Too Many Requests"]


def test_aiperf_cancellations_keep_aiperfs_error_details(tmp_path: Path) -> None:
    """AIPerf's ``ErrorDetails`` (code, type, message) of each cancelled record (``RequestCancellationError``,
    code 499) is on its request; the cancellation is the outcome, the code and text its cause."""
    path = data_file("serving", "aiperf", "aiperf-2025-10_gpt-oss-20b_c100_cancel10.profile_export.jsonl")
    raw = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    errors = [r["error"] for r in raw if r.get("error")]
    rows, doc = _causes(path, tmp_path / "store")
    got = sorted((r["error_code"], r["error"]) for r in rows if r["error"] is not None)
    assert got == sorted((e["code"], f"{e['type']}: {e['message']}") for e in errors)
    (excluded,) = doc["requests"]["excluded"]
    assert excluded["outcome"] == "cancelled" and excluded["requests"] == len(errors)
    (cause,) = excluded["causes"]
    assert (cause["cause"], cause["requests"]) == ("HTTP 499", len(errors))


def _bench_with_failures(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A real ``vllm bench serve --save-detailed`` result (run A) with three requests turned into failures as
    vLLM's client records them (``backend_request_func.py``: ``response.reason`` for a status that is not 200,
    ``traceback.format_exception`` of an exception), the figures the client then writes for them (0 tokens, no
    latency) and the summary's counts."""
    src = data_file("vllm_cpu", "A_baseline", "bench", "bench_random_200req_rate4.json")
    d = json.loads(src.read_text())
    tb = (
        'Traceback (most recent call last):\n  File "backend_request_func.py", line 120, in async_request\n'
        "    async for chunk_bytes in response.content:\n"
        "aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected\n"
    )
    for i, err in ((3, "Too Many Requests"), (7, "Too Many Requests"), (11, tb)):
        d["errors"][i] = err
        d["output_lens"][i] = 0
        d["ttfts"][i] = 0.0
        d["latencies"][i] = 0.0
        d["itls"][i] = []
    d["completed"] -= 3
    d["failed"] = 3
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(d))
    return path, d


def test_vllm_bench_failures_keep_the_clients_text(tmp_path: Path) -> None:
    """vLLM's bench client keeps the reason phrase of a refused request and the whole traceback of an exception:
    the phrase as it is, with the status it is the standard phrase of; the traceback as its last line (the
    exception), with no status."""
    path, raw = _bench_with_failures(tmp_path)
    rows, doc = _causes(path, tmp_path / "store")
    failed = {r["client_index"]: r for r in rows if r["status"] == "error"}
    assert sorted(failed) == [i for i, e in enumerate(raw["errors"]) if e]
    assert [(failed[i]["error_code"], failed[i]["error"]) for i in (3, 7)] == [(429, "Too Many Requests")] * 2
    assert failed[11]["error"] == "aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected"
    assert failed[11]["error_code"] is None
    (excluded,) = doc["requests"]["excluded"]
    assert [(c["cause"], c["requests"]) for c in excluded["causes"]] == [
        ("HTTP 429 Too Many Requests", 2),
        ("aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected", 1),
    ]
    assert doc["requests"]["counted"] == raw["completed"]


def test_vllm_bench_failures_keep_their_text_through_the_join_with_spans(tmp_path: Path) -> None:
    """The same bench file beside run A's engine spans: the failed requests' text survives the join (a refused
    request never reached the engine: no span; its client record is kept, counted as failed, once)."""
    path, raw = _bench_with_failures(tmp_path)
    otlp = data_file("vllm_cpu", "A_baseline", "otlp", "traces.otlp.jsonl")
    rows, doc = _causes([path, otlp], tmp_path / "store")
    texts = Counter(r["error"] for r in rows if r["status"] == "error")
    assert texts == Counter(error_line(e) for e in raw["errors"] if e)


def test_inference_perf_error_type_gives_the_status(tmp_path: Path) -> None:
    """inference-perf's ``ErrorResponseInfo``: ``error_type`` is ``f"HTTP Error {response.status}"`` for a
    response that was not 200 (``f"{response.status} {response.reason}"`` before #601) and the exception's class
    name otherwise; ``error_msg`` the body (its OpenAI-style ``message`` kept, as ``reportgen``'s
    ``parse_error_message`` reads it) or ``str(e)`` (``client/modelserver/openai_client.py``); the per-request
    report writes each as ``{start_time, end_time, request, response, info, error}`` (``reportgen/base.py``)."""

    def record(i: int, error: dict | None) -> dict[str, Any]:
        start = 100.0 + i
        return {
            "start_time": start,
            "end_time": start + 0.5,
            "request": "{}",
            "response": "",
            "info": {"request_metrics": {"text": {"input_tokens": 10}}, "response_metrics": {"output_tokens": 4}},
            "error": error,
        }

    vllm_body = '{"object":"error","message":"rate limited","type":"RateLimitError","param":null,"code":429}'
    openai_body = '{"error":{"message":"max_tokens is too large","type":"BadRequestError","code":400}}'
    records = [
        record(0, None),
        record(1, {"error_type": "429 Too Many Requests", "error_msg": vllm_body}),
        record(2, {"error_type": "ClientConnectorError", "error_msg": "Cannot connect to host 127.0.0.1:8000"}),
        record(3, {"error_type": "HTTP Error 400", "error_msg": openai_body}),
        record(4, {"error_type": "HTTP Error 502", "error_msg": "<html>Bad Gateway</html>"}),
    ]
    path = tmp_path / "per_request_lifecycle_metrics.json"
    path.write_text(json.dumps(records))
    rows = sorted(_causes(path, tmp_path / "store")[0], key=lambda r: r["client_index"])
    assert [(r["error_code"], r["error"]) for r in rows] == [
        (None, None),
        (429, "429 Too Many Requests: rate limited"),
        (None, "ClientConnectorError: Cannot connect to host 127.0.0.1:8000"),
        (400, "HTTP Error 400: max_tokens is too large"),
        (502, "HTTP Error 502: <html>Bad Gateway</html>"),
    ]


def test_guidellm_errors_of_each_schema(tmp_path: Path) -> None:
    """guidellm's error text is ``str`` of the exception: on the errored request itself in 0.3
    (``GenerativeTextErrorStats.error``), in its ``info`` from 0.4 (``RequestInfo.error``); an HTTP status error
    is httpx's ``"Client error '429 Too Many Requests' for url '...'"`` and a line of help after it."""
    t0 = 1_760_000_000.0
    httpx = (
        "Client error '429 Too Many Requests' for url 'http://127.0.0.1:8000/v1/completions'\n"
        "For more information check: https://developer.mozilla.org/en-US/docs/Web/HTTP/Status/429"
    )

    def request(i: int, **extra: Any) -> dict[str, Any]:
        return {
            "request_id": f"g{i}",
            "request_start_time": t0 + i,
            "request_end_time": t0 + i + 0.5,
            "prompt_tokens": 8,
            "output_tokens": 0,
            **extra,
        }

    new = [request(1, info={"error": httpx}), request(2, info={"error": "TimeoutError: timed out"})]
    old = [{"request_id": "g3", "start_time": t0 + 3, "end_time": t0 + 3.2, "error": httpx}]
    for name, errored in (("new", new), ("old", old)):
        bench = {"requests": {"successful": [request(0)], "incomplete": [], "errored": errored}, "metrics": {}}
        path = tmp_path / name / "benchmarks.json"
        path.parent.mkdir()
        path.write_text(json.dumps({"benchmarks": [bench]}))
        rows = {r["request_id"]: r for r in _causes(path, tmp_path / name / "store")[0]}
        assert (rows["g0"]["error_code"], rows["g0"]["error"]) == (None, None)
        for r in errored:
            row = rows[r["request_id"]]
            text = r.get("error") or r["info"]["error"]
            if text == httpx:
                assert (row["error_code"], row["error"]) == (429, httpx.splitlines()[0])
            else:
                assert (row["error_code"], row["error"]) == (None, text)


def test_error_text_on_one_line() -> None:
    tb = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nValueError: bad prompt\n\n'
    assert error_line(tb) == "ValueError: bad prompt"
    assert error_line("  a\n  b\tc ") == "a b c"
    assert error_line("") is None and error_line(None) is None and error_line("  \n") is None
    long = "x" * (ERROR_TEXT_LIMIT + 50)
    cut = error_line(long)
    assert len(cut) == ERROR_TEXT_LIMIT and cut.endswith("\u2026")


def test_cause_labels() -> None:
    assert cause_label(429, None) == "HTTP 429 Too Many Requests"
    assert cause_label(499, "x") == "HTTP 499"  # no standard phrase (nginx's and AIPerf's client-closed)
    assert cause_label(-100, "Output too few tokens 3") == "code -100"
    assert cause_label(None, "Bad Request") == "Bad Request"


def test_report_says_why_requests_were_left_out_as_the_terminal_does(tmp_path: Path) -> None:
    """The HTML report names the requests left out and their causes in the terminal's words."""
    import re

    from typer.testing import CliRunner

    from lltrace.cli import app

    path = str(data_file("serving", "llmperf", "individual__lepton_70b.json"))
    store, out = tmp_path / "store", tmp_path / "r.html"
    runner = CliRunner()
    r = runner.invoke(app, ["report", "--store", str(store), path, "-o", str(out)])
    assert r.exit_code == 0, r.output
    shown = dict(re.findall(r"data-key='([\w.]+)'>([^<]+)<", out.read_text()))
    said = shown["requests.excluded.failed"]
    assert said.startswith("Left out of the figures: 130 failed") and "(130 HTTP 429 Too Many Requests)" in said
    terminal = runner.invoke(app, ["analyze", "--store", str(store), path]).stdout
    assert "130 HTTP 429 Too Many Requests" in terminal


def test_a_real_vllm_run_that_refused_requests(tmp_path: Path) -> None:
    """lltrace's own run E400_refused (``sample_traces/vllm_cpu_limits``): a 256-token context and prompts of 120 to
    280 tokens. vLLM refused every prompt longer than the context with 400 (its access lines) and served the rest;
    its bench client kept the reason phrase. The run's figures count the served requests, once each, and say the
    rest were refused with 400."""
    run_dir = SAMPLES / "vllm_cpu_limits" / "E400_refused"
    raw = json.loads((run_dir / "bench" / "bench.json").read_text())
    refused = [n for n, e in zip(raw["input_lens"], raw["errors"], strict=True) if e]
    assert refused and all(n > 256 for n in refused)
    assert all(n <= 256 for n, e in zip(raw["input_lens"], raw["errors"], strict=True) if not e)
    access = (run_dir / "server.log").read_text().count('"POST /v1/completions HTTP/1.1" 400 Bad Request')
    assert access == len(refused) == raw["failed"]
    rows, doc = _causes([run_dir], tmp_path / "store")
    assert len(rows) == len(raw["input_lens"]) and doc["requests"]["counted"] == raw["completed"]
    failed = [r for r in rows if r["status"] == "error"]
    assert sorted(r["input_tokens"] for r in failed) == sorted(refused)
    assert {(r["error_code"], r["error"]) for r in failed} == {(400, "Bad Request")}
    (excluded,) = doc["requests"]["excluded"]
    # when they arrived: the client's send times, from the run's first (a send: it precedes its span's arrival)
    t0 = min(raw["start_times"])
    sent = [t - t0 for t, e in zip(raw["start_times"], raw["errors"], strict=True) if e]
    (cause,) = excluded["causes"]
    assert cause["first_arrival_s"] == pytest.approx(min(sent), abs=0.005)
    assert cause["last_arrival_s"] == pytest.approx(max(sent), abs=0.005)
    (line,) = cause_lines(msgspec.convert(excluded, Excluded))
    assert line.startswith(f"{len(refused)} HTTP 400 Bad Request, arrived ") and line.endswith(" s into the run")


_HTTP = re.compile(r"^http_requests_total\{([^}]*)\} (\S+)$", re.M)


def _raw_http(scrape: Path) -> dict[str, float]:
    """A scrape's ``http_requests_total`` summed per status class, read with a regex (not lltrace's parser)."""
    out: dict[str, float] = {}
    for labels, value in _HTTP.findall(scrape.read_text()):
        status = dict(re.findall(r'(\w+)="([^"]*)"', labels))["status"]
        out[status] = out.get(status, 0.0) + float(value)
    return out


def test_the_api_servers_responses_from_its_scrapes(tmp_path: Path) -> None:
    """E400_refused's /metrics scrapes alone (no client file, no spans): vLLM's API server counts its responses by
    status class (``http_requests_total``, prometheus-fastapi-instrumentator); the run's 4xx are the requests the
    bench client recorded as refused, and a class the page does not list yet has counted none (the instrumentator
    makes a series at its first response)."""
    run_dir = SAMPLES / "vllm_cpu_limits" / "E400_refused"
    scrapes = sorted((run_dir / "metrics").glob("*.prom")) + [run_dir / "metrics_final.prom"]
    raw = json.loads((run_dir / "bench" / "bench.json").read_text())
    run = lltrace.ingest([*scrapes], store=tmp_path / "store")
    got = sorted(run.table("engine_stats").to_dicts(), key=lambda r: r["ts_s"])
    assert len(got) == len(scrapes)
    for row, scrape in zip(got, scrapes, strict=True):
        want = _raw_http(scrape)
        assert [row[f"http_{k}xx_total"] for k in "245"] == [want.get(f"{k}xx", 0.0) for k in "245"]
    assert not _raw_http(scrapes[0])  # before the first request: no series at all, counted as 0
    final = _raw_http(scrapes[-1])
    doc = lltrace.analyze(run).to_dict()
    hist = doc["engine_latency"]
    assert (hist["http_2xx"], hist["http_4xx"], hist["http_5xx"]) == (final["2xx"], final["4xx"], 0)
    assert hist["http_4xx"] == raw["failed"]
    from lltrace.documents.rows import EngineLatencyHistogramsRow
    from lltrace.reports.analysis_lines import api_responses_line

    assert api_responses_line(msgspec.convert(hist, EngineLatencyHistogramsRow)).endswith(
        f"{final['4xx'] / sum(final.values()):.1%} refused or failed"
    )
    week = lltrace.weekly(store=tmp_path / "store", window="hour")
    assert week["figures"] == "engine histograms" and sum(w["failed"] for w in week["windows"]) == raw["failed"]


def test_the_api_servers_responses_from_a_query_range_answer(tmp_path: Path) -> None:
    """The same scrapes as a Prometheus server's ``query_range`` answer (each series at the scrape times where
    the page lists it): the counter's increase over the answer, as Prometheus's own ``increase()`` reads a series
    that appears mid-range (from its first sample)."""
    run_dir = SAMPLES / "vllm_cpu_limits" / "E400_refused"
    scrapes = sorted((run_dir / "metrics").glob("*.prom")) + [run_dir / "metrics_final.prom"]
    result: dict[tuple, list] = {}
    for scrape in scrapes:
        text = scrape.read_text()
        ts = float(re.search(r"^# scrape_unix_ts (\S+)", text, re.M).group(1))
        for name, labels, value in re.findall(r"^((?:vllm:|http_requests_total)[\w:]*)\{([^}]*)\} (\S+)$", text, re.M):
            lab = tuple(sorted({**dict(re.findall(r'(\w+)="([^"]*)"', labels)), "instance": "r:8000"}.items()))
            result.setdefault((name, lab), []).append([ts, value])
    answer = [{"metric": {"__name__": n, **dict(lab)}, "values": v} for (n, lab), v in result.items()]
    path = tmp_path / "query_range.json"
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": answer}}))
    run = lltrace.ingest([path], store=tmp_path / "store")
    rows = run.sql("SELECT http_4xx, http_5xx FROM engine_windows(NULL, NULL, NULL)").rows()
    first_4xx = next(float(v) for (n, lab), vals in result.items() for _, v in vals[:1] if ("status", "4xx") in lab)
    assert rows == [(_raw_http(scrapes[-1])["4xx"] - first_4xx, None)]


def test_diff_says_how_many_requests_failed_on_each_side(tmp_path: Path) -> None:
    """``lltrace diff`` of F_slots (none failed) against E400_refused (8 of 60 refused): each side's failed
    requests among its requests, from the raw bench files, in the document and its verdict."""
    limits = SAMPLES / "vllm_cpu_limits"
    base = lltrace.ingest([limits / "F_slots"], store=tmp_path / "s")
    inc = lltrace.ingest([limits / "E400_refused"], store=tmp_path / "s")
    raw = json.loads((limits / "E400_refused" / "bench" / "bench.json").read_text())
    n_base = len(json.loads((limits / "F_slots" / "bench" / "bench.json").read_text())["input_lens"])
    doc = lltrace.diff(base, inc, store=tmp_path / "s")
    assert doc["failures"]["baseline"] == {"requests": n_base, "failed": 0, "basis": "requests"}
    assert doc["failures"]["incident"] == {"requests": len(raw["errors"]), "failed": raw["failed"], "basis": "requests"}
    assert f"Failed requests: 0 of {n_base} -> {raw['failed']} of {len(raw['errors'])}." in doc["verdict"]

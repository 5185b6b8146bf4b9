"""Joining a client that kept no send times (toolkit/ingest/order.py): its records in the order it sent them,
aligned with the engine's arrivals. Checked on a real SGLang bench_serving run against what its raw files say,
and on every shared run that has ids: their vLLM bench files without ``start_times`` and with the span ids
replaced give the id join's pairs, but for requests the measures cannot tell apart (ties)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES
from test_join_features import RUNS_WITH_IDS, _random_id, copy_run, pairs_of

import lltrace
from lltrace.ingest.order import align_in_order

SGLANG_RUN = SAMPLES / "vllm_cpu_limits" / "Q_sglang_bench"


def _raw_spans(folder: Path) -> list[dict]:
    """The run's llm_request spans as the OTLP file has them, in arrival (start) order."""
    out = []
    for line in (folder / "otlp" / "traces.otlp.jsonl").read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    if sp["name"] == "llm_request":
                        a = {x["key"]: next(iter(x["value"].values())) for x in sp["attributes"]}
                        out.append({"start": int(sp["startTimeUnixNano"]), "id": a["gen_ai.request.id"], **a})
    return sorted(out, key=lambda s: s["start"])


def test_a_real_sglang_bench_without_send_times_joins_its_spans_in_the_order_it_sent(tmp_path):
    bench = json.loads((SGLANG_RUN / "bench" / "sglang_bench.jsonl").read_text().splitlines()[0])
    spans = _raw_spans(SGLANG_RUN)
    log = (SGLANG_RUN / "bench" / "sglang_bench.client.log").read_text()
    assert "warmup_requests=1" in log and "start_times" not in bench and len(spans) == len(bench["ttfts"]) + 1
    # from the raw files: the first span is the client's warm-up, then the i-th record is the (i + 1)-th arrival:
    # each of the 80 records' own output count is that span's, and it saw its first token after the engine made it
    expected = {i: spans[i + 1]["id"] for i in range(len(bench["ttfts"]))}
    outs = [int(s["gen_ai.usage.completion_tokens"]) for s in spans[1:]]
    assert bench["output_lens"] == outs and len(set(outs)) > 10
    assert all(
        t >= float(s["gen_ai.latency.time_to_first_token"]) for t, s in zip(bench["ttfts"], spans[1:], strict=True)
    )
    run = lltrace.ingest([SGLANG_RUN], store=tmp_path / "s")
    got = dict(run.sql("SELECT client_index, request_id FROM requests WHERE matched_by = 'order'").rows())
    assert got == expected
    (client,) = run.metadata["join"]["clients"]
    assert (client["method"], client["matched"], client["unmatched"]) == ("order", 80, 0)
    assert run.metadata["join"]["unmatched_spans"] == 1  # the warm-up, on its own row
    assert not run.metadata["skipped"]  # its console output is read: its result table, the same run as the file's
    (printed,) = [s for s in run.metadata["sources"] if s["format"] == "sglang-bench-log"]
    assert printed["version"].endswith("the same run as sglang_bench.jsonl (read from there)")
    doc = lltrace.analyze([SGLANG_RUN], store=tmp_path / "s").to_dict()
    assert doc["requests"]["count"] == 81  # each request once: 80 joined and the warm-up, not 80 + 81
    # the joined rows keep the client's own TTFTs: they give SGLang's statistics (numpy's, as its code computes them)
    ttft = np.array(run.sql("SELECT ttft_s FROM requests WHERE matched_by = 'order'").rows()).ravel() * 1e3
    assert [ttft.mean(), np.median(ttft), np.percentile(ttft, 99)] == pytest.approx(
        [bench["mean_ttft_ms"], bench["median_ttft_ms"], bench["p99_ttft_ms"]], rel=1e-12
    )


@pytest.mark.parametrize("name", RUNS_WITH_IDS)
def test_without_send_times_the_same_pairs_as_the_id_join(name, tmp_path):
    reference = pairs_of(lltrace.ingest([copy_run(name, tmp_path / "ref", random_ids=False)], store=tmp_path / "r"))
    folder = copy_run(name, tmp_path / "run")
    for f in (folder / "bench").glob("*.json"):
        d = json.loads(f.read_text())
        del d["start_times"]  # as SGLang's lists, and vLLM's before they had them
        f.write_text(json.dumps(d))
    run = lltrace.ingest([folder], store=tmp_path / "s")
    back = {_random_id(r): r for r in reference.values()}
    got = {k: back[v] for k, v in pairs_of(run).items()}
    clients = run.metadata["join"]["clients"]
    assert all(c["method"] == "order" and c["unmatched"] == 0 for c in clients), clients
    assert set(got) == set(reference)
    differ = sum(got[k] != reference[k] for k in reference)
    assert differ <= sum(c["ties"] for c in clients)  # only requests the measures cannot tell apart
    assert differ <= 0.02 * len(reference)


def _side(ttft, out, e2e=None):
    n = len(ttft)
    return {
        "ttft_s": np.array(ttft, float),
        "e2e_s": np.full(n, np.nan) if e2e is None else np.array(e2e, float),
        "input_tokens": np.full(n, np.nan),
        "output_tokens": np.array(out, float),
    }


def test_a_failed_request_and_another_clients_request_are_passed_over():
    """Engine records: a warm-up, then the client's requests with one of another client's in between; the client's
    third request never reached the engine (it failed)."""
    rng = np.random.default_rng(7)
    n = 40
    ttft = rng.uniform(0.02, 0.2, n)
    out = rng.integers(16, 64, n)
    keep = [i for i in range(n) if i != 3]
    e_ttft = [0.5] + [ttft[i] - 0.004 for i in keep[:20]] + [0.3] + [ttft[i] - 0.004 for i in keep[20:]]
    e_out = [32] + [out[i] for i in keep[:20]] + [999] + [out[i] for i in keep[20:]]
    engine = _side(e_ttft, e_out) | {"arrival_s": np.arange(len(e_ttft)) * 0.25}
    pairs, systematic, _ = align_in_order(_side(ttft, out), engine, client_errors=1)
    where = {i: k + 1 + (k >= 20) for k, i in enumerate(keep)}
    assert dict(pairs) == where
    assert systematic["ttft_s"] == pytest.approx(0.004)


def test_requests_that_crossed_on_the_way_are_paired_by_their_measures():
    """Two pairs of requests sent a moment apart reached the engine in the other order; elsewhere the engine
    arrivals are 250 ms apart, so nothing else may cross."""
    n = 24
    ttft = np.linspace(0.03, 0.2, n)
    out = np.arange(n) + 20
    order = list(range(n))
    order[5], order[6] = 6, 5
    order[15], order[16] = 16, 15
    arrival = np.arange(n) * 0.25
    arrival[6], arrival[16] = arrival[5] + 0.0005, arrival[15] + 0.0005
    engine = _side([ttft[i] - 0.003 for i in order], [out[i] for i in order]) | {"arrival_s": arrival}
    pairs, _, tied = align_in_order(_side(ttft, out), engine)
    assert dict(pairs) == {i: order.index(i) for i in range(n)} and not tied


def test_client_records_nothing_joins_or_places_are_not_counted_twice(tmp_path):
    """A real LLMPerf file (no ids, no send times, listed as the requests completed) beside real spans: nothing
    pairs them, and nothing can tell its records from the engine's, so they are kept but not counted."""
    from conftest import DATA

    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copytree(SGLANG_RUN / "otlp", folder / "otlp")
    llmperf = DATA / "serving" / "llmperf" / "individual__bedrock_70b.json"
    (folder / llmperf.name).symlink_to(llmperf)
    records = json.loads(llmperf.read_text())
    ok = sum(1 for r in records if not r.get("error_code"))
    doc = lltrace.analyze([folder], store=tmp_path / "s").to_dict()
    spans = len(_raw_spans(SGLANG_RUN))
    assert doc["requests"]["count"] == spans + len(records)
    assert doc["requests"]["counted"] == spans
    excluded = {e["outcome"]: e["requests"] for e in doc["requests"]["excluded"]}
    assert excluded == {"unjoined": ok, "failed": len(records) - ok}
    (client,) = doc["run"]["join"]["clients"]
    assert client["matched"] == 0 and client["not_counted"] == ok


def test_a_real_sglang_rate_sweep_file_joins_each_run_to_its_own_spans(tmp_path):
    """lltrace's own R_sglang_rates: two bench_serving runs appended to one file (40 requests at 4 req/s, then 40 at
    16 req/s) with one seed, so both runs have the same sizes in the same order: only the order of the runs can
    tell them apart. From the raw files: each run's unlisted warm-up comes first, then its 40 requests."""
    folder = SAMPLES / "vllm_cpu_limits" / "R_sglang_rates"
    lines = [json.loads(x) for x in (folder / "bench" / "sglang_bench.jsonl").read_text().splitlines()]
    assert [d["request_rate"] for d in lines] == [4.0, 16.0] and lines[0]["output_lens"] == lines[1]["output_lens"]
    assert (folder / "bench" / "sglang_bench.client.log").read_text().count("warmup_requests=1") == 4  # 2 per run
    spans = _raw_spans(folder)
    layout = {("sglang_bench.jsonl", i): spans[1 + i] for i in range(40)}
    layout |= {("sglang_bench.jsonl#1", i): spans[42 + i] for i in range(40)}
    out = {k: lines[k[0].endswith("#1")]["output_lens"][k[1]] for k in layout}
    assert all(int(s["gen_ai.usage.completion_tokens"]) == out[k] for k, s in layout.items())
    run = lltrace.ingest([folder], store=tmp_path / "s")
    got = {(c, i): r for c, i, r in run.sql("SELECT client_id, client_index, request_id FROM requests").rows() if c}
    assert got == {k: s["id"] for k, s in layout.items()}
    assert [(c["method"], c["matched"]) for c in run.metadata["join"]["clients"]] == [("order", 40), ("order", 40)]


def test_a_client_too_large_to_align_says_so(tmp_path, monkeypatch):
    """Beyond the alignment's size the records are left unjoined with that reason, not "no engine record in its
    place" (which would claim the alignment was tried): the real SGLang run with the limit set below its size."""
    from lltrace.ingest import order

    monkeypatch.setattr(order, "_CELLS", 100)
    run = lltrace.ingest([SGLANG_RUN], store=tmp_path / "s")
    (client,) = run.metadata["join"]["clients"]
    assert (client["method"], client["matched"], client["unmatched"]) == ("order", 0, 80)
    assert client["unmatched_why"].startswith("not aligned: 80 client records against 81 engine records")
    assert order.too_large(80, 81) and order.too_large(80, 81, 3) and not order.too_large(1, 1)

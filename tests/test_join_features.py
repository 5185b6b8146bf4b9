"""Joining client and engine records without ids in common (toolkit/ingest/match.py), checked against the id
join on every shared run that has ids: the same files with the span ids replaced, records deleted, the client
clock shifted."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, SAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import lltrace
from lltrace.cli import app
from lltrace.ingest.match import hungarian

RUNS_WITH_IDS = ("A_baseline", "B_kvpressure", "B2_kv2x", "D_chunked")


def _random_id(rid: str) -> str:
    """A gateway's id for the engine's request: nothing in common with the client's."""
    return "cmpl-" + hashlib.sha256(rid.encode()).hexdigest()[:16] + "-x"


def copy_run(
    run: str,
    out: Path,
    *,
    random_ids: bool = True,
    drop_spans: set[str] = frozenset(),
    drop_bench: set[tuple[str, int]] = frozenset(),
    shift_s: float = 0.0,
) -> Path:
    """The run's bench files and OTLP spans (only), as a gateway and a lossy exporter would have left them."""
    src = DATA / "vllm_cpu" / run
    (out / "bench").mkdir(parents=True)
    (out / "otlp").mkdir()
    for f in sorted((src / "bench").glob("*.json")):
        d = json.loads(f.read_text())
        n = len(d["input_lens"])
        keep = [i for i in range(n) if (f.name, i) not in drop_bench]
        for key, val in list(d.items()):
            if isinstance(val, list) and len(val) == n:
                d[key] = [val[i] for i in keep]
        d["start_times"] = [t + shift_s for t in d["start_times"]]
        d["num_prompts"] = d["completed"] = len(keep)
        (out / "bench" / f.name).write_text(json.dumps(d))
    lines = []
    for line in (src / "otlp" / "traces.otlp.jsonl").read_text().splitlines():
        doc = json.loads(line)
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                kept = []
                for sp in ss["spans"]:
                    attrs = {a["key"]: a for a in sp["attributes"]}
                    rid = attrs.get("gen_ai.request.id", {}).get("value", {}).get("stringValue")
                    if sp["name"] == "llm_request" and rid in drop_spans:
                        continue
                    if random_ids and rid is not None:
                        attrs["gen_ai.request.id"]["value"] = {"stringValue": _random_id(rid)}
                    kept.append(sp)
                ss["spans"] = kept
        lines.append(json.dumps(doc))
    (out / "otlp" / "traces.otlp.jsonl").write_text("\n".join(lines) + "\n")
    return out


def pairs_of(run: lltrace.Run) -> dict[tuple[str, int], str]:
    """(bench file, index) -> the engine's request id of each joined row."""
    rows = run.sql("SELECT client_id, client_index, request_id FROM requests WHERE matched_by IS NOT NULL").rows()
    return {(c, i): rid for c, i, rid in rows}


@pytest.fixture(scope="module")
def id_joined(tmp_path_factory):
    """The id join of each run's bench files and spans: the reference pairs and documents."""
    out = {}
    for name in RUNS_WITH_IDS:
        folder = copy_run(name, tmp_path_factory.mktemp(name) / "run", random_ids=False)
        store = tmp_path_factory.mktemp(f"{name}-store")
        run = lltrace.ingest([folder], store=store)
        assert {m for (m,) in run.sql("SELECT DISTINCT matched_by FROM requests").rows()} == {"request_id"}
        out[name] = (run, lltrace.analyze([folder], store=store).to_dict())
    return out


def _renamed_back(pairs: dict[tuple[str, int], str], originals: list[str]) -> dict[tuple[str, int], str]:
    back = {_random_id(r): r for r in originals}
    return {k: back[v] for k, v in pairs.items()}


@pytest.mark.parametrize("name", RUNS_WITH_IDS)
def test_without_ids_the_same_pairs_as_the_id_join_and_the_same_aggregates(name, id_joined, tmp_path):
    ref_run, ref_doc = id_joined[name]
    reference = pairs_of(ref_run)
    folder = copy_run(name, tmp_path / "run")
    run = lltrace.ingest([folder], store=tmp_path / "s")
    got = _renamed_back(pairs_of(run), list(reference.values()))
    by_features = run.sql("SELECT count(*) FROM requests WHERE matched_by = 'features'").item()
    assert len(got) == len(reference) and set(got) == set(reference)
    same = sum(got[k] == reference[k] for k in reference)
    assert same >= 0.98 * len(reference)
    join = run.metadata["join"]
    ties = sum(c["ties"] for c in join["clients"])
    assert len(reference) - same <= ties  # every pair that differs is one the features cannot tell apart
    assert all(c["method"] == "features" and c["unmatched"] == 0 for c in join["clients"]), join["clients"]
    assert by_features == len(reference)
    doc = lltrace.analyze([folder], store=tmp_path / "s").to_dict()
    for c in ("queue", "prefill", "decode", "overhead", "preempted"):
        assert doc["attribution"][c]["total_s"] == pytest.approx(ref_doc["attribution"][c]["total_s"], rel=1e-9)
    for m in ("ttft_s", "tpot_s", "e2e_s", "queue_s"):
        assert doc["requests"][m] == pytest.approx(ref_doc["requests"][m], rel=1e-9), m
    assert doc["requests"]["count"] == ref_doc["requests"]["count"] == len(reference)


@pytest.mark.parametrize("name", RUNS_WITH_IDS)
def test_records_one_side_lacks_are_exactly_the_unmatched(name, id_joined, tmp_path):
    reference = pairs_of(id_joined[name][0])
    rng = random.Random(name)
    keys = sorted(reference)
    drop_bench = set(rng.sample(keys, 5))
    rest = [k for k in keys if k not in drop_bench]
    lost = set(rng.sample(rest, 5))  # these bench records lose their spans
    folder = copy_run(name, tmp_path / "run", drop_bench=drop_bench, drop_spans={reference[k] for k in lost})
    run = lltrace.ingest([folder], store=tmp_path / "s")
    # the bench files were renumbered by the deletion: name each row by its original index
    index = {}
    for f, i in keys:
        index.setdefault(f, []).append(i)
    kept_index = {f: [i for i in sorted(idx) if (f, i) not in drop_bench] for f, idx in index.items()}
    rows = run.sql("SELECT client_id, client_index, request_id, matched_by FROM requests").rows()
    unmatched_bench = {(c, kept_index[c][i]) for c, i, _, how in rows if c is not None and how is None}
    unmatched_spans = {rid for c, _, rid, _ in rows if c is None}
    assert unmatched_bench == lost
    assert unmatched_spans == {_random_id(reference[k]) for k in drop_bench}
    join = run.metadata["join"]
    assert sum(c["unmatched"] for c in join["clients"]) == 5 and join["unmatched_spans"] == 5
    assert len(rows) == len(keys) - 10 + 10  # the joined pairs once each, the 5 + 5 unmatched on their own rows


@pytest.mark.parametrize("name", RUNS_WITH_IDS)
def test_a_shifted_client_clock_gives_the_same_pairs(name, tmp_path):
    runs = {}
    for shift in (0.0, 3.0):
        folder = copy_run(name, tmp_path / f"run{shift}", shift_s=shift)
        runs[shift] = lltrace.ingest([folder], store=tmp_path / f"s{shift}")
    a, b = (pairs_of(runs[s]) for s in (0.0, 3.0))
    assert a == b
    offsets = [c["clock_offset_s"] for s in (0.0, 3.0) for c in runs[s].metadata["join"]["clients"]]
    half = len(offsets) // 2
    assert all(y - x == pytest.approx(-3.0, abs=1e-6) for x, y in zip(offsets[:half], offsets[half:], strict=True))


def test_e_joins_every_request_on_what_both_saw(tmp_path):
    e = DATA / "vllm_cpu" / "E_prefix"
    runner = CliRunner()
    out = runner.invoke(app, ["analyze", str(e), "--store", str(tmp_path / "s"), "--verbose"])
    assert out.exit_code == 0, out.output
    assert "join: bench_pfx_120req_p512_s64_np4_out64_rate4.json: 120 of 120 on what both saw" in out.output
    assert "join residuals (median / p90): arrival 0.75 / 2.42 ms" in out.output
    doc = json.loads(runner.invoke(app, ["analyze", str(e), "--store", str(tmp_path / "s"), "--json", "-q"]).stdout)
    assert doc["requests"]["count"] == 120 and doc["requests"]["basis"] == "client"
    for c in ("queue", "prefill", "decode"):
        assert doc["attribution"][c]["basis"] == "measured"
    join = doc["run"]["join"]
    assert join["clients"][0]["method"] == "features" and join["clients"][0]["matched"] == 120
    # the ground truth's own join (arrival order): median residual 0.747 ms
    assert join["features"]["residuals"]["arrival"]["median"] == pytest.approx(0.000747, abs=2e-6)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 10_000))
def test_the_assignment_is_optimal(rows, cols, seed):
    """Most pairs, then the least cost: checked against every assignment of a small matrix."""
    from itertools import permutations

    rng = np.random.default_rng(seed)
    cost = rng.integers(0, 20, (rows, cols)).astype(float)
    cost[rng.random((rows, cols)) < 0.3] = np.inf
    got = hungarian(cost)
    assert len({r for r, _ in got}) == len(got) == len({c for _, c in got})
    best = (0, 0.0)
    small, large = (rows, cols) if rows <= cols else (cols, rows)
    for perm in permutations(range(large), small):
        pairs = [(i, perm[i]) if rows <= cols else (perm[i], i) for i in range(small)]
        finite = [cost[r, c] for r, c in pairs if np.isfinite(cost[r, c])]
        cand = (len(finite), -sum(finite))
        best = max(best, cand)
    assert (len(got), -sum(cost[r, c] for r, c in got)) == pytest.approx(best)


def _as_aiperf(run: str, out: Path, *, ids: str, skew_s: float = 0.25) -> Path:
    """The run's vLLM bench records written as an AIPerf profile export (its real line format): the same
    measurements, on a wall clock ``skew_s`` off the engine's, with the ids AIPerf would send (``ids``:
    "engine" = the suffix vLLM turns into cmpl-<id>-0, or "own" = AIPerf's uuids, which the engine never saw)."""
    src = DATA / "vllm_cpu" / run
    reference = lltrace.ingest([src / "bench", src / "otlp"], store=out / "ref-store")
    clock = reference.metadata["join"]["clock"]["offset_s"] + skew_s
    lines = []
    for f in sorted((src / "bench").glob("*.json")):
        d = json.loads(f.read_text())
        prefix = next(c["prefix"] for c in reference.metadata["join"]["clients"] if c["client_id"] == f.name)
        for i, start in enumerate(d["start_times"]):
            rid = f"{prefix}{i}" if ids == "engine" else hashlib.md5(f"{f.name}{i}".encode()).hexdigest()
            begin = round((start + clock) * 1e9)
            metrics = {
                "input_sequence_length": {"value": d["input_lens"][i], "unit": "tokens"},
                "output_sequence_length": {"value": d["output_lens"][i], "unit": "tokens"},
                "time_to_first_token": {"value": d["ttfts"][i] * 1e3, "unit": "ms"},
                "request_latency": {"value": d["latencies"][i] * 1e3, "unit": "ms"},
            }
            meta = {
                "x_request_id": rid,
                "request_start_ns": begin,
                "benchmark_phase": "profiling",
                "was_cancelled": False,
            }
            lines.append(json.dumps({"metadata": meta, "metrics": metrics}))
    path = out / "aiperf" / "profile_export.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("ids", ["engine", "own"])
def test_another_clients_records_join_the_spans_the_same_way(ids, id_joined, tmp_path):
    """An AIPerf export of D's requests with D's spans: one row per request, by id where the engine kept the
    client's, else on what both saw; the same pairs as the id join of the vLLM bench files."""
    reference = pairs_of(id_joined["D_chunked"][0])
    export = _as_aiperf("D_chunked", tmp_path, ids=ids)
    run = lltrace.ingest([export, DATA / "vllm_cpu" / "D_chunked" / "otlp"], store=tmp_path / "s")
    assert run.sql("SELECT count(*) FROM requests").item() == 130
    (client,) = run.metadata["join"]["clients"]
    assert client["method"] == ("request_id" if ids == "engine" else "features") and client["matched"] == 130
    # the export's rows are in file order: bench_long (30) then bench_short (100)
    by_index = dict(run.sql("SELECT client_index, request_id FROM requests").rows())
    files = sorted(f for f, _ in reference)
    expected = {}
    for f in files:
        start = 0 if f == files[0] else sum(1 for g, _ in reference if g == files[0])
        expected |= {start + i: rid for (g, i), rid in reference.items() if g == f}
    assert by_index == expected
    clock = next(a for a in run.metadata["clock"]["alignment"] if a["source"].endswith("client clock"))
    assert clock["offset_s"] == pytest.approx(-0.25, abs=0.005)  # the skew put in, found again


def test_an_engine_log_joins_a_client_the_same_way(id_joined, tmp_path):
    """D's spans written as TGI router log lines (its real line format: the finish time, total and queue time;
    no ids, no token counts) with D's vLLM bench files: joined on send/arrival and last-token times alone."""
    from datetime import datetime, timezone

    from conftest import raw_llm_spans

    reference = pairs_of(id_joined["D_chunked"][0])
    spans = raw_llm_spans("D_chunked")
    order = sorted(spans)
    lines = []
    for rid in order:
        sp, a = spans[rid]
        start = int(sp["startTimeUnixNano"]) / 1e9
        end = start + a["gen_ai.latency.e2e"]
        stamp = datetime.fromtimestamp(end, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lines.append(
            f"{stamp}  INFO generate{{parameters=...}}: text_generation_router::server: router/src/server.rs:305: "
            f'Success total_time="{a["gen_ai.latency.e2e"] * 1e3:.3f}ms" validation_time="10µs" '
            f'queue_time="{a["gen_ai.latency.time_in_queue"] * 1e3:.3f}ms" '
            f'inference_time="{(a["gen_ai.latency.e2e"] - a["gen_ai.latency.time_in_queue"]) * 1e3:.3f}ms" '
            f'time_per_token="5ms" seed="None"'
        )
    log = tmp_path / "tgi" / "router.log"
    log.parent.mkdir()
    log.write_text("\n".join(lines) + "\n")
    run = lltrace.ingest([DATA / "vllm_cpu" / "D_chunked" / "bench", log], store=tmp_path / "s")
    assert run.sql("SELECT count(*) FROM requests").item() == 130
    got = {
        (c, i): order[int(rid.rsplit(":", 1)[1])]
        for c, i, rid in run.sql(
            "SELECT client_id, client_index, request_id FROM requests WHERE matched_by = 'features'"
        ).rows()
    }
    assert set(got) == set(reference)
    ties = sum(c["ties"] for c in run.metadata["join"]["clients"])
    same = sum(got[k] == reference[k] for k in reference)
    assert same >= 0.98 * len(reference) and len(reference) - same <= ties


@pytest.mark.parametrize("name", [*RUNS_WITH_IDS, "E_prefix"])
def test_both_clock_offset_searches_find_the_same_offset_on_real_runs(name):
    """Short runs compare every sampled send with every arrival (the shorth); long ones cross-correlate the two
    arrival histograms. On each client file of the real runs both land on the id join's offset."""
    from conftest import raw_llm_spans

    from lltrace.ingest.match import _correlated_offset, _local_shorth, _nearest, _shorth_offset

    arrivals = np.sort([int(sp["startTimeUnixNano"]) / 1e9 for sp, _ in raw_llm_spans(name).values()])
    for f in sorted((DATA / "vllm_cpu" / name / "bench").glob("*.json")):
        sends = np.sort(json.loads(f.read_text())["start_times"])
        found = []
        coarse, width = _correlated_offset(sends, arrivals)
        for guess in (_shorth_offset(sends, arrivals), _local_shorth(sends, arrivals, coarse, 2 * width)):
            found.append(guess + float(np.median(_nearest(sends + guess, arrivals)[1])))
        residual = np.abs(_nearest(sends + found[0], arrivals)[1])
        assert abs(found[0] - found[1]) <= np.quantile(residual, 0.9), f.name


def test_guidellm_requests_join_the_vllm_spans_by_the_ids_the_engine_answered_with(tmp_path):
    """lltrace's own real run K_guidellm (sample_traces/vllm_cpu_limits): guidellm 0.8.1 against vLLM 0.32. guidellm's
    own request ids never reach the engine; each record's response_id is vLLM's id, which runs the prompt as
    <id>-0. Every record joins its span by that id, and with the response ids taken out the join on what both
    saw finds the same 80 pairs."""
    folder = SAMPLES / "vllm_cpu_limits" / "K_guidellm"
    doc = json.loads((folder / "bench" / "benchmarks.json").read_text())
    records = doc["benchmarks"][0]["requests"]["successful"]
    expect = {k: r["response_id"] + "-0" for k, r in enumerate(records)}
    run = lltrace.ingest([folder], store=tmp_path / "ids")
    rows = run.sql("SELECT client_index, request_id, engine_request_id, matched_by FROM requests").to_dicts()
    assert len(rows) == 80 and {r["matched_by"] for r in rows} == {"request_id"}
    assert {r["client_index"]: r["request_id"] for r in rows} == expect
    assert all(r["engine_request_id"] + "-0" == r["request_id"] for r in rows)
    (entry,) = run.metadata["join"]["clients"]
    assert entry["matched"] == 80 and "answered with" in entry["prefix_from"]

    blind = tmp_path / "blind"
    shutil.copytree(folder, blind)
    for r in doc["benchmarks"][0]["requests"]["successful"]:
        r["response_id"] = None
    (blind / "bench" / "benchmarks.json").write_text(json.dumps(doc))
    run = lltrace.ingest([blind], store=tmp_path / "features")
    rows = run.sql("SELECT client_index, request_id, matched_by FROM requests").to_dicts()
    assert {r["matched_by"] for r in rows} == {"features"}
    assert {r["client_index"]: r["request_id"] for r in rows} == expect

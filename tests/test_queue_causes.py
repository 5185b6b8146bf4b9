"""Why requests waited and the prefix cache, on the real vLLM CPU runs: every figure checked against the raw
files (the server log's Iteration(k) lines, the Prometheus counters, the ground truth of each run)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import DATA, SAMPLES
from typer.testing import CliRunner

import lltrace
from lltrace.cli import app

RUNS = ("A_baseline", "B_kvpressure", "B2_kv2x", "D_chunked", "E_prefix")
ITERATION = re.compile(
    r"Iteration\((\d+)\): (\d+) context requests, (\d+) context tokens, (\d+) generation requests, "
    r"(\d+) generation tokens"
)


def iterations(run_dir: Path) -> list[tuple[int, int, int, int, int]]:
    """(k, context requests, context tokens, generation requests, generation tokens) of each Iteration(k) line."""
    text = (run_dir / "server.log").read_text()
    return [tuple(int(x) for x in m.groups()) for m in ITERATION.finditer(text)]


def counter(prom: Path, name: str) -> float:
    """A counter's value in a Prometheus text file (one engine)."""
    (value,) = re.findall(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", prom.read_text(), re.MULTILINE)
    return float(value)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    store = tmp_path_factory.mktemp("store")
    out = {}
    for name in RUNS:
        run = lltrace.ingest([DATA / "vllm_cpu" / name], store=store)
        out[name] = (run, lltrace.analyze([DATA / "vllm_cpu" / name], store=store).to_dict())
    return out


def _share(doc: dict, part: str) -> float:
    return doc["attribution"][part]["share_of_parent"]


def test_d_waits_for_sequence_slots_not_kv_room(runs):
    run, doc = runs["D_chunked"]
    att = doc["attribution"]
    assert _share(doc, "slot_wait") >= 0.80 and _share(doc, "kv_wait") <= 0.05
    assert doc["classification"]["label"] == "decode-dominant"
    assert att["queue"]["share"] == pytest.approx(0.21, abs=0.01)  # the issue: D's queue is 21 % of e2e
    # the slot segments are the log's iterations at the 8-sequence cap (the ground truth: 508 of them)
    at_cap = sum(1 for _, cr, _, gr, _ in iterations(DATA / "vllm_cpu" / "D_chunked") if cr + gr == 8)
    assert at_cap == 508 and att["slot_wait"]["evidence"]["segments"] == at_cap
    assert att["slot_wait"]["evidence"]["max_num_seqs"]["value"] == 8
    assert att["slot_wait"]["evidence"]["max_num_seqs"]["basis"] == "stated"
    queue_advice = [a for a in doc["advice"] if a["expected_gain"]["metric"] == "mean queue time per request"]
    assert queue_advice[0]["setting"] == "max_num_seqs" and queue_advice[0]["bottleneck"] == "slots"
    g = queue_advice[0]["expected_gain"]
    assert g["from"] - g["to"] == pytest.approx(att["slot_wait"]["total_s"] / att["requests"])


def test_budget_full_steps_with_slots_free_are_budget_waits_on_every_run_that_has_them(runs):
    """D (512-token budget, stated) and B2 (2048, vLLM 0.32's CPU default) log steps at the budget."""
    for name, budget, seqs in (("D_chunked", 512, 8), ("B2_kv2x", 2048, 32)):
        run, doc = runs[name]
        raw = [it for it in iterations(DATA / "vllm_cpu" / name) if it[2] + it[4] == budget]
        free_slots = [it for it in raw if it[1] + it[3] < seqs]
        assert free_slots, name
        state = run.sql(
            "SELECT count(*) FILTER (WHERE budget_full), count(*) FILTER (WHERE cause = 'budget'), "
            "count(*) FILTER (WHERE budget_full AND NOT slots_full AND cause <> 'budget') FROM engine_state"
        ).row(0)
        # every step at the budget is flagged; those with a slot free are budget waits unless KV room was short
        assert state[0] == len(raw), name
        assert state[1] + state[2] == len(free_slots), name
        assert state[1] >= 1 and doc["attribution"]["budget_wait"]["total_s"] > 0, name
    assert runs["D_chunked"][0].sql("SELECT count(*) FROM engine_state WHERE cause = 'budget'").item() == 24
    # B2's last budget-full step ran at 94.9 % KV usage: the queue head's prompt did not fit, so that one is KV
    assert runs["B2_kv2x"][0].sql("SELECT count(*) FROM engine_state WHERE budget_full AND cause = 'kv'").item() == 1


def test_b_and_b2_stay_capacity_bound_on_kv_room(runs):
    for name in ("B_kvpressure", "B2_kv2x"):
        doc = runs[name][1]
        assert doc["classification"]["label"] == "capacity-bound", name
        assert _share(doc, "kv_wait") >= 0.5, name
        top = doc["advice"][0]
        assert (top["bottleneck"], top["setting"]) == ("room", "gpu_memory_utilization"), name
    b = runs["B_kvpressure"][1]
    assert b["advice"][0]["evidence"]["preemptions"] == 55 and b["advice"][0]["evidence"]["peak_usage"] == 1.0
    assert runs["B2_kv2x"][1]["kv"]["kv_wait_s"] < b["kv"]["kv_wait_s"]  # twice the KV cache, less waiting for it


def test_the_parts_of_queue_add_up_to_it_on_every_run(runs):
    for name, (run, doc) in runs.items():
        att = doc["attribution"]
        parts = [att[p]["total_s"] for p in ("kv_wait", "slot_wait", "budget_wait", "load_wait")]
        assert sum(p or 0 for p in parts) == pytest.approx(att["queue"]["total_s"], rel=1e-9, abs=1e-12), name
        assert all(p is None or 0 <= p <= att["queue"]["total_s"] + 1e-9 for p in parts), name
        per_request = run.sql(
            "SELECT max(coalesce(kv_wait_s, 0) + coalesce(slot_wait_s, 0) + coalesce(budget_wait_s, 0) "
            "+ load_wait_s - queue_s), min(load_wait_s) FROM attribution_queue_causes"
        ).row(0)
        assert abs(per_request[0]) < 1e-9 and per_request[1] >= 0, name


def test_a_without_an_iteration_log_says_what_it_cannot_split(runs):
    att = runs["A_baseline"][1]["attribution"]
    assert att["kv_wait"]["evidence"]["timeline"] == "the engine's metrics samples"
    # the budget is known (vLLM's default) but a timeline of samples has no per-step tokens to hold against it
    assert att["budget_wait"]["total_s"] is None and "no per-step token counts" in att["budget_wait"]["note"]
    # vLLM 0.32 on CPU: 128 sequences by default, never reached by A's 4 req/s
    assert att["slot_wait"]["evidence"]["max_num_seqs"] == {
        "value": 128.0,
        "basis": "default",
        "origin": "vLLM 0.32.0 default for the API server on CPU, 1 worker(s)",
    }


def test_e_prefix_cache_hit_rate_from_the_engine_counters(runs, tmp_path):
    e = DATA / "vllm_cpu" / "E_prefix"
    hits = counter(e / "metrics_final.prom", "vllm:prefix_cache_hits_total")
    queries = counter(e / "metrics_final.prom", "vllm:prefix_cache_queries_total")
    assert (hits, queries) == (59392, 69319)
    kv = runs["E_prefix"][1]["kv"]
    assert kv["prefix_cache_hit_rate"] == pytest.approx(hits / queries)
    assert round(kv["prefix_cache_hit_rate"], 3) == 0.857
    # the Iteration lines computed 9,927 of the 69,319 prompt tokens (the ground truth's consistency check)
    computed = sum(it[2] for it in iterations(e))
    assert computed == 9927 and kv["prefix_cached_share"] == pytest.approx(1 - computed / queries)
    runner = CliRunner()
    store = ["--store", str(tmp_path / "s")]
    shown = runner.invoke(app, ["analyze", str(e), *store])
    assert shown.exit_code == 0 and "hit rate 85.7% (59,392 of 69,319 queried tokens" in shown.output
    out = tmp_path / "e.html"
    assert runner.invoke(app, ["report", str(e), *store, "-o", str(out)]).exit_code == 0
    assert "<span data-key='kv.prefix_cache_hit_rate'>85.7%</span>" in out.read_text()


def test_e_cached_tokens_per_request_derived_from_the_iteration_log(runs):
    run, doc = runs["E_prefix"]
    got = run.sql("SELECT basis, cached_tokens, input_tokens FROM requests_cached_tokens")
    assert got.height == 120 and set(got["basis"]) == {"derived"}  # every engine request of E
    assert (got["cached_tokens"] % 128 == 0).all()  # whole 128-token blocks, as vLLM caches
    # they add up to the engine's own count of cached prompt tokens
    prom = DATA / "vllm_cpu" / "E_prefix" / "metrics_final.prom"
    assert got["cached_tokens"].sum() == counter(prom, "vllm:prompt_tokens_cached_total") == 59392
    # the four prefixes' first requests computed their whole prompt (the log's 577- and 579-token steps)
    cold = [it for it in iterations(DATA / "vllm_cpu" / "E_prefix") if it[1] == 1 and it[2] > 512]
    assert (got["cached_tokens"] == 0).sum() == len(cold) == 4
    assert doc["kv"]["prefix_cached_requests"] == 120 and doc["kv"]["prefix_cached_requests_basis"] == "derived"


def test_runs_with_preemptions_or_chunked_prompts_get_no_derived_cached_tokens(runs):
    for name in ("B_kvpressure", "B2_kv2x", "D_chunked"):
        assert runs[name][0].sql("SELECT count(*) FROM requests_cached_tokens").item() == 0, name


def test_engine_settings_resolved_once_with_their_basis(runs):
    def settings(name: str) -> dict:
        rows = runs[name][0].table("engine_config").to_dicts()
        return {r["setting"]: (r["value"], r["basis"]) for r in rows}

    d = settings("D_chunked")
    assert d["max_num_seqs"] == (8, "stated") and d["max_num_batched_tokens"] == (512, "stated")
    b = settings("B_kvpressure")
    # B's log: num_gpu_blocks_override 40, "KV cache size: 5,120 tokens"; the budget is vLLM 0.32's CPU default
    assert b["kv_blocks"] == (40, "stated") and b["kv_cache_tokens"] == (5120, "stated")
    assert b["block_size"][0] == 128 and b["max_num_batched_tokens"] == (2048, "default")
    assert b["max_num_seqs"] == (32, "stated")


def test_a_log_alone_resolves_what_the_metrics_state(tmp_path):
    """A's server log does not name the block size; vLLM's CPU default (128) gives the same KV blocks as A's own
    vllm:cache_config_info gauge."""
    a = DATA / "vllm_cpu" / "A_baseline"
    log_only = lltrace.ingest([a / "server.log", a / "otlp"], store=tmp_path)
    with_metrics = lltrace.ingest([a], store=tmp_path)

    def of(run: lltrace.Run) -> dict:
        return {r["setting"]: (r["value"], r["basis"]) for r in run.table("engine_config").to_dicts()}

    alone, stated = of(log_only), of(with_metrics)
    assert alone["block_size"] == (128, "default") and stated["block_size"] == (128, "stated")
    assert alone["kv_blocks"] == (16384, "derived") and stated["kv_blocks"] == (16384, "stated")


@pytest.mark.parametrize(
    ("name", "label", "part", "setting", "at_limit"),
    [
        # 4 sequence slots: queueing dominates e2e, all of it for a slot
        ("F_slots", "queue-bound", "slot_wait", "max_num_seqs", lambda it: it[1] + it[3] == 4),
        # a 128-token budget: the queue is 39 % of e2e (not dominant), nearly all of it for the budget
        ("G_budget", "balanced", "budget_wait", "max_num_batched_tokens", lambda it: it[2] + it[4] == 128),
    ],
)
def test_runs_bound_by_one_scheduler_limit(tmp_path, name, label, part, setting, at_limit):
    """lltrace's own real runs (sample_traces/vllm_cpu_limits), KV room never short in either."""
    folder = SAMPLES / "vllm_cpu_limits" / name
    doc = lltrace.analyze([folder], store=tmp_path).to_dict()
    assert doc["classification"]["label"] == label
    assert _share(doc, part) >= 0.8 and _share(doc, "kv_wait") <= 0.05
    first = next(a for a in doc["advice"] if a["expected_gain"]["metric"] == "mean queue time per request")
    assert first["setting"] == setting
    evidence = doc["attribution"][part]["evidence"]
    assert evidence["segments"] == sum(1 for it in iterations(folder) if at_limit(it))
    assert evidence[setting]["basis"] == "stated"


def test_prefix_cache_counts_every_prompt_token_of_each_run(runs):
    """vLLM looks up every prompt token in the prefix cache: the queried tokens are the run's prompt tokens
    (its final scrape's counter, timed or not), the hits its cached-token counter."""
    for name, (_, doc) in runs.items():
        prom = DATA / "vllm_cpu" / name / "metrics_final.prom"
        kv = doc["kv"]
        assert kv["prefix_cache_queried_tokens"] == counter(prom, "vllm:prompt_tokens_total"), name
        assert kv["prefix_cache_hit_tokens"] == counter(prom, "vllm:prefix_cache_hits_total"), name


def test_an_engine_span_that_reports_cached_tokens_is_measured(tmp_path):
    """Engines whose request spans carry gen_ai.usage.cached_tokens (the OpenTelemetry GenAI name): E's real spans
    with that attribute added to each are read as measured cached tokens, winning over the derived ones."""
    import json

    src = (DATA / "vllm_cpu" / "E_prefix" / "otlp" / "traces.otlp.jsonl").read_text().splitlines()
    out = []
    for line in src:
        doc = json.loads(line)
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    if sp["name"] == "llm_request":
                        sp["attributes"].append({"key": "gen_ai.usage.cached_tokens", "value": {"intValue": "256"}})
        out.append(json.dumps(doc))
    spans = tmp_path / "otlp" / "traces.otlp.jsonl"
    spans.parent.mkdir()
    spans.write_text("\n".join(out) + "\n")
    run = lltrace.ingest([spans, DATA / "vllm_cpu" / "E_prefix" / "server.log"], store=tmp_path / "s")
    got = run.sql(
        "SELECT basis, count(*), min(cached_tokens), max(cached_tokens) FROM requests_cached_tokens GROUP BY 1"
    )
    assert got.rows() == [("measured", 120, 256, 256)]
    assert run.sql("SELECT DISTINCT cached_basis FROM requests_latency").rows() == [("measured",)]


def test_data_parallel_engines_are_timelines_of_their_own(tmp_path):
    """vLLM's stats lines with data parallelism: each engine logs its own queue at the same second ("Engine 000",
    "Engine 001": vllm/v1/metrics/loggers.py's prefix, the line itself as the real excerpt has it). Each engine is
    its own timeline: the waiting requests' time is each engine's queue times its spacing, summed; not one
    timeline in which the two engines' lines alternate in whatever order ties are read. With requests beside
    them a request's queue is not split (no request says which engine held it)."""
    line = (
        "INFO 07-28 06:42:{s:02d} [loggers.py:118] Engine {e:03d}: Avg prompt throughput: 0.0 tokens/s, Avg "
        "generation throughput: 240.8 tokens/s, Running: 8 reqs, Waiting: {w} reqs, GPU KV cache usage: 93.9%, "
        "Prefix cache hit rate: 0.0%"
    )
    waiting = {0: [3, 5, 2, 0], 1: [40, 36, 30, 20]}  # engine -> its queue at 0, 10, 20, 30 s
    log = tmp_path / "dp.log"
    log.write_text("".join(line.format(s=10 * k, e=e, w=w[k]) + "\n" for k in range(4) for e, w in waiting.items()))
    run = lltrace.ingest([log], store=tmp_path / "store")
    got, timelines = run.sql("SELECT waiting_request_s, replicas FROM engine_queue_causes").row(0)
    assert timelines == 2 and got == pytest.approx(sum(10 * sum(w[:3]) for w in waiting.values()))


@pytest.mark.parametrize("name", RUNS)
def test_a_server_log_alone_says_what_the_queue_waited_for(name, tmp_path, runs):
    """The commonest input after an incident: the server log and nothing else. Its stamps have no year, so it is
    placed on its own clock (seconds from its first stamp), and the step log with the stats lines' waiting count
    splits the queue: the waiting requests' time is the engine's own queue-time sum (its Prometheus histogram,
    vllm:request_queue_time_seconds_sum, a source the log does not hold) within 10 % (the waiting count is read
    every 10 s), and the cause is each run's own: KV room in B and B2, sequence slots in D. The verdict is the one
    the whole run's measured requests give (B, B2 capacity-bound; D, E decode-dominant)."""
    run_dir = DATA / "vllm_cpu" / name
    run = lltrace.ingest([run_dir / "server.log"], store=tmp_path)
    first = run.sql("SELECT least((SELECT min(start_s) FROM engine_steps), (SELECT min(ts_s) FROM engine_stats))")
    assert -1 < first.item() < 60  # the log's own clock (a step starts before its stamp)
    assert any("its year unknown" in a["method"] for a in run.metadata["clock"]["alignment"])
    measured = counter(run_dir / "metrics_final.prom", "vllm:request_queue_time_seconds_sum")
    doc = lltrace.analyze(run).to_dict()
    causes = doc["engine_queue_causes"]
    # the verdict as the whole run's measured requests give it: the same label, the queue's share by Little's law
    # over the log within 5 points of the spans' own
    whole = runs[name][1]["classification"]
    if name == "A_baseline":  # its log has no Iteration lines: no step time to split, so no verdict
        assert doc["classification"] is None and not iterations(run_dir)
        return
    assert doc["classification"]["label"] == whole["label"]
    if whole["queue_share"] is not None:
        assert doc["classification"]["queue_share"] == pytest.approx(whole["queue_share"], abs=0.05)
    if measured < 1.0:  # A and E hardly queued
        assert causes is None or causes["waiting_request_s"] < 1.0
        return
    assert causes["basis"] == "steps" and causes["waiting_request_s"] == pytest.approx(measured, rel=0.10)
    top = max(("kv", "slot", "budget"), key=lambda c: causes[f"{c}_share"])
    assert top == {"B_kvpressure": "kv", "B2_kv2x": "kv", "D_chunked": "slot"}[name] and causes[f"{top}_share"] > 0.9


@pytest.mark.parametrize("name", ["B_kvpressure", "B2_kv2x", "D_chunked"])
def test_a_default_server_log_of_stats_lines_alone(name, tmp_path, runs):
    """vLLM's log as it is by default: its 10-s stats lines and no Iteration lines (those are opt-in: the real log
    with them taken out). The waiting requests' time is still the engine's own queue-time sum within 10 %, the
    cause is still the run's own (D's sequence slots from the log's max_num_seqs); a queue-bound run is named
    (B, B2 capacity-bound, as the whole run's spans say) and a run that is not gets no verdict, as load samples
    cannot tell prefill from decode."""
    run_dir = DATA / "vllm_cpu" / name
    log = tmp_path / "server.log"
    log.write_text("".join(ln for ln in (run_dir / "server.log").open() if "Iteration(" not in ln))
    doc = lltrace.analyze([log], store=tmp_path / "store").to_dict()
    causes = doc["engine_queue_causes"]
    measured = counter(run_dir / "metrics_final.prom", "vllm:request_queue_time_seconds_sum")
    assert causes["basis"] == "samples" and causes["waiting_request_s"] == pytest.approx(measured, rel=0.10)
    top = "slot" if name == "D_chunked" else "kv"
    assert causes[f"{top}_share"] > 0.9
    whole = runs[name][1]["classification"]
    if whole["label"] == "capacity-bound":
        assert doc["classification"]["label"] == "capacity-bound"
        assert doc["classification"]["queue_share"] == pytest.approx(whole["queue_share"], abs=0.05)
    else:
        assert doc["classification"] is None


@pytest.mark.parametrize("name", ["B_kvpressure", "B2_kv2x", "D_chunked"])
def test_a_server_log_with_the_bench_files_names_what_the_queue_waited_for(name, tmp_path, runs):
    """The log and the client's files, no spans: each request's queue is the client's estimate, which no engine
    state can place, so the per-request split is unknown (one note, not a 100 % "waiting behind other work"),
    and the engine's own record of its waiting requests gives KV room's part: B and B2 capacity-bound, D as the
    whole run's spans say."""
    run_dir = DATA / "vllm_cpu" / name
    doc = lltrace.analyze([run_dir / "server.log", run_dir / "bench"], store=tmp_path).to_dict()
    att = doc["attribution"]
    assert att["load_wait"]["total_s"] is None and "not split" in att["load_wait"]["note"]
    assert doc["classification"]["label"] == runs[name][1]["classification"]["label"]
    if doc["classification"]["label"] == "capacity-bound":
        assert "engine's own record" in doc["classification"]["why"]


def test_a_lone_log_across_a_new_year_is_not_placed(tmp_path):
    """Its own clock reads every stamp in one year, so a log from 12-31 to 01-01 would run backwards: it keeps no
    time (said so), rather than a January before its December."""
    line = (
        "INFO {stamp} [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
        "240.8 tokens/s, Running: 8 reqs, Waiting: 3 reqs, GPU KV cache usage: 93.9%, Prefix cache hit rate: 0.0%\n"
    )
    log = tmp_path / "server.log"
    log.write_text(line.format(stamp="12-31 23:59:50") + line.format(stamp="01-01 00:00:10"))
    run = lltrace.ingest([log], store=tmp_path / "store")
    assert run.table("engine_stats")["ts_s"].null_count() == 2
    assert any("New Year" in a["method"] for a in run.metadata["clock"]["alignment"])

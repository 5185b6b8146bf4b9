"""Speculative decoding: what the engine's drafts proposed and kept, and the replay of a run that drafted.

Checked on lltrace's real pair ``sample_traces/vllm_cpu_limits/V_spec_draft`` (vLLM 0.32, a draft model proposing
3 tokens a step) and ``W_spec_off`` (the same workload without it), each figure against what the raw files say:
``vllm bench serve``'s own spec-decode fields (it reads the server's /metrics before and after the run), the final
scrape's counters and the server log's lines, read here with regular expressions of the test's own.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLES, data_file
from typer.testing import CliRunner

import lltrace
from lltrace.cli import app
from lltrace.documents.rows import EngineSpeculativeRow
from lltrace.replay.cost import StepCost
from lltrace.replay.scheduler import EngineConfig, simulate
from lltrace.reports.analysis_lines import speculative_line

SPEC = SAMPLES / "vllm_cpu_limits" / "V_spec_draft"
OFF = SAMPLES / "vllm_cpu_limits" / "W_spec_off"
NGRAM = SAMPLES / "vllm_cpu_limits" / "X_spec_ngram"
BUDGET = SAMPLES / "vllm_cpu_limits" / "Y_spec_budget"
TRACE = SAMPLES / "torch" / "vllm_cpu_spec_draft_decode.rank0.pt.trace.json.gz"


def _counter(prom: Path, name: str) -> float:
    return sum(float(m) for m in re.findall(rf"^{name}\{{[^}}]*\}} (\S+)$", prom.read_text(), re.MULTILINE))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spec") / "store"


@pytest.fixture(scope="module")
def spec_run(store: Path) -> lltrace.Run:
    return lltrace.ingest([SPEC], store=store)


def test_the_drafts_counted_as_the_benchmark_and_the_scrape_count_them(spec_run: lltrace.Run) -> None:
    bench = json.loads((SPEC / "bench" / "bench.json").read_text())
    final = SPEC / "metrics_final.prom"
    got = spec_run.sql("SELECT * FROM engine_speculative").row(0, named=True)
    assert got["basis"] == "engine counters"
    assert got["speculative_tokens"] == 3  # the engine's config line: SpeculativeConfig(..., num_spec_tokens=3)
    origin = spec_run.sql("SELECT origin FROM engine_config WHERE setting = 'speculative_tokens'").item()
    assert origin == "server log: engine config line (num_spec_tokens, method draft_model)"
    assert got["drafts"] == bench["spec_decode_num_drafts"] == _counter(final, "vllm:spec_decode_num_drafts_total")
    assert got["draft_tokens"] == bench["spec_decode_draft_tokens"]
    assert got["draft_tokens"] == _counter(final, "vllm:spec_decode_num_draft_tokens_total")
    assert got["accepted_tokens"] == bench["spec_decode_accepted_tokens"]
    assert got["acceptance_rate"] == pytest.approx(bench["spec_decode_acceptance_rate"] / 100, rel=1e-12)
    assert got["acceptance_length"] == pytest.approx(bench["spec_decode_acceptance_length"], rel=1e-12)
    # every decoding request's step drafted (a draft model always proposes): the log's generation requests,
    # summed over its Iteration lines, are the drafts the counters count
    log = (SPEC / "server.log").read_text()
    generation_requests = sum(int(n) for n in re.findall(r"(\d+) generation requests", log))
    assert got["decode_request_steps"] == generation_requests == got["drafts"]
    assert got["tokens_per_decode_step"] == pytest.approx(got["acceptance_length"], rel=1e-12)


def test_the_log_alone_counts_its_lines(tmp_path: Path) -> None:
    log = (SPEC / "server.log").read_text()
    lines = re.findall(r"SpecDecoding metrics: .*Accepted: (\d+) tokens, Drafted: (\d+) tokens", log)
    assert len(lines) > 3
    run = lltrace.ingest([SPEC / "server.log"], store=tmp_path / "store")
    got = run.sql("SELECT * FROM engine_speculative").row(0, named=True)
    assert got["basis"] == "server log"
    assert got["accepted_tokens"] == sum(int(a) for a, _ in lines)
    assert got["draft_tokens"] == sum(int(d) for _, d in lines)
    assert got["drafts"] is None and got["acceptance_length"] is None  # the lines give no count of drafts
    # the log's lines stop before the run's last interval: fewer than the counters', never more
    assert got["draft_tokens"] < _counter(SPEC / "metrics_final.prom", "vllm:spec_decode_num_draft_tokens_total")


def test_a_v0_log_gives_its_running_totals(tmp_path: Path) -> None:
    # vLLM V0's spec-decode worker logged its totals so far (engine/metrics.py _format_spec_decode_metrics_str)
    line = (
        "INFO 06-11 10:00:{s:02d} metrics.py:345] Speculative metrics: Draft acceptance rate: 0.651, System "
        "efficiency: 0.570, Number of speculative tokens: 5, Number of accepted tokens: {a}, Number of draft tokens: "
        "{d}, Number of emitted tokens: 25.\n"
    )
    stats = "INFO 06-11 10:00:{s:02d} metrics.py:341] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: "
    stats += "2.0 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 1.0%, CPU KV cache "
    stats += "usage: 0.0%.\n"
    path = tmp_path / "v0.log"
    path.write_text(stats.format(s=1) + line.format(s=1, a=24, d=36) + line.format(s=6, a=60, d=90))
    got = lltrace.ingest([path], store=tmp_path / "store").sql("SELECT * FROM engine_speculative").row(0, named=True)
    assert (got["accepted_tokens"], got["draft_tokens"]) == (60, 90)  # the totals since the server started
    assert got["acceptance_rate"] == pytest.approx(60 / 90)


def test_a_run_without_it_says_nothing(store: Path) -> None:
    run = lltrace.ingest([OFF], store=store)
    assert run.sql("SELECT * FROM engine_speculative").height == 0
    config = run.sql("SELECT value, basis, origin FROM engine_config WHERE setting = 'speculative_tokens'").row(0)
    assert config == (0, "stated", "server log: engine config line (speculative_config=None)")


def test_the_terminal_and_the_advice(spec_run: lltrace.Run, store: Path) -> None:
    out = CliRunner().invoke(app, ["analyze", spec_run.id, "--store", str(store), "-q"]).stdout
    flat = " ".join(out.split())
    assert "speculative decoding (up to 3 draft tokens a step): 42.3% of 13,419 draft tokens accepted" in flat
    assert "2.27 tokens a step per decoding request" in flat
    assert "decode tok: the tokens the steps verified, each request's draft tokens included" in flat
    doc = json.loads(CliRunner().invoke(app, ["analyze", spec_run.id, "--store", str(store), "-q", "--json"]).stdout)
    pipe = [a for a in doc["advice"] if a["bottleneck"] == "pipe"]
    assert pipe and "speculative decoding is on: 42% of its draft tokens accepted" in pipe[0]["action"]
    page = store.parent / "v.html"  # the report says it in the terminal's words
    assert CliRunner().invoke(app, ["report", spec_run.id, "--store", str(store), "-o", str(page)]).exit_code == 0
    said = re.search(r"<p data-key='speculative'>([^<]*)</p>", page.read_text()).group(1)
    assert "42.3% of 13,419 draft tokens accepted · 2.27 tokens a step per decoding request" in said
    off = json.loads(CliRunner().invoke(app, ["analyze", str(OFF), "--store", str(store), "-q", "--json"]).stdout)
    assert off["speculative"] is None
    assert any("or speculative decoding" in a["action"] for a in off["advice"] if a["bottleneck"] == "pipe")


def test_the_replay_steps_a_drafting_request_by_its_measured_gain(spec_run: lltrace.Run, store: Path) -> None:
    doc = json.loads(CliRunner().invoke(app, ["replay", spec_run.id, "--store", str(store), "-q", "--json"]).stdout)
    assert doc["engine"]["tokens_per_decode_step"]["value"] == pytest.approx(5675 / 4473 + 1)
    assert doc["engine"]["draft_tokens_per_decode_step"]["value"] == pytest.approx(13419 / 4473)
    # as fitted (before the step cost is matched to the decode time), the replay gives the measured decode time
    # within a quarter; one token a step made it 2.5x (each request took 2.27x the steps it took)
    assert 0.8 < doc["calibration"]["decode_match"]["replayed_over_measured"] < 1.25
    # the steps the replay ran against the 1,635 the engine logged
    logged = len(re.findall(r"Iteration\(\d+\)", (SPEC / "server.log").read_text()))
    assert doc["baseline"]["steps"] == pytest.approx(logged, rel=0.15)
    assert any(n.startswith("speculative decoding: each decoding request gains 2.27") for n in doc["baseline"]["notes"])


def test_the_scheduler_takes_fewer_steps_for_the_same_tokens() -> None:
    cost = StepCost(c0=1e-3, c_prefill=1e-5, c_decode=1e-4)
    plain = EngineConfig(num_blocks=1000)
    drafting = EngineConfig(num_blocks=1000, tokens_per_decode_step=2.5, draft_tokens_per_decode_step=3.0)
    one = simulate([0.0], [100], [101], plain, cost)
    two = simulate([0.0], [100], [101], drafting, cost)
    assert one.steps == 101 and two.steps == 41  # a prefill step, then 100 tokens at 1 and at 2.5 a step
    # each drafting decode step also verifies 3 tokens, priced as prompt tokens
    step = 1e-3 + 1e-4 + 3 * 1e-5
    got = two.requests.row(0, named=True)
    assert got["e2e_s"] - got["ttft_s"] == pytest.approx(40 * step)
    assert got["output_tokens"] == 101 and got["tpot_s"] == pytest.approx(40 * step / 100)


def test_the_diff_names_the_settings_that_changed(spec_run: lltrace.Run, store: Path) -> None:
    off = lltrace.ingest([OFF], store=store)
    doc = json.loads(CliRunner().invoke(app, ["diff", off.id, spec_run.id, "--store", str(store), "--json"]).stdout)
    changed = {c["setting"]: (c["baseline"], c["incident"]) for c in doc["settings_changed"]}
    # both servers' logs: speculative_config=None, then num_spec_tokens=3; the draft model's KV halves the target's
    # room (vllm:cache_config_info's num_gpu_blocks in each final scrape)
    blocks = [
        float(re.search(r'num_gpu_blocks="(\d+)"', (run / "metrics_final.prom").read_text()).group(1))
        for run in (OFF, SPEC)
    ]
    assert changed["speculative_tokens"] == (0, 3)
    assert changed["kv_blocks"] == tuple(blocks) == (16384, 8192)
    assert "speculative_tokens 0 -> 3" in doc["verdict"]


def _spec(**given: Any) -> EngineSpeculativeRow:
    """An engine_speculative row with the figures given, the rest null."""
    return EngineSpeculativeRow(**({f: None for f in EngineSpeculativeRow.__struct_fields__} | given))


def test_a_run_that_drafted_nothing_or_counted_nothing_says_which() -> None:
    on = {"speculative_tokens": 3.0, "basis": None}
    assert speculative_line(_spec(**on, draft_tokens=None)).endswith(
        "on, its drafts not counted (no spec-decode counters or SpecDecoding log lines in the run)"
    )
    assert speculative_line(_spec(**on | {"draft_tokens": 0.0, "basis": "engine counters"})).endswith(
        "on, no draft proposed (engine counters)"
    )


def test_ngram_drafts_on_some_steps_only(store: Path) -> None:
    run = lltrace.ingest([NGRAM], store=store)
    bench = json.loads((NGRAM / "bench" / "bench.json").read_text())
    got = run.sql("SELECT * FROM engine_speculative").row(0, named=True)
    assert (got["drafts"], got["draft_tokens"], got["accepted_tokens"]) == (
        bench["spec_decode_num_drafts"],
        bench["spec_decode_draft_tokens"],
        bench["spec_decode_accepted_tokens"],
    )
    assert got["acceptance_length"] == pytest.approx(bench["spec_decode_acceptance_length"], rel=1e-12)
    log = (NGRAM / "server.log").read_text()
    counts = [tuple(map(int, m)) for m in re.findall(r"(\d+) generation requests, (\d+) generation tokens", log)]
    steps = sum(r for r, _ in counts)
    assert sum(t for _, t in counts) == steps + got["draft_tokens"]  # a step's generation tokens: 1 + its drafts
    assert got["decode_request_steps"] == steps > got["drafts"]  # a step drafts only where an n-gram matches
    assert got["tokens_per_decode_step"] == pytest.approx(1 + got["accepted_tokens"] / steps)
    assert got["tokens_per_decode_step"] < 1.5 < 2.9 < got["acceptance_length"]
    # the tokens the requests gained after their first: one a step plus the accepted, less those cut at max_tokens
    generated = bench["total_output_tokens"] - bench["completed"]
    assert generated == pytest.approx(steps + got["accepted_tokens"], rel=0.01)
    doc = json.loads(CliRunner().invoke(app, ["replay", run.id, "--store", str(store), "-q", "--json"]).stdout)
    assert 0.8 < doc["calibration"]["decode_match"]["replayed_over_measured"] < 1.25


def test_sglang_says_its_accept_length(tmp_path: Path) -> None:
    # the shared SGLang excerpt's real decode batch line from a speculative run (sgl-project/sglang#4759)
    path = data_file("serving", "log_excerpts", "sglang_scheduler_log_lines.txt")
    said = [float(x) for x in re.findall(r"Decode batch\..*?accept len: ([\d.]+)", path.read_text())]
    assert said == [2.54]
    run = lltrace.ingest([path], store=tmp_path / "store")
    got = run.sql("SELECT * FROM engine_speculative").row(0, named=True)
    assert got["acceptance_length"] == 2.54 and got["draft_tokens"] is None
    assert got["basis"] == "the mean of SGLang's 1 accept-length readings (decode batch lines)"
    assert speculative_line(_spec(**{k: v for k, v in got.items() if k != "run_id"})) == (
        "speculative decoding: 2.54 tokens a request gained per verify step (the mean of SGLang's 1 accept-length "
        "readings (decode batch lines))"
    )


def test_sglang_gauge_reads_zero_without_verifies(tmp_path: Path) -> None:
    # SGLang's collector exports sglang:spec_accept_length (the last interval's), 0 where nothing was verified
    prom = "# HELP sglang:num_running_reqs x\n# TYPE sglang:num_running_reqs gauge\n"
    prom += 'sglang:num_running_reqs{{model_name="m"}} 3.0\n# TYPE sglang:spec_accept_length gauge\n'
    prom += 'sglang:spec_accept_length{{model_name="m"}} {v}\n'
    for name, values in (("on", ("2.5", "3.5", "0.0")), ("off", ("0.0",))):
        folder = tmp_path / name
        folder.mkdir()
        for i, v in enumerate(values):
            (folder / f"m{i}.prom").write_text(f"# scrape_unix_ts {1.79e9 + 10 * i}\n" + prom.format(v=v))
        spec = lltrace.ingest([folder], store=tmp_path / "store").sql("SELECT * FROM engine_speculative")
        if name == "off":
            assert spec.height == 0
        else:
            assert spec.row(0, named=True)["acceptance_length"] == 3.0  # the readings of 1 or more


def test_a_profiler_trace_of_drafting_steps(tmp_path: Path) -> None:
    # vLLM's step markers count a step's generation tokens as its scheduler does: each decoding request's one token
    # and its 3 draft tokens (execute_context_0(0)_generation_8(32))
    events = json.loads(gzip.open(TRACE).read())["traceEvents"]
    marked = [
        tuple(map(int, m.groups()))
        for e in events
        if e.get("cat") == "user_annotation"
        and (m := re.fullmatch(r"execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)", e["name"]))
    ]
    decodes = [(r, t) for c, _, r, t in marked if c == 0 and r > 0]
    assert decodes and all(t == 4 * r for r, t in decodes)
    doc = json.loads(CliRunner().invoke(app, ["analyze", str(TRACE), "--store", str(tmp_path), "-q", "--json"]).stdout)
    steps = doc["steps"]
    assert steps["count_by_kind"]["decode"] == len(decodes)
    assert steps["decode_tokens_beyond_requests"] == {
        "tokens": sum(t - r for r, t in decodes),
        "steps": len(decodes),
        "decode_steps": len(decodes),
    }
    assert doc["speculative"] is None  # a trace alone does not say the engine drafted: the note says what it may be
    out = " ".join(CliRunner().invoke(app, ["analyze", str(TRACE), "--store", str(tmp_path), "-q"]).stdout.split())
    extra = sum(t - r for r, t in decodes)
    assert f"decode tok: {extra} beyond one a decoding request, in 18 of 18 decode steps" in out


def test_the_replay_without_a_step_log_fits_drafting_steps(tmp_path: Path) -> None:
    # the run without its server log: the step cost fitted from the requests' decode times, each request's steps
    # ceil((out - 1) / 2.27) with vLLM's acceptance length (the counters'; no log counts the steps)
    folder = tmp_path / "V_no_log"
    shutil.copytree(SPEC, folder, ignore=shutil.ignore_patterns("server.log"))
    run = lltrace.ingest([folder], store=tmp_path / "store")
    doc = json.loads(
        CliRunner().invoke(app, ["replay", run.id, "--store", str(tmp_path / "store"), "-q", "--json"]).stdout
    )
    assert doc["engine"]["tokens_per_decode_step"]["value"] == pytest.approx(1 + 5675 / 4473)
    assert doc["calibration"]["source"].startswith("per-request decode times")
    # one token a step had the fit price each step at about half its time, matched back x1.95
    assert 0.8 < doc["calibration"]["decode_match"]["replayed_over_measured"] < 1.25


def test_a_drafting_step_takes_its_drafts_and_slots_of_the_budget() -> None:
    # a request decoding (2 tokens a step, 3 drafts verified) beside a 200-token prompt that arrives during its first
    # step, a 30-token budget, every step 1 ms: the prompt gets what the decode leaves of each step
    cost = StepCost(c0=1e-3, c_prefill=0.0, c_decode=0.0)

    def prompt_ttft(**drafting: float) -> float:
        config = EngineConfig(num_blocks=1000, max_num_batched_tokens=30, **drafting)
        res = simulate([0.0, 0.0005], [10, 200], [50, 2], config, cost)
        return res.requests["ttft_s"][1]

    # queued at the end of step 1, then chunks of 30 - 1 (a plain decode), 30 - 4 (its drafts) and 30 - 4 - 1 - 1 (a
    # slot for the decode's drafter input and one for the chunk's): 7, 8 and 9 steps; its first token at their end
    assert prompt_ttft() == pytest.approx(7.5e-3)
    assert prompt_ttft(tokens_per_decode_step=2.0, draft_tokens_per_decode_step=3.0) == pytest.approx(8.5e-3)
    spec = {"tokens_per_decode_step": 2.0, "draft_tokens_per_decode_step": 3.0, "draft_slots": 1.0}
    assert prompt_ttft(**spec) == pytest.approx(9.5e-3)


def test_a_drafting_request_keeps_its_real_tokens_in_kv() -> None:
    cost = StepCost(c0=1e-3, c_prefill=1e-5, c_decode=1e-4)
    config = EngineConfig(num_blocks=1000, block_size=16, tokens_per_decode_step=2.5, draft_tokens_per_decode_step=3)
    res = simulate([0.0], [100], [101], config, cost)
    # 100 prompt and 100 generated tokens in KV at the end (12.5 blocks), with room for the last step's drafts; a step
    # count in place of the tokens (one token a step, 40 steps) held 9
    assert 13 <= res.peak_kv_blocks <= 14


def test_the_drafters_budget_slots_follow_the_method(store: Path) -> None:
    got = {}
    for folder in (SPEC, NGRAM, OFF):
        run = lltrace.ingest([folder], store=store)
        rows = run.sql("SELECT value, origin FROM engine_config WHERE setting = 'draft_slots'").rows()
        got[folder.name] = rows[0] if rows else None
    assert got["V_spec_draft"] == (1, "vLLM 0.32.0 max_num_new_slots_for_drafting (draft_model, 3 speculative tokens)")
    assert got["X_spec_ngram"] == (0, "vLLM 0.32.0 max_num_new_slots_for_drafting (ngram, 3 speculative tokens)")
    assert got["W_spec_off"] == (0, "no speculative decoding (speculative_tokens 0)")


def test_the_replay_of_a_run_whose_drafts_bind_the_budget(tmp_path: Path) -> None:
    run = lltrace.ingest([BUDGET], store=tmp_path / "store")
    assert run.sql("SELECT value FROM engine_config WHERE setting = 'draft_slots'").item() == 1
    # the raw log: where an iteration holds a prompt chunk, its tokens and one slot per scheduled request never pass the
    # 32-token budget and fill it exactly in 1,122 of 1,159 (the rest end a prompt, or nothing else waited)
    steps = re.findall(
        r"Iteration\(\d+\): (\d+) context requests, (\d+) context tokens, (\d+) generation requests, (\d+) generation",
        (BUDGET / "server.log").read_text(),
    )
    charged = [int(a) + int(b) + int(c) + int(d) for a, b, c, d in (s for s in steps if int(s[0]))]
    assert max(charged) == 32 and (len(charged), charged.count(32)) == (1159, 1122)
    # so its queue waited for the budget: the steps filled, as the log's, with each request's slot counted
    assert dict(run.sql("SELECT cause, count(*) FROM engine_state GROUP BY cause").rows())["budget"] == 1122
    analysis = lltrace.analyze(run).to_dict()
    attributed = analysis["attribution"]
    assert attributed["budget_wait"]["share_of_parent"] > 0.9  # without the slots: none, all of it "load"
    # its evidence names the drafting settings the steps' tokens include, and its advice the other way out
    assert attributed["budget_wait"]["evidence"]["draft_slots"]["value"] == 1
    (budget,) = [a for a in analysis["advice"] if a["bottleneck"] == "budget"]
    assert "draft fewer tokens a step (num_speculative_tokens, now 3" in budget["action"]
    doc = json.loads(
        CliRunner().invoke(app, ["replay", run.id, "--store", str(tmp_path / "store"), "-q", "--json"]).stdout
    )
    replayed, measured = doc["baseline"]["summary"], doc["baseline"]["measured"]
    # one token of budget and KV a step replayed the run's mean queue 78 % low, its TTFT 50 % and its e2e 17 %
    assert replayed["queue_s"]["mean"] == pytest.approx(measured["queue_s"]["mean"], rel=0.25)
    assert replayed["ttft_s"]["mean"] == pytest.approx(measured["ttft_s"]["mean"], rel=0.15)
    assert replayed["e2e_s"]["mean"] == pytest.approx(measured["e2e_s"]["mean"], rel=0.05)

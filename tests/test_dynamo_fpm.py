"""Dynamo's forward-pass metrics trace (dynamo.fpm.trace.v1): each record a step, and a full trace read as the
engine's whole timeline: the same queue split and interference as the vLLM iteration log it was converted from
(sample_traces/dynamo_fpm/convert_iteration_log.py, by the trace's rules)."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA
from typer.testing import CliRunner

import lltrace
from lltrace.cli import app

FPM = DATA / "dynamo_fpm"
RUNS = ("F_slots", "G_budget")
ITERATION = re.compile(r"Iteration\(\d+\): ")


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in gzip.open(path, "rt")]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    with gzip.open(path, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    return path


@pytest.mark.parametrize("run", RUNS)
def test_every_forward_pass_is_a_step_as_the_record_says(run: str, tmp_path: Path) -> None:
    records = _records(FPM / f"{run}.fpm.jsonl.gz")
    got = lltrace.ingest([FPM / f"{run}.fpm.jsonl.gz"], store=tmp_path / "s")
    steps = got.table("engine_steps").sort("step_id").to_dicts()
    assert len(steps) == len(records)
    for s, r in zip(steps, records, strict=True):
        fpm, sched = r["event"]["fpm"], r["event"]["fpm"]["scheduled_requests"]
        assert s["step_id"] == fpm["counter_id"] and s["detection"] == "dynamo fpm trace"
        assert (s["prefill_reqs"], s["prefill_tokens"], s["decode_reqs"]) == (
            sched["num_prefill_requests"],
            sched["sum_prefill_tokens"],
            sched["num_decode_requests"],
        )
        assert s["wall_s"] == fpm["wall_time"]
        assert s["end_s"] == pytest.approx(r["event"]["observed_at_unix_ms"] / 1e3, abs=1e-6)
        assert s["end_s"] - s["start_s"] == pytest.approx(fpm["wall_time"], abs=1e-6)
    stats = sorted((round(s["ts_s"], 6), s["waiting"]) for s in got.table("engine_stats").to_dicts())
    queued = sorted(
        (
            round(r["event"]["observed_at_unix_ms"] / 1e3 - r["event"]["fpm"]["wall_time"], 6),
            sum(r["event"]["fpm"]["queued_requests"].values()),
        )
        for r in records
    )
    assert stats == queued
    assert "full" in got.metadata["sources"][0]["version"]


def _views(path: Path, store: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    run = lltrace.ingest([path], store=store)
    split = run.sql("SELECT * EXCLUDE (run_id) FROM attribution_queue_split").to_dicts()[0]
    interference = run.sql("SELECT * EXCLUDE (run_id) FROM interference_run").to_dicts()[0]
    return split, interference


@pytest.mark.parametrize("run", RUNS)
def test_a_full_trace_splits_the_queue_and_the_interference_as_the_iteration_log(run: str, tmp_path: Path) -> None:
    """The run as recorded (its server log with Iteration lines) against the same run with those lines taken out
    and the trace made from them beside it: the same causes, to the trace's millisecond stamps."""
    real = DATA / "vllm_cpu_limits" / run
    other = tmp_path / run
    shutil.copytree(real, other)
    log = (real / "server.log").read_text()
    (other / "server.log").write_text("".join(ln for ln in log.splitlines(True) if not ITERATION.search(ln)))
    shutil.copy(FPM / f"{run}.fpm.jsonl.gz", other / "fpm.jsonl.gz")
    split_log, inter_log = _views(real, tmp_path / "a")
    split_fpm, inter_fpm = _views(other, tmp_path / "b")
    assert split_log["requests_split"] == split_fpm["requests_split"] > 0
    queue = split_log["kv_wait_s"] + split_log["slot_wait_s"] + split_log["budget_wait_s"]
    assert queue > 1.0  # a run whose queue the split places: F on sequence slots, G on the token budget
    for cause in ("kv_wait_s", "slot_wait_s", "budget_wait_s"):
        assert split_fpm[cause] == pytest.approx(split_log[cause], abs=0.001 * queue)
    assert inter_fpm["mixed_steps"] == inter_log["mixed_steps"] > 0
    for k in ("suffered_s", "caused_s"):  # requests meet steps at the trace's millisecond: within 2 %
        assert inter_fpm[k] == pytest.approx(inter_log[k], rel=0.02)


def test_a_sampled_trace_is_a_sample_of_the_steps_not_the_timeline(tmp_path: Path) -> None:
    """Dynamo's sampled mode (its default): the newest record per worker and rank each 5 s, when it changed."""
    records = _records(FPM / "F_slots.fpm.jsonl.gz")
    sampled, tick, last = [], None, None
    for r in records:
        t = r["event"]["observed_at_unix_ms"] // 5000
        if tick is not None and t != tick and last is not None:
            sampled.append(last)
        tick, last = t, dict(r, event=dict(r["event"], capture_mode="sampled"))
    sampled.append(last)
    run = lltrace.ingest([_write(tmp_path / "sampled.jsonl.gz", sampled)], store=tmp_path / "s")
    (src,) = run.metadata["sources"]
    assert "sampled" in src["version"] and "not the engine's whole timeline" in src["version"]
    assert src["dropped"] == {} or "forward_passes_missing" not in src["dropped"]  # gaps are what sampling is
    assert set(run.table("engine_steps")["detection"]) == {"dynamo fpm sample"}
    assert set(run.sql("SELECT DISTINCT basis FROM engine_state")["basis"]) == {"samples"}


def test_gaps_versions_and_damage_are_said(tmp_path: Path) -> None:
    records = _records(FPM / "G_budget.fpm.jsonl.gz")
    holed = records[:100] + records[110:]
    run = lltrace.ingest([_write(tmp_path / "holed.jsonl.gz", holed)], store=tmp_path / "s1")
    (src,) = run.metadata["sources"]
    assert src["dropped"]["forward_passes_missing"] == 10 and "10 forward pass(es) missing" in src["warnings"][0]
    bad = [dict(r) for r in records[:5]]
    bad[2] = {**bad[2], "event": {**bad[2]["event"], "fpm": {**bad[2]["event"]["fpm"], "version": 2}}}
    r = CliRunner().invoke(app, ["ingest", str(_write(tmp_path / "v2.jsonl.gz", bad)), "--store", str(tmp_path / "s2")])
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("lltrace: error:")]
    assert r.exit_code == 1 and len(lines) == 1 and "record 3" in lines[0] and "version 2" in lines[0]


def test_the_replay_calibrates_from_a_full_trace_as_from_the_log(tmp_path: Path) -> None:
    """The step cost fitted on the trace's steps: the replay's own validation within 1 % of the log's."""
    real = DATA / "vllm_cpu_limits" / "G_budget"
    other = tmp_path / "G_budget"
    shutil.copytree(real, other)
    log = (real / "server.log").read_text()
    (other / "server.log").write_text("".join(ln for ln in log.splitlines(True) if not ITERATION.search(ln)))
    shutil.copy(FPM / "G_budget.fpm.jsonl.gz", other / "fpm.jsonl.gz")
    docs = [lltrace.replay(str(p), store=tmp_path / "s") for p in (real, other)]
    assert docs[0]["calibration"]["source"] == "engine_steps (vllm iteration log)"
    assert docs[1]["calibration"]["source"] == "engine_steps (dynamo fpm trace)"
    for metric in ("queue_s", "ttft_s", "e2e_s"):
        got, want = (d["validation"]["replayed"][metric]["mean"] for d in docs[::-1])
        assert got == pytest.approx(want, rel=0.01)

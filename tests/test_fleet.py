"""Many runs at once: parallel ingest equal to serial, a summary of what failed and why, and a store that
stays consistent when writers race or are killed."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import DATA, SAMPLES
from typer.testing import CliRunner

import lltrace
from lltrace.cli import app
from lltrace.ingest.many import batch_items, ingest_each

H100 = SAMPLES / "torch" / "hf_transformers_qwen1.5-0.5b_h100_prefill_forward_bs16x559.json.gz"
# the fleet's single-file runs: the small real profiler traces of sample_traces/torch (one GPU step or a few each)
SMALL_TRACES = sorted(
    SAMPLES / "torch" / name
    for name in (
        "hf_transformers_qwen1.5-0.5b_h100_prefill_forward_bs16x559.json.gz",
        "hta_a100_cupti_range_profiler.json.gz",
        "hta_mi250_rocm6.2_minitoy_train.json.gz",
        "sglang_mi300x_qwen3-8b_decode_graph_capture_bs32.AMD.json.gz",
        "sglang_mi300x_qwen3-8b_decode_step.AMD.json.gz",
        "vllm_b200_tp8_gptoss_mxfp4_prefill_eager.rank0.json.gz",
        "vllm_cpu_spec_draft_decode.rank0.pt.trace.json.gz",
    )
)
TIMINGS = {"created", "ingest_seconds", "seconds", "source_seconds", "generation", "superseded"}  # when, not what


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """A folder of runs: the bundled real traces (one file each) and one vLLM CPU run folder."""
    folder = tmp_path / "fleet"
    folder.mkdir()
    for f in SMALL_TRACES:
        (folder / f.name).symlink_to(f)
    (folder / "vllm_A").symlink_to(DATA / "vllm_cpu" / "A_baseline", target_is_directory=True)
    return folder


def _contents(store: Path) -> dict[str, dict]:
    """Every committed run: its metadata without timings, and each table's rows in a fixed order."""
    st = lltrace.Store(store)
    out = {}
    for rid in st.run_ids():
        run = lltrace.Run(rid, st)
        meta = {k: v for k, v in st.metadata(rid).items() if k not in TIMINGS}
        tables = {}
        for t in lltrace.tables.TABLES:
            df = run.table(t)
            tables[t] = df.sort(df.columns).to_dicts() if df.height else []
        out[rid] = {"meta": meta, "tables": tables}
    return out


def test_each_item_is_a_run_and_parallel_equals_serial(fleet: Path, tmp_path: Path) -> None:
    items, skipped = batch_items([fleet])
    assert len(items) == len(SMALL_TRACES) + 1 and skipped == []
    serial = ingest_each([fleet], store=tmp_path / "serial", jobs=1)
    parallel = ingest_each([fleet], store=tmp_path / "parallel", jobs=2)
    assert serial.failed == [] and parallel.failed == []
    assert [r.id for r in serial.runs] == [r.id for r in parallel.runs]
    assert len(serial.runs) == len(items)
    assert _contents(tmp_path / "serial") == _contents(tmp_path / "parallel")
    a = lltrace.Store(tmp_path / "parallel")
    vllm = next(r for r in a.run_ids() if r.startswith("vllm_A-"))  # named after its folder
    assert lltrace.Run(vllm, a).table("requests").height > 0  # the folder became one run of its files
    again = ingest_each([fleet], store=tmp_path / "parallel", jobs=2)
    assert all(r.reused for r in again.runs)


def test_ray_executor_equals_serial_ingest(fleet: Path, tmp_path: Path) -> None:
    """Ray tasks on a local Ray instance started here write the same store as a serial ingest."""
    import ray

    serial = ingest_each([fleet], store=tmp_path / "serial", jobs=1)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = ingest_each([fleet], store=tmp_path / "ray", executor="ray", jobs=2)
    finally:
        ray.shutdown()
    assert on_ray.failed == [] and [r.id for r in on_ray.runs] == [r.id for r in serial.runs]
    assert _contents(tmp_path / "ray") == _contents(tmp_path / "serial")


def test_a_batch_keeps_going_past_bad_items_and_says_why(fleet: Path, tmp_path: Path) -> None:
    (fleet / "cut.json").write_bytes(H100.read_bytes()[:0] + b'{"traceEvents": [{"ph": "X", "na')
    (fleet / "README.txt").write_text("traces of week 48\n")
    (fleet / ".hidden").write_text("x")
    store = tmp_path / "s"
    r = CliRunner().invoke(app, ["ingest", "--each", str(fleet), "--store", str(store), "-j", "2"])
    assert r.exit_code == 1 and "Traceback" not in r.output
    lines = r.stderr.splitlines()
    failed = [ln for ln in lines if ln.startswith("lltrace: failed:")]
    assert failed == [f"lltrace: failed: {fleet / 'cut.json'}: byte 32: the traceEvents array holds no events"]
    assert any(ln.startswith(f"lltrace: skipped {fleet / 'README.txt'}: not a format") for ln in lines)
    assert any(ln == f"lltrace: skipped {fleet / '.hidden'}: hidden" for ln in lines)
    good = len(SMALL_TRACES) + 1
    inner = len(lltrace.ingest([fleet / "vllm_A"], store=tmp_path / "x").skipped)  # files of the run folder
    assert lines[-1] == f"lltrace: {good} runs ingested (0 already stored), 1 failed, {2 + inner} skipped"
    assert (
        r.stdout.split() == lltrace.Store(store).run_ids() or sorted(r.stdout.split()) == lltrace.Store(store).run_ids()
    )
    assert not any((store / ".staging").iterdir())


def test_jobs_means_many_runs(fleet: Path, tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["ingest", str(fleet), "--jobs", "2", "--store", str(tmp_path / "s"), "-q"])
    assert r.exit_code == 0, r.output
    assert len(r.stdout.split()) == len(batch_items([fleet])[0])


def test_a_glob_is_many_runs(tmp_path: Path) -> None:
    pattern = str(SAMPLES / "torch" / "*mi300x*.json.gz")  # the four MI300X traces
    r = CliRunner().invoke(app, ["ingest", pattern, "--store", str(tmp_path / "s"), "-q"])
    assert r.exit_code == 0, r.output
    assert len(r.stdout.split()) == len(list((SAMPLES / "torch").glob("*mi300x*.json.gz"))) == 4
    r = CliRunner().invoke(app, ["ingest", str(tmp_path / "none-*.json"), "--store", str(tmp_path / "s")])
    assert r.exit_code == 0 and "the pattern matches nothing" in r.stderr


def _lltrace(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "lltrace.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_writers_at_once_both_succeed_and_the_store_stays_consistent(tmp_path: Path) -> None:
    store = tmp_path / "s"
    other = SAMPLES / "torch" / "sglang_mi300x_qwen3-8b_decode_step.AMD.json.gz"
    # the same run twice (forced, so both commit) and another run, all at once
    procs = [
        _lltrace("ingest", str(H100), "--store", str(store), "--run", "same", "--force", "-q"),
        _lltrace("ingest", str(H100), "--store", str(store), "--run", "same", "--force", "-q"),
        _lltrace("ingest", str(other), "--store", str(store), "--run", "other", "-q"),
    ]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], results
    reference = tmp_path / "ref"
    lltrace.ingest([H100], store=reference, run="same")
    lltrace.ingest([other], store=reference, run="other")
    assert _contents(store) == _contents(reference)


def test_a_commit_waits_for_the_runs_lock(tmp_path: Path) -> None:
    store = tmp_path / "s"
    st = lltrace.Store(store)
    with st._locked("same"):
        proc = _lltrace("ingest", str(H100), "--store", str(store), "--run", "same", "-q")
        deadline = time.time() + 120
        while not list((store / ".staging").glob("*/run.json")) and time.time() < deadline:
            time.sleep(0.05)  # staged whole, now waiting to commit
        time.sleep(0.5)
        assert proc.poll() is None and not st.has_run("same")
    assert proc.wait(timeout=120) == 0 and st.has_run("same")


def _committed_rows(store: Path) -> dict[str, dict[str, int]]:
    st = lltrace.Store(store)
    con = st.connect()  # must open: a killed writer never leaves the store unreadable
    try:
        out: dict[str, dict[str, int]] = {}
        for t in lltrace.tables.TABLES:
            if not st.table_files(t):
                continue
            for rid, n in con.execute(f"SELECT run_id, count(*) FROM {t} GROUP BY run_id").fetchall():
                out.setdefault(rid, {})[t] = n
        return out
    finally:
        con.close()


def test_an_ingest_killed_at_a_random_moment_leaves_the_run_absent_or_whole(tmp_path: Path) -> None:
    reference = tmp_path / "ref"
    lltrace.ingest([H100], store=reference, run="r")
    whole = _committed_rows(reference)["r"]
    store = tmp_path / "s"
    lltrace.ingest([SAMPLES / "torch" / "sglang_mi300x_qwen3-8b_decode_step.AMD.json.gz"], store=store, run="bystander")
    bystander = _committed_rows(store)["bystander"]
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "lltrace.cli", "ingest", str(H100), "--store", str(tmp_path / "t")], check=True
    )
    duration = time.perf_counter() - t0
    rng = random.Random(7)
    for attempt in range(6):
        proc = _lltrace("ingest", str(H100), "--store", str(store), "--run", "r", "--force", "-q")
        time.sleep(rng.uniform(0.2, duration))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        rows = _committed_rows(store)
        assert rows["bystander"] == bystander, attempt
        assert rows.get("r") in (None, whole), attempt
        if lltrace.Store(store).has_run("r"):
            assert json.loads((store / "runs" / "r.json").read_text())["run_id"] == "r"
    done = subprocess.run(
        [sys.executable, "-m", "lltrace.cli", "ingest", str(H100), "--store", str(store), "--run", "r", "--force"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and done.stdout.strip() == "r"
    assert _committed_rows(store)["r"] == whole


def test_a_store_on_a_pyarrow_filesystem_uri_holds_the_same_runs(fleet: Path, tmp_path: Path) -> None:
    """A store named by URI goes through pyarrow's filesystem layer (as s3:// or gs:// would): same runs."""
    uri = f"file://{tmp_path / 'fs-store'}"
    remote = ingest_each([fleet], store=uri, jobs=2)
    local = ingest_each([fleet], store=tmp_path / "local", jobs=1)
    assert remote.failed == [] and [r.id for r in remote.runs] == [r.id for r in local.runs]
    st = lltrace.Store(uri)
    assert type(st).__name__ == "FilesystemStore"
    assert _contents(uri) == _contents(tmp_path / "local")  # type: ignore[arg-type]
    vllm = next(r for r in st.run_ids() if r.startswith("vllm_A-"))
    doc = lltrace.analyze(lltrace.Run(vllm, st)).to_dict()
    assert doc["requests"]["count"] == lltrace.Run(vllm, lltrace.Store(tmp_path / "local")).table("requests").height
    r = CliRunner().invoke(app, ["weekly", "--store", uri, "-o", str(tmp_path / "w.html")])
    assert r.exit_code == 0, r.output
    st.delete_run(vllm)
    assert vllm not in st.run_ids() and st.table_files("requests", [vllm]) == []

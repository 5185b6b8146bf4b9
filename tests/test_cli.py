"""The CLI in-process: exact exit codes, one-line errors for bad input, nothing half-written."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import DATA, SAMPLES, data_file
from typer.testing import CliRunner

from lltrace.cli import app

runner = CliRunner()
GOOD = "sglang_mi300x_qwen3-8b_decode_step.AMD.json.gz"


def run(*args: str):
    return runner.invoke(app, list(args))


def _good_bytes() -> bytes:
    return gzip.decompress(data_file("torch", GOOD).read_bytes())


def _runs(store) -> list[str]:
    return sorted(p.stem for p in (store / "runs").glob("*.json")) if (store / "runs").exists() else []


def _no_partial(store) -> None:
    assert _runs(store) == []
    for table in ("kernels", "ops", "annotations", "flows", "engine_steps"):
        assert not list((store / table).glob("run_id=*")) if (store / table).exists() else True
    staging = store / ".staging"
    assert not staging.exists() or not any(staging.iterdir())


def test_version_and_help():
    r = run("--version")
    assert r.exit_code == 0 and r.stdout.startswith("lltrace ")
    for cmd in ([], ["ingest"], ["analyze"], ["formats"], ["sql"]):
        r = run(*cmd, "-h")
        assert r.exit_code == 0, cmd
        assert "Usage" in r.stdout


def test_formats_lists_kineto():
    r = run("formats")
    assert r.exit_code == 0
    assert "pytorch-kineto" in r.stdout


def _bad_cases(tmp_path):
    good = _good_bytes()
    i = good.index(b'"name": "', 5000) + 9
    j = good.index(b'"ts": ', 5000) + 6
    k = good.index(b",", j)
    cases = {
        "empty.json": (b"", "byte 0: empty file"),
        "notrace.json": (b'{"a": 1, "b": [1, 2]}', "not a format lltrace reads"),
        "data.csv": (b"a,b\n1,2\n", "not a format lltrace reads"),
        "badutf8.json": (good[:i] + b"\xff\xfe" + good[i:], f"byte {i}: invalid UTF-8"),
        "ctrl.json": (good[:i] + b"\x01" + good[i:], f"byte {i}: raw control character 0x01"),
        "bigint.json": (good[:j] + b"123456789012345678901234567890" + good[k:], f"byte {j}: invalid event JSON"),
        "gzbad.json.gz": (gzip.compress(good)[:40] + b"\x00" * 64 + gzip.compress(good)[104:], "corrupt gzip"),
        "gzbadlate.json.gz": (gzip.compress(good)[:20000] + b"\xff" * 64 + gzip.compress(good)[20064:], "corrupt gzip"),
    }
    out = {}
    for name, (data, expect) in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        out[name] = (p, expect)
    return out


@pytest.mark.parametrize(
    "case",
    [
        "empty.json",
        "notrace.json",
        "data.csv",
        "badutf8.json",
        "ctrl.json",
        "bigint.json",
        "gzbad.json.gz",
        "gzbadlate.json.gz",
    ],
)
def test_bad_input_is_one_line_exit_1_and_no_partial_run(case, tmp_path, store):
    path, expect = _bad_cases(tmp_path)[case]
    r = run("ingest", "--store", str(store), str(path))
    assert r.exit_code == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"lltrace: error: {path}")
    assert expect in lines[0]
    assert "Traceback" not in r.output
    _no_partial(store)


@pytest.mark.parametrize("gz", [False, True])
def test_truncated_trace_is_read_as_far_as_valid_with_a_warning(gz, tmp_path, store):
    good = _good_bytes()
    cut = len(good) // 2
    data = good[:cut]
    if gz:
        whole = gzip.compress(good)
        data = whole[: len(whole) // 2]
    path = tmp_path / ("trunc.json.gz" if gz else "trunc.json")
    path.write_bytes(data)
    r = run("ingest", "--store", str(store), str(path))
    assert r.exit_code == 0
    warn = [ln for ln in r.stderr.splitlines() if ln.startswith("lltrace: warning:")]
    assert len(warn) == 1 and "truncated trace" in warn[0] and "dropped" in warn[0]
    run_id = r.stdout.strip()
    meta = json.loads((store / "runs" / f"{run_id}.json").read_text())
    src = meta["sources"][0]
    # Every complete event before the cut is kept: count them independently.
    full = json.loads(good)["traceEvents"]
    if not gz:
        kept = [e for e in full if good.find(json.dumps(e["name"]).encode()) >= 0]
        assert 0 < src["records"] < len(full)
        assert len(kept) >= src["records"]
    assert src["warnings"]
    # --strict rejects the same file, leaving nothing behind.
    strict_store = tmp_path / "strict"
    r = run("ingest", "--strict", "--store", str(strict_store), str(path))
    assert r.exit_code == 1
    assert r.stderr.strip().startswith(f"lltrace: error: {path}: end of file: truncated trace")
    _no_partial(strict_store)


def test_missing_file_and_usage_errors(store):
    r = run("ingest", "--store", str(store), "/nonexistent/trace.json")
    assert r.exit_code == 1
    assert r.stderr.strip() == "lltrace: error: /nonexistent/trace.json: no such file or folder"
    assert run("ingest", "--bogus-option").exit_code == 2


def test_analyze_sample_trace_terminal_and_json(store):
    sample = SAMPLES / "torch" / "vllm_b200_tp8_gptoss_mxfp4_prefill_eager.rank0.json.gz"
    r = run("analyze", "--store", str(store), str(sample))
    assert r.exit_code == 0, r.output
    assert "Engine steps: 1" in r.stdout and "prefill" in r.stdout
    r = run("analyze", "--store", str(store), "--json", str(sample))
    doc = json.loads(r.stdout)
    assert set(doc) >= {"run", "requests", "attribution", "classification", "steps", "kv", "advice"}
    assert doc["steps"]["count_by_kind"] == {"prefill": 1, "decode": 0, "mixed": 0, "idle": 0}
    item = doc["steps"]["items"][0]
    assert (item["kind"], item["prefill_tokens"], item["decode_tokens"]) == ("prefill", 888, 0)
    assert item["gpu_busy_s"] > 0
    assert doc["requests"] is None and doc["attribution"] is None and doc["kv"] is None
    assert doc["run"]["gpu"]["name"] == "B200"  # read from deviceProperties


def test_analyze_with_model_classifies_steps_by_roofline(store):
    sample = SAMPLES / "torch" / "vllm_b200_tp8_gptoss_mxfp4_prefill_eager.rank0.json.gz"
    r = run("analyze", "--store", str(store), "--json", "--model", "gpt-oss-120b", str(sample))
    assert r.exit_code == 0, r.output
    item = json.loads(r.stdout)["steps"]["items"][0]
    # 888 prompt tokens through 5.1 B active params: ~9 TFLOP over ~10 GB of weights = compute-bound.
    assert item["bound"] == "compute"
    r = run("analyze", "--store", str(store), "--model", "no-such-model", str(sample))
    assert r.exit_code == 1 and r.stderr.startswith("lltrace: error: unknown model 'no-such-model'")


def test_sql_over_the_store(store):
    sample = SAMPLES / "torch" / "sglang_mi300x_qwen3-8b_decode_step.AMD.json.gz"
    assert run("ingest", "--store", str(store), str(sample)).exit_code == 0
    r = run("sql", "--store", str(store), "--json", "SELECT kind, decode_reqs FROM engine_steps")
    assert r.exit_code == 0
    assert json.loads(r.stdout.strip()) == {"kind": "decode", "decode_reqs": 32}
    r = run("sql", "--store", str(store), "SELECT * FROM no_such_table")
    assert r.exit_code == 1 and r.stderr.startswith("lltrace: error: SQL error:")


def test_unknown_file_names_the_closest_formats(tmp_path, store):
    path = tmp_path / "almost_azure.csv"
    path.write_text("TIMESTAMP,ContextTokens\n2023-11-16 18:17:03.9799600,4808\n")  # no GeneratedTokens
    r = run("ingest", "--store", str(store), str(path))
    assert r.exit_code == 1
    assert r.stderr.strip().startswith(f"lltrace: error: {path}: not a format lltrace reads (closest: azure-llm-trace")


def test_every_command_that_takes_a_run_takes_a_stored_id_or_the_runs_paths(tmp_path):
    """analyze, report, replay and export perfetto all take a stored run's id or the run's files (several)."""
    a = DATA / "vllm_cpu" / "A_baseline"
    paths = [str(a / "bench" / "bench_random_200req_rate4.json"), str(a / "otlp"), str(a / "server.log")]
    store = ["--store", str(tmp_path / "s")]
    runner = CliRunner()
    doc = json.loads(runner.invoke(app, ["analyze", *paths, *store, "--json", "-q"]).stdout)
    run_id = doc["run"]["id"]
    for target in (paths, [run_id]):
        r = runner.invoke(app, ["report", *target, *store, "-o", str(tmp_path / "a.html")])
        assert r.exit_code == 0, r.output
        r = runner.invoke(app, ["export", "perfetto", *target, *store, "-o", str(tmp_path / "a.json")])
        assert r.exit_code == 0, r.output
        assert json.loads((tmp_path / "a.json").read_text())["otherData"]["lltrace_run"] == run_id
        r = runner.invoke(app, ["replay", *target, *store, "--json", "-q"])
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["run"] == run_id
        r = runner.invoke(app, ["analyze", *target, *store, "--json", "-q"])
        assert json.loads(r.stdout)["run"]["id"] == run_id
    r = runner.invoke(app, ["replay", "no-such-run", *store])
    assert r.exit_code == 1
    assert "no-such-run: no such file or folder, and no stored run of that id" in r.stderr


def test_a_run_folders_scrapes_are_one_header_entry_and_untimed_preemptions_are_said(store):
    """Run B's folder: its 15 Prometheus scrapes under metrics/ are one entry of the file listing (--verbose; one line
    per file would bury the analysis of an hour's scrapes), the final scrape beside them stays its own (it warns);
    the 55 preemptions its engine counted were timed by no source, and the terminal says where their time went."""
    b = DATA / "vllm_cpu" / "B_kvpressure"
    scrapes = sorted((b / "metrics").glob("*.prom"))
    final = (b / "metrics_final.prom").read_text()
    preemptions = next(
        float(ln.split()[-1]) for ln in final.splitlines() if ln.startswith("vllm:num_preemptions_total{")
    )
    r = CliRunner().invoke(app, ["analyze", str(b), "--store", str(store), "-q", "--verbose"], terminal_width=400)
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert f"{scrapes[0]} … {scrapes[-1].name} ({len(scrapes)} files)" in out
    assert f"Prometheus text exposition · {len(scrapes)} events" in out  # one sample set per scrape
    assert not any(str(p) in out for p in scrapes[1:-1])
    assert f"{b / 'metrics_final.prom'}" in out
    assert (
        f"preempted: {preemptions:,.0f} preemptions, no source timed preemptions: preempted time stays inside "
        "prefill/decode" in out
    )


def test_a_gpu_the_trace_names_but_the_catalog_lacks_is_said_by_name(store, tmp_path):
    # a real A100 trace whose deviceProperties name a GPU lltrace has no figures for (AWS's A10G)
    doc = json.loads(gzip.decompress(data_file("torch", "hta_a100_triton_kernel_tiny.json.gz").read_bytes()))
    for dev in doc["deviceProperties"]:
        dev["name"] = "NVIDIA A10G"
    path = tmp_path / "a10g.json"
    path.write_text(json.dumps(doc))
    r = run("analyze", "--store", str(store), str(path))
    assert r.exit_code == 0, r.output
    said = "".join(c for c in r.stdout if c not in "│ \n")  # the header panel may wrap the line anywhere
    assert "GPU:unknown(" in said and "a10g.jsondeviceProperties:NVIDIAA10G,notinlltrace'sGPUcatalog)" in said
    found = json.loads(run("analyze", "--store", str(store), "--json", str(path)).stdout)["run"]
    assert found["gpu"] is None and found["gpu_not_in_catalog"]["name"] == "NVIDIA A10G"
    # the unedited trace: its A100 is in the catalog, and nothing is said of a missing one
    found = json.loads(
        run(
            "analyze", "--store", str(store), "--json", str(data_file("torch", "hta_a100_triton_kernel_tiny.json.gz"))
        ).stdout
    )["run"]
    assert found["gpu"]["name"] == "A100-40GB" and found["gpu_not_in_catalog"] is None

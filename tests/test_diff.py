"""`lltrace diff` on the real what-if pair B / B2 (same workload, twice the KV blocks) and on runs whose
request mixes do not overlap."""

from __future__ import annotations

import json

import pytest
from conftest import DATA
from typer.testing import CliRunner

from lltrace.cli import app


def _diff(store, a, b):
    r = CliRunner().invoke(
        app, ["diff", "--store", str(store), "--json", str(DATA / "vllm_cpu" / a), str(DATA / "vllm_cpu" / b)]
    )
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_b_to_b2_is_queueing_under_kv_pressure_not_decode_speed(tmp_path):
    doc = _diff(tmp_path / "s", "B_kvpressure", "B2_kv2x")
    c = doc["components"]
    assert doc["mix"]["normalised"] and doc["mix"]["overlap"] > 0.9  # the same workload
    assert c["queue"]["delta_s"] < 0 and c["kv_wait"]["delta_s"] < 0
    assert abs(c["queue"]["delta_s"]) > abs(c["decode"]["delta_s"])
    assert max(("overhead", "queue", "prefill", "decode", "preempted"), key=lambda k: abs(c[k]["delta_s"])) == "queue"
    assert c["kv_wait"]["delta_s"] / c["queue"]["delta_s"] > 0.5  # most of the queueing saved was KV wait
    assert doc["incident"]["preemptions"] < doc["baseline"]["preemptions"] == 55
    assert "queue" in doc["verdict"] and "KV-cache room" in doc["verdict"]
    # the terminal: no source timed B's or B2's preemptions (the engine's counter: 55 and 37), and it says so
    r = CliRunner().invoke(
        app, ["diff", "--store", str(tmp_path / "s"), doc["baseline"]["run"], doc["incident"]["run"]]
    )
    assert r.exit_code == 0, r.output
    counts = [
        next(
            float(ln.split()[-1])
            for ln in (DATA / "vllm_cpu" / run / "metrics_final.prom").read_text().splitlines()
            if ln.startswith("vllm:num_preemptions_total{")
        )
        for run in ("B_kvpressure", "B2_kv2x")
    ]
    assert c["preempted"]["baseline_s"] == c["preempted"]["incident_s"] == 0
    assert f"preempted: {counts[0]:,.0f} → {counts[1]:,.0f} preemptions, no source timed preemptions" in r.stdout


def test_runs_with_disjoint_mixes_are_not_normalised(tmp_path):
    doc = _diff(tmp_path / "s", "A_baseline", "B_kvpressure")
    assert doc["mix"]["normalised"] is False and doc["mix"]["overlap"] < 0.5
    assert "not normalised" in doc["verdict"]


def test_two_profiler_traces_compare_their_steps_kind_by_kind(tmp_path):
    """Two real training traces known only from the profiler: each side's steps and mean step time are its
    ProfilerStep events' (from the raw files), and the GPU time per step over the classes is the raw GPU ops'."""
    from conftest import data_file, raw_trace

    paths = [
        data_file("torch", n)
        for n in ("hta_a100_ddp_nccl_2rank.rank0.json.gz", "hta_a100_recsys_8rank_oldformat.rank3.json.gz")
    ]
    r = CliRunner().invoke(app, ["diff", "--store", str(tmp_path), "--json", *map(str, paths)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["basis"] == "profiler steps"
    for side, path in zip(("baseline", "incident"), paths, strict=True):
        events = raw_trace(str(path))["traceEvents"]
        marked = [
            float(e["dur"]) for e in events if e.get("name", "").startswith("ProfilerStep#") and e.get("ph") == "X"
        ]
        gpu = sum(
            float(e["dur"])
            for e in events
            if e.get("ph") == "X"
            and e.get("cat", "").lower() in ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset")
        )
        (kind,) = doc["components"].values()
        assert doc[side]["steps"] == kind[f"{side}_steps"] == len(marked)
        assert abs(kind[f"{side}_s"] - sum(marked) / len(marked) / 1e6) < 1e-6
        per_step = sum(v[f"{side}_s_per_step"] for v in doc["kernel_classes"].values())
        assert abs(per_step - gpu / len(marked) / 1e6) < 1e-6 * max(1.0, per_step)
    assert "GPU time per step changed most in" in doc["verdict"]


def test_an_hf_generate_trace_against_itself_changes_nothing(tmp_path):
    """The HF generate() sample against itself: every kind's delta is zero and its sizes are the same."""
    from conftest import SAMPLES

    path = str(SAMPLES / "hf_generate_cpu" / "hf_generate_cpu_profilerstep.json.gz")
    r = CliRunner().invoke(app, ["diff", "--store", str(tmp_path), "--json", path, path])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert set(doc["components"]) == {"prefill", "decode"}
    for v in doc["components"].values():
        assert v["delta_s"] == 0 and v["baseline_tokens_per_step"] == v["incident_tokens_per_step"]
    assert doc["components"]["prefill"]["baseline_tokens_per_step"] == 156
    assert doc["components"]["decode"]["baseline_tokens_per_step"] == 2
    r = CliRunner().invoke(app, ["diff", "--store", str(tmp_path), path, path, "--baseline-window", "0/10"])
    assert r.exit_code == 1 and "profiler steps compare whole" in r.output


def test_two_server_logs_compare_their_steps_and_their_queue(tmp_path):
    """B and B2's server logs alone (the KV what-if pair): the steps kind by kind as their Iteration lines give
    them (decode-only lines: no context tokens), and the engine's own record of its queue on each side (B waited
    about twice B2's request-seconds, both for KV room)."""
    import re

    line = re.compile(
        r"Iteration\(\d+\): (\d+) context requests, (\d+) context tokens, (\d+) generation requests, "
        r"(\d+) generation tokens, iteration elapsed time: ([\d.]+) ms"
    )
    logs = [DATA / "vllm_cpu" / r / "server.log" for r in ("B_kvpressure", "B2_kv2x")]
    r = CliRunner().invoke(app, ["diff", "--store", str(tmp_path), "--json", *map(str, logs)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["basis"] == "engine log steps"
    decode = doc["components"]["decode"]
    for side, log in zip(("baseline", "incident"), logs, strict=True):
        raw = [m.groups() for m in line.finditer(log.read_text())]
        steps = [(int(g), float(ms)) for _, c, _, g, ms in raw if int(c) == 0 and int(g) > 0]
        assert decode[f"{side}_steps"] == len(steps)
        assert decode[f"{side}_tokens_per_step"] == pytest.approx(sum(g for g, _ in steps) / len(steps), rel=1e-12)
        assert decode[f"{side}_s"] * 1e3 == pytest.approx(sum(ms for _, ms in steps) / len(steps), rel=1e-9)
    b, i = doc["queue"]["baseline"], doc["queue"]["incident"]
    assert 1.5 < b["waiting_request_s"] / i["waiting_request_s"] < 2.5 and min(b["kv_share"], i["kv_share"]) > 0.9
    assert "request-seconds waiting" in doc["verdict"]

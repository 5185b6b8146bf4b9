"""`lltrace diff` on the real what-if pair B / B2 (same workload, twice the KV blocks) and on runs whose
request mixes do not overlap."""

from __future__ import annotations

import json

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

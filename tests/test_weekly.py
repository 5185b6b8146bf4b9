"""`lltrace weekly` over the shared arrival traces and a vLLM run: windows, mix, latency, KV, offline HTML."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest
from conftest import DATA
from typer.testing import CliRunner

import lltrace
from lltrace.cli import app


def test_weekly_over_azure_traces_and_a_vllm_run(tmp_path):
    store = tmp_path / "s"
    for p in (
        DATA / "serving" / "azure_llm_2023" / "AzureLLMInferenceTrace_code.csv",
        DATA / "serving" / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv",
        DATA / "vllm_cpu" / "B_kvpressure",
    ):
        lltrace.ingest([p], store=store)
    out = tmp_path / "weekly.html"
    r = CliRunner().invoke(
        app,
        [
            "weekly",
            "--store",
            str(store),
            "-o",
            str(out),
            "--window",
            "hour",
            "--json",
            "--model",
            "llama-2-70b",
            "--gpu",
            "H100-SXM",
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    windows = doc["windows"]
    assert sum(w["requests"] for w in windows) == 8819 + 19366 + 96
    azure = [w for w in windows if w["window_start_s"] < 1.8e9 - 1e8]
    assert all(w["classified"] == w["requests"] for w in azure)  # the model's crossover classifies every request
    vllm = [w for w in windows if w["window_start_s"] > 1.79e9][0]
    assert vllm["ttft_p50"] is not None and vllm["peak_kv_usage"] == 1.0 and vllm["preemptions"] >= 1
    page = out.read_text()
    assert not re.search(r"<script[^>]+src=", page) and "lltrace weekly" in page
    # without --json: one row per window on the terminal, the document's figures, and what changed
    args = ["weekly", "--store", str(store), "-o", str(out), "--window", "hour", "--model", "llama-2-70b"]
    r = CliRunner().invoke(app, [*args, "--gpu", "H100-SXM"], terminal_width=200)
    assert r.exit_code == 0, r.output
    rows = {
        cells[0]: cells[1:]
        for ln in r.stdout.splitlines()
        if (cells := [c.strip() for c in ln.split("│")[1:-1]]) and re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d$", cells[0])
    }
    assert len(rows) == len(windows)
    when = datetime.fromtimestamp(vllm["window_start_s"], tz=timezone.utc).strftime("%Y-%m-%d %H:%M")
    assert rows[when] == [
        f"{vllm['requests']:,}",
        vllm["label"],
        f"{vllm['input_p50']:,.0f}/{vllm['output_p50']:,.0f}",
        f"{vllm['ttft_p90']:,.3f}",
        f"{vllm['e2e_p90']:,.3f}",
        f"{vllm['queue_share'] * 100:.1f}%",
        "100.0%",
        f"{vllm['preemptions']:,.0f}",
    ]
    said = " ".join(r.stdout.split())
    assert all(" ".join(change.split()) in said for w in windows for change in w["changes"])
    assert any(w["changes"] for w in windows)


def test_weekly_needs_runs(tmp_path):
    r = CliRunner().invoke(app, ["weekly", "--store", str(tmp_path / "empty"), "-o", str(tmp_path / "w.html")])
    assert r.exit_code == 1 and "holds no runs" in r.stderr


def test_weekly_counts_failures_and_reads_the_counted_requests_as_analyze_does(tmp_path):
    """lltrace's run E400_refused (8 of 60 refused) beside F_slots (none): the window of E400 counts its failures,
    says they started, and its latency percentiles are over the served requests, as ``analyze``'s are."""
    import statistics

    from conftest import SAMPLES

    store = tmp_path / "s"
    refused = SAMPLES / "vllm_cpu_limits" / "E400_refused"
    for p in (SAMPLES / "vllm_cpu_limits" / "F_slots", refused):
        lltrace.ingest([p], store=store)
    raw = json.loads((refused / "bench" / "bench.json").read_text())
    doc = lltrace.weekly(store=store, window="hour")
    (win,) = [w for w in doc["windows"] if w["failed"]]
    assert (win["requests"], win["failed"], win["counted"]) == (len(raw["errors"]), raw["failed"], raw["completed"])
    served = [lat for lat, e in zip(raw["latencies"], raw["errors"], strict=True) if not e]
    p90 = statistics.quantiles(served, n=10, method="inclusive")[-1]
    assert win["e2e_p90"] == pytest.approx(p90, rel=1e-9)
    assert f"requests started failing: {raw['failed']} of {len(raw['errors'])}" in win["changes"]
    r = CliRunner().invoke(app, ["weekly", "--store", str(store), "-o", str(tmp_path / "w.html"), "--window", "hour"])
    assert r.exit_code == 0, r.output
    assert "failed" in r.stdout and "Failed requests per window" in (tmp_path / "w.html").read_text()

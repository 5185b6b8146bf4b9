"""The offline HTML report: every chart present, no network, and the analysis document's numbers."""

from __future__ import annotations

import json
import re

from conftest import DATA
from typer.testing import CliRunner

import lltrace
from lltrace.cli import app


def test_run_b_report_offline_with_the_documents_numbers(tmp_path):
    store, out, png = tmp_path / "store", tmp_path / "b.html", tmp_path / "png"
    runner = CliRunner()
    r = runner.invoke(
        app,
        ["report", "--store", str(store), str(DATA / "vllm_cpu" / "B_kvpressure"), "-o", str(out), "--png", str(png)],
    )
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert not re.search(r"<script[^>]+src=", page)  # everything inlined: nothing to fetch
    assert "vegaEmbed" in page
    charts = r.stdout.split("charts: ")[1].strip().rstrip(")").split(", ")
    assert {"requests", "latency", "sizes", "timeline", "steps", "interference"} <= set(charts)
    assert "replay" not in charts and "lltrace-replay" not in page  # never replayed: no replay section
    assert sorted(p.stem for p in png.glob("*.png")) == sorted(charts)
    doc = json.loads(
        runner.invoke(app, ["analyze", "--store", str(store), "--json", str(DATA / "vllm_cpu" / "B_kvpressure")]).stdout
    )
    shown = dict(re.findall(r"data-key='([\w.]+)'>([^<]+)<", page))
    assert shown["kv.preemptions"] == f"{doc['kv']['preemptions']:,.0f}" == "55"
    assert shown["attribution.queue.total_s"] == f"{doc['attribution']['queue']['total_s']:,.3f}"
    assert shown["attribution.decode.share"] == f"{doc['attribution']['decode']['share']:.1%}"
    assert doc["classification"]["label"] in page
    assert "<p>Preempted: 55 preemptions, no source timed preemptions: preempted time stays inside" in page
    # the stored run can be named instead of its files
    r = runner.invoke(app, ["report", "--store", str(store), doc["run"]["id"], "-o", str(tmp_path / "again.html")])
    assert r.exit_code == 0 and (tmp_path / "again.html").stat().st_size > 100_000


def test_gpu_trace_report_has_kernel_class_time_per_step(tmp_path):
    from lltrace.analysis.report import report

    path = DATA / "torch" / "hta_a100_ddp_nccl_2rank.rank0.json.gz"
    out = tmp_path / "ddp.html"
    charts = report(lltrace.analyze([path], store=tmp_path / "s"), out, png_dir=tmp_path / "png")
    assert charts == ["steps"]
    page = out.read_text()
    assert "GPU time per step by kernel class" in page and '"communication"' in page


def test_report_shows_the_runs_latest_replay_with_the_replay_documents_numbers(tmp_path):
    store, out = tmp_path / "store", tmp_path / "b.html"
    runner = CliRunner()
    b = str(DATA / "vllm_cpu" / "B_kvpressure")
    r = runner.invoke(app, ["replay", "--store", str(store), b, "--what-if", "kv_blocks=80", "--json", "-q"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    r = runner.invoke(app, ["report", "--store", str(store), doc["run"], "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "replay" in r.stdout.split("charts: ")[1]
    page = out.read_text()
    shown = dict(re.findall(r"data-key='([\w.]+)'>([^<]+)<", page))
    v = doc["validation"]
    assert shown["replay.validation.ttft_mean_mape"] == f"{v['ttft_mean_mape']:.1%}"
    assert shown["replay.validation.e2e_p90_mape"] == f"{v['e2e_p90_mape']:.1%}"
    assert shown["replay.replayed.preemptions"] == f"{doc['baseline']['preemptions']:,.0f}"
    assert shown["replay.measured.preemptions"] == "55"
    what_if = doc["whatifs"][0]
    assert shown["replay.kv_blocks_80.queue_p50_s"] == f"{what_if['queue_median_s']:.3f}"
    assert shown["replay.kv_blocks_80.preemptions"] == f"{what_if['preemptions']:,.0f}"
    # the validation comes before the what-ifs on the page, and what-ifs are labelled estimates
    assert page.index("Validation, before any what-if") < page.index("kv_blocks=80")
    assert "<td>kv_blocks=80</td><td>estimated</td>" in page


def test_a_server_log_alone_reports_what_the_queue_waited_for_as_the_terminal_does(tmp_path):
    """B's server log and nothing else: the report says what the queue waited for in the terminal's words."""
    store, out, log = tmp_path / "store", tmp_path / "b.html", str(DATA / "vllm_cpu" / "B_kvpressure" / "server.log")
    runner = CliRunner()
    r = runner.invoke(app, ["report", "--store", str(store), log, "-o", str(out)])
    assert r.exit_code == 0, r.output
    shown = dict(re.findall(r"data-key='([\w.]+)'>([^<]+)<", out.read_text()))
    terminal = " ".join(runner.invoke(app, ["analyze", "--store", str(store), log]).stdout.split())  # unwrapped
    said = " ".join(shown["engine_queue_causes"].replace("&#x27;", "'").split())
    assert said.startswith("What the queue waited for") and "KV room 9" in said and said.rstrip(".") in terminal

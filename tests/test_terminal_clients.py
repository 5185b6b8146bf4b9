"""The clients' own summaries on the terminal: each figure as the tool wrote it, and the model server's side of
an inference-perf sweep beside the client's (expected values read from the raw stage files)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import DATA
from typer.testing import CliRunner

from lltrace.cli import app

SWEEP = DATA / "serving" / "inference_perf" / "kubecon-na-2025_vllm"


def _rows(out: str, title: str) -> dict[str, list[str]]:
    """The body rows of the terminal table whose title starts with ``title``, by their first cell."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if title in ln)
    rows: dict[str, list[str]] = {}
    for ln in lines[start:]:
        if ln.startswith("└"):
            break
        cells = [c.strip() for c in re.split(r"[│┃]", ln)[1:-1]]
        if cells and cells[0] and not cells[0].startswith(("━", "─")):
            rows[cells[0]] = cells
    return rows


def test_an_inference_perf_sweep_shows_the_servers_queue_per_stage(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["analyze", str(SWEEP), "--store", str(tmp_path), "-q"], terminal_width=200)
    assert r.exit_code == 0, r.output
    rows = _rows(r.stdout, "the model server over each stage")
    for stage in range(7):
        raw = json.loads((SWEEP / f"stage_{stage}_prometheus_metrics.json").read_text())["successes"]
        got = rows[str(stage)]
        assert got[1] == f"{raw['count']:,}"
        assert got[3] == f"{raw['queue_len']['mean']:,.1f}"  # the queue behind the client's TTFT
        assert got[7] == f"{raw['time_to_first_token']['median'] * 1e3:,.2f}"
        assert got[9] == f"{raw['request_latency']['median'] * 1e3:,.2f}"
    assert "summary" in rows


def test_the_server_figures_that_are_not_the_stages_own_are_said(tmp_path: Path) -> None:
    """The sweep's server side counts about twice the requests the client completed in every stage, and its KV
    usage is 0 throughout while requests ran: both said under the table, from the raw files."""
    r = CliRunner().invoke(app, ["analyze", str(SWEEP), "--store", str(tmp_path), "-q"], terminal_width=400)
    notes = [ln for ln in r.stdout.splitlines() if ln.startswith("server, stage")]
    mismatched = []
    for stage in range(7):
        server = json.loads((SWEEP / f"stage_{stage}_prometheus_metrics.json").read_text())["successes"]
        client = json.loads((SWEEP / f"stage_{stage}_lifecycle_metrics.json").read_text())["successes"]
        if abs(server["count"] - client["count"]) > 0.1 * client["count"]:
            mismatched.append(stage)
            assert any(
                f"counted {server['count']:,} requests where the client completed {client['count']:,}" in n
                for n in notes
            )
        assert server["kv_cache_usage_percentage"]["mean"] == 0
    assert mismatched == list(range(7))
    (kv,) = [n for n in notes if "KV usage reads 0" in n]
    assert kv.startswith("server, stage 0, 1, 2, 3, 4, 5, 6")


def test_a_server_report_given_alone_is_shown(tmp_path: Path) -> None:
    """``stage_N_prometheus_metrics.json`` without the client's report of its stage (and the run's server summary
    beside a stage the client reported): the server's figures as the report wrote them, no client row invented."""
    other = DATA / "serving" / "inference_perf" / "kubecon-na-2025_vllm_batch_size"
    alone = other / "stage_6_prometheus_metrics.json"
    r = CliRunner().invoke(app, ["analyze", str(alone), "--store", str(tmp_path), "-q"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "the benchmark client's own summary" not in r.stdout
    raw = json.loads(alone.read_text())["successes"]
    got = _rows(r.stdout, "the model server over each stage")["6"]
    assert got[1] == f"{raw['count']:,}" and got[3] == f"{raw['queue_len']['mean']:,.1f}"
    assert got[7] == f"{raw['time_to_first_token']['median'] * 1e3:,.2f}"
    assert got[8] == f"{raw['time_per_output_token']['median'] * 1e3:,.2f}"
    assert "KV usage reads 0" in r.stdout and "the client completed" not in r.stdout  # no client count to compare

    files = [SWEEP / "stage_2_lifecycle_metrics.json", SWEEP / "stage_2_prometheus_metrics.json"]
    files.append(SWEEP / "summary_prometheus_metrics.json")
    r = CliRunner().invoke(app, ["analyze", *map(str, files), "--store", str(tmp_path / "b"), "-q"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert list(_rows(r.stdout, "the benchmark client's own summary")) == ["stage", "2"]
    servers = _rows(r.stdout, "the model server over each stage")
    assert list(servers) == ["stage", "2", "summary"]
    raw = json.loads(files[2].read_text())["successes"]
    assert servers["summary"][1] == f"{raw['count']:,}"


def test_sources_with_nothing_measured_are_said_to_be_so(tmp_path: Path) -> None:
    """A BurstGPT replay tool's configuration file alone (13 appended configurations, no measurements) is read and
    said to hold nothing measured; beside the engine statistics it configured, the statistics are shown instead."""
    folder = DATA / "serving" / "vllm_engine_stats_scrape"
    config, stats = folder / "liao4s_server_log.json", folder / "liao4s_vllm_log_scale100_prompt500.csv"
    r = CliRunner().invoke(app, ["analyze", str(config), "--store", str(tmp_path), "-q"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "burstgpt-replay-config" in r.stdout and "Nothing measured in these sources" in r.stdout
    r = CliRunner().invoke(
        app, ["analyze", str(config), str(stats), "--store", str(tmp_path / "b"), "-q"], terminal_width=200
    )
    assert r.exit_code == 0, r.output
    assert "Nothing measured" not in r.stdout


def test_a_summary_alone_names_its_own_tools_per_request_output(tmp_path: Path) -> None:
    cases = {
        SWEEP / "stage_2_lifecycle_metrics.json": "inference-perf's report.request_lifecycle.per_request: true",
        DATA / "serving" / "llmperf" / "summary__lepton_70b.json": "LLMPerf's individual_responses file",
    }
    for i, (path, named) in enumerate(cases.items()):
        r = CliRunner().invoke(app, ["analyze", str(path), "--store", str(tmp_path / str(i)), "-q"], terminal_width=400)
        flat = " ".join(r.stdout.split())
        hint = flat[flat.index("Summary only") :]
        assert f"per-request output ({named}" in hint
        assert "--output-details" not in hint  # another tool's option is no help here

"""SGLang bench_serving and LLMPerf outputs (real files), checked against independent readings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import DATA, data_file

import lltrace


def test_sglang_bench_jsonl_with_bare_infinity(store):
    folder = DATA / "serving" / "sglang_bench_serving"
    run = lltrace.ingest([folder], store=store)
    by_file = {s["path"].rsplit("/", 1)[1]: s for s in run.metadata["sources"]}
    for f in folder.glob("*.jsonl"):
        lines = [ln for ln in f.read_text().splitlines() if ln.strip()]
        src = by_file[f.name]
        assert src["format"] == "sglang-bench"
        assert len(src["bench"]) == len(lines)
        raw_rates = [json.loads(ln)["request_rate"] for ln in lines]  # json reads the bare Infinity token
        assert [b["request_rate"] for b in src["bench"]] == ["inf" if r == float("inf") else r for r in raw_rates]
        assert [b["completed"] for b in src["bench"]] == [json.loads(ln)["completed"] for ln in lines]
    # the compact dict of bench_serving.py in 2024-07 (no request_throughput), without per-request lists
    assert src["version"].startswith("2024-07 (bench_serving.py") and src["version"].endswith("; summary only")


@pytest.mark.parametrize(
    ("name", "errors"), [("individual__bedrock_70b.json", 49), ("individual__fireworks_70b.json", 0)]
)
def test_llmperf_individual(name, errors, store):
    path = data_file("serving", "llmperf", name)
    raw = json.loads(path.read_text())
    run = lltrace.ingest([path], store=store)
    rows = run.table("requests").sort("client_index").to_dicts()
    assert len(rows) == len(raw) == 150
    assert sum(r["status"] == "error" for r in rows) == errors == run.metadata["sources"][0]["errored_requests"]
    assert [r["ttft_s"] for r in rows] == [x["ttft_s"] for x in raw]
    assert [r["output_tokens"] for r in rows] == [x["number_output_tokens"] for x in raw]
    assert all(r["arrival_s"] is None and r["request_id"] is None for r in rows)  # LLMPerf records neither
    doc = lltrace.analyze(run).to_dict()
    assert doc["requests"]["count"] == 150 and doc["requests"]["errors"] == errors


@pytest.mark.parametrize("name", ["summary__bedrock_70b.json", "summary__lepton_70b.json"])
def test_llmperf_summary(name, store):
    """An LLMPerf summary alone: its figures in the document's client_summary (seconds, as LLMPerf wrote)."""
    path = data_file("serving", "llmperf", name)
    raw = json.loads(path.read_text())
    run = lltrace.ingest([path], store=store)
    assert run.metadata["sources"][0]["format"] == "llmperf-summary"
    (got,) = lltrace.analyze(run).to_dict()["client_summary"]
    assert got["failed"] == raw["results_number_errors"] and got["completed"] == raw["results_num_completed_requests"]
    assert got["ttft_s"] == {
        "mean": raw["results_ttft_s_mean"],
        "median": raw["results_ttft_s_quantiles_p50"],
        "p90": raw["results_ttft_s_quantiles_p90"],
        "p99": raw["results_ttft_s_quantiles_p99"],
    }
    assert got["e2e_s"]["p90"] == raw["results_end_to_end_latency_s_quantiles_p90"]
    assert got["achieved_rate_per_s"] == pytest.approx(raw["results_num_completed_requests_per_min"] / 60)
    assert got["mean_output_tokens"] == raw["results_number_output_tokens_mean"]
    assert got["max_concurrency"] == raw["num_concurrent_requests"]


def test_summary_only_bench_reports_the_clients_own_numbers(tmp_path: Path) -> None:
    """A rate sweep with no per-request rows: analyze shows each run's summary as the client gave it."""
    path = data_file("serving", "sglang_bench_serving", "datacrunch-h200__llama_3_3_70b_online_output.jsonl")
    raw = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    doc = lltrace.analyze([path], store=tmp_path).to_dict()
    rows = doc["client_summary"]
    assert len(rows) == len(raw) == 7
    for k, (got, want) in enumerate(zip(rows, raw, strict=True)):
        assert got["tool"] == "sglang-bench" and got["stage"] == k and got["source"] == str(path)
        assert got["requested_rate_per_s"] == want["request_rate"] and got["completed"] == want["completed"]
        assert got["ttft_s"]["median"] * 1e3 == pytest.approx(want["median_ttft_ms"], rel=1e-12)
        assert got["e2e_s"]["median"] * 1e3 == pytest.approx(want["median_e2e_latency_ms"], rel=1e-12)
        assert got["e2e_s"]["mean"] * 1e3 == pytest.approx(want["mean_e2e_latency_ms"], rel=1e-12)
        assert got["mean_output_tokens"] == pytest.approx(want["total_output_tokens"] / want["completed"])
        assert got["tpot_s"] is None and got["ttft_s"]["p99"] is None  # not in SGLang's summary: NULL, not guessed
        assert got["output_tokens_per_s"] == want["output_throughput"]
        # the 2024 lines leave request_throughput out; bench_serving.py defines it as completed / duration
        assert got["achieved_rate_per_s"] == pytest.approx(want["completed"] / want["duration"], rel=1e-12)


def test_a_sweep_sent_all_at_once_prints_its_rate_as_inf(tmp_path: Path) -> None:
    """SGLang writes ``"request_rate": Infinity`` for an offline run; the terminal summary says inf."""
    from typer.testing import CliRunner

    from lltrace.cli import app

    path = data_file("serving", "sglang_bench_serving", "datacrunch-h200__llama_3_3_70b_offline_output.jsonl")
    raw = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert all(r["request_rate"] == float("inf") for r in raw)
    r = CliRunner().invoke(app, ["analyze", str(path), "--store", str(tmp_path)])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    rows = [ln for ln in r.stdout.splitlines() if re.match(r"^│\s+\d+\s+│\s+inf\s+│", ln)]  # stage, rate
    assert len(rows) == len(raw)


@pytest.mark.parametrize(
    "path",
    [
        DATA / "serving" / "inference_perf" / "kubecon-na-2025_vllm",
        DATA / "serving" / "sglang_bench_serving" / "datacrunch-h200__llama_3_3_70b_offline_output.jsonl",
    ],
    ids=["kubecon", "sglang-offline"],
)
def test_no_figure_of_a_client_summary_is_cut_at_120_columns(path: Path, tmp_path: Path) -> None:
    """Seconds-long latencies in ms ("243,517.68") and a dozen columns: each figure printed whole (rich would
    otherwise end it with an ellipsis), the medians as the files give them."""
    from typer.testing import CliRunner

    from lltrace.cli import app

    r = CliRunner().invoke(app, ["analyze", str(path), "--store", str(tmp_path)], env={"COLUMNS": "120"})
    assert r.exit_code == 0, r.output
    table = r.stdout[r.stdout.index("own summary") :]
    assert "…" not in table.split("\n\n")[0]
    files = sorted(path.glob("stage_*_lifecycle_metrics.json")) if path.is_dir() else [path]
    for f in files:
        for line in f.read_text().splitlines():
            raw = json.loads(line)
            e2e = raw["successes"]["latency"]["request_latency"]["median"] * 1e3 if path.is_dir() else None
            e2e = raw.get("median_e2e_latency_ms", e2e)
            assert f"{e2e:,.2f}" in table

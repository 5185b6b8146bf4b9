"""llm-d benchmark reports (schema 0.2 / 0.2.1) written by llm-d's own converter from real client results, read
into ``client_summary``; and ``lltrace export llm-d-report``, validated against llm-d's published JSON Schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from conftest import DATA
from typer.testing import CliRunner

import lltrace
from lltrace.cli import app

FOLDER = DATA / "llmd_reports"
REPORTS = sorted(p.name for p in FOLDER.iterdir() if p.suffix in (".yaml", ".json"))
NATIVE = {  # the client's own result file each report was converted from (README.md of the folder)
    "N_bench_pcts.br_v0_2.yaml": DATA / "vllm_cpu_limits" / "N_bench_pcts" / "bench" / "bench.json",
    "K_guidellm.br_v0_2_0.yaml": DATA / "vllm_cpu_limits" / "K_guidellm" / "bench" / "benchmarks.json",
    "L_aiperf.br_v0_2.yaml": DATA / "vllm_cpu_limits" / "L_aiperf" / "bench" / "profile_export_aiperf.json",
    "kubecon_stage2.br_v0_2.yaml": DATA
    / "serving"
    / "inference_perf"
    / "kubecon-na-2025_vllm"
    / "stage_2_lifecycle_metrics.json",
}
TO_SECONDS = {"ms": 1e3, "ms/token": 1e3, "s": 1.0, "s/token": 1.0}


def _summary(paths: list[Path], store: Path) -> list[dict[str, Any]]:
    return lltrace.analyze([str(p) for p in paths], store=store).to_dict()["client_summary"]


def _close(a: float | None, b: float | None) -> bool:
    return a == b or (a is not None and b is not None and abs(a - b) <= 1e-12 * max(abs(a), abs(b)))


@pytest.mark.parametrize("name", REPORTS)
def test_every_figure_is_the_reports_own_in_seconds(name: str, tmp_path: Path) -> None:
    """Each statistic as the file states it, divided by its own unit (read here with PyYAML, not lltrace)."""
    raw = yaml.safe_load((FOLDER / name).read_text())
    agg = raw["results"]["request_performance"]["aggregate"]
    (e,) = _summary([FOLDER / name], tmp_path / "s")
    assert e["tool"] == "llm-d-benchmark-report" and e["stage"] == raw["scenario"]["load"]["standardized"]["stage"]
    req = agg["requests"]
    assert e["completed"] == req["total"] - req.get("failures", 0) - req.get("incomplete", 0)
    assert e["failed"] == req.get("failures")
    assert e["mean_input_tokens"] == req["input_length"]["mean"]
    assert e["mean_output_tokens"] == req["output_length"]["mean"]
    assert e["achieved_rate_per_s"] == agg["throughput"]["request_rate"]["mean"]
    assert e["output_tokens_per_s"] == agg["throughput"]["output_token_rate"]["mean"]
    aiperf = raw["scenario"]["load"]["standardized"]["tool"] == "aiperf"
    for ours, theirs in (
        ("ttft", "time_to_first_token"),
        ("tpot", "inter_token_latency" if aiperf else "time_per_output_token"),
        ("e2e", "request_latency"),
    ):
        d = agg["latency"][theirs]
        got = e[f"{ours}_s"]
        for stat, key in (("mean", "mean"), ("median", "p50"), ("p90", "p90"), ("p99", "p99")):
            want = d[key] / TO_SECONDS[d["units"]] if key in d else None
            assert _close(got[stat], want), (ours, stat, got[stat], want)


@pytest.mark.parametrize("name", sorted(NATIVE))
def test_the_report_says_what_the_clients_own_file_says(name: str, tmp_path: Path) -> None:
    """The same figures through llm-d's converter and straight from the client's result file: equal wherever the
    converter copied one (inference-perf's request rate is its completions per second, not its send rate)."""
    (via,) = _summary([FOLDER / name], tmp_path / "a")
    (own,) = _summary([NATIVE[name]], tmp_path / "b")
    keys = ["completed", "failed", "mean_input_tokens", "mean_output_tokens", "output_tokens_per_s"]
    keys += [] if name.startswith("kubecon") else ["achieved_rate_per_s"]
    for k in keys:
        assert via[k] == own[k], (k, via[k], own[k])
    compared = 0
    for lat in ("ttft_s", "tpot_s", "e2e_s"):
        for stat, v in (own[lat] or {}).items():
            if via[lat] is not None and via[lat][stat] is not None:
                assert _close(via[lat][stat], v), (lat, stat, via[lat][stat], v)
                compared += 1
    assert compared >= 9


def test_versions_units_and_damage_are_said(tmp_path: Path) -> None:
    raw = yaml.safe_load((FOLDER / "N_bench_pcts.br_v0_2.yaml").read_text())
    old = dict(raw, version="0.1")
    (tmp_path / "old.yaml").write_text(yaml.safe_dump(old))
    r = CliRunner().invoke(app, ["ingest", str(tmp_path / "old.yaml"), "--store", str(tmp_path / "s1")])
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("lltrace: error:")]
    assert r.exit_code == 1 and len(lines) == 1 and "version '0.1'" in lines[0] and "0.2, 0.2.1" in lines[0]
    lat = raw["results"]["request_performance"]["aggregate"]["latency"]
    lat["time_to_first_token"]["units"] = "tokens/s"  # a rate's unit on a latency: no figure
    lat["request_latency"]["mean"] = "slow"
    (tmp_path / "units.json").write_text(json.dumps(raw))
    run = lltrace.ingest([tmp_path / "units.json"], store=tmp_path / "s2")
    (src,) = run.metadata["sources"]
    assert src["dropped"]["summary_values_not_numbers"] == 2
    assert "time_to_first_token.units = 'tokens/s'" in src["warnings"][0]
    (e,) = lltrace.analyze(run, store=tmp_path / "s2").to_dict()["client_summary"]
    assert e["ttft_s"] is None and e["e2e_s"]["mean"] is None and e["e2e_s"]["median"] == 0.2450822689997949
    (tmp_path / "cut.yaml").write_text((FOLDER / "N_bench_pcts.br_v0_2.yaml").read_text()[:700] + "\n  - [")
    r = CliRunner().invoke(app, ["ingest", str(tmp_path / "cut.yaml"), "--store", str(tmp_path / "s3")])
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("lltrace: error:")]
    assert r.exit_code == 1 and len(lines) == 1 and "cut.yaml" in lines[0] and "line " in lines[0]


def _schema(version: str) -> dict[str, Any]:
    return json.loads((FOLDER / "schema" / f"br_v{version}_json_schema.json").read_text())


@pytest.mark.parametrize(
    "run",
    [DATA / "vllm_cpu_limits" / "N_bench_pcts", DATA / "vllm_cpu" / "B_kvpressure", FOLDER / "L_aiperf.br_v0_2.yaml"],
    ids=["N_bench_pcts", "B_kvpressure", "llm-d-report-alone"],
)
def test_export_validates_against_llmds_schemas_and_says_what_analyze_says(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.yaml"
    store = str(tmp_path / "store")
    r = CliRunner().invoke(app, ["export", "llm-d-report", str(run), "-o", str(out), "--store", store])
    if run.suffix == ".yaml":  # a summary has no requests: the one-line error, nothing written
        assert r.exit_code == 1 and "has no requests" in r.stderr and not out.exists()
        return
    assert r.exit_code == 0, r.output
    report = yaml.safe_load(out.read_text())
    checker = jsonschema.FormatChecker()
    for version in ("0_2", "0_2_1"):
        jsonschema.validate(json.loads(json.dumps(report, default=str)), _schema(version), format_checker=checker)
    doc = lltrace.analyze(str(run), store=store).to_dict()
    agg = report["results"]["request_performance"]["aggregate"]
    assert agg["requests"]["total"] == doc["requests"]["count"]
    for theirs, ours in (
        ("time_to_first_token", "ttft_s"),
        ("time_per_output_token", "tpot_s"),
        ("request_latency", "e2e_s"),
    ):
        assert {k: v for k, v in agg["latency"][theirs].items() if k != "units"} == doc["requests"][ours]
    assert agg["throughput"]["request_rate"]["mean"] == doc["workload"]["throughput_per_s"]
    # and lltrace reads its own report back to the same figures
    (back,) = _summary([out], tmp_path / "back")
    assert back["ttft_s"]["p90"] == doc["requests"]["ttft_s"]["p90"]
    assert back["e2e_s"]["mean"] == doc["requests"]["e2e_s"]["mean"]


def test_llmds_json_schema_is_not_read_as_a_report(tmp_path: Path) -> None:
    """The schema names the report's keys (request_performance, aggregate): a schema document is no report."""
    from lltrace.parsers import detect

    for version in ("0_2", "0_2_1"):
        assert detect(FOLDER / "schema" / f"br_v{version}_json_schema.json") is None
    run = lltrace.ingest([FOLDER], store=tmp_path / "s")  # the folder: every report, the schemas skipped
    assert len(lltrace.analyze(run, store=tmp_path / "s").to_dict()["client_summary"]) == len(REPORTS)

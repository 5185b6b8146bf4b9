"""AIPerf's and GenAI-Perf's aggregate CSVs give the same client summary as their JSON aggregate, at the CSV's
two decimals. The CSVs are built here from the real AIPerf aggregate of the 2025-10 run (tests/data/real) by each
exporter's rules: aiperf/exporters/csv_exporter.py (``Metric`` + STAT_KEYS, ``{:.2f}``, names from each metric's
header, no unit for counts, sections by whether a metric has percentiles) and GenAI-Perf's
genai_perf/export_data/csv_exporter.py (``Metric,avg,min,max,p99,p95,p90,p75,p50,p25``, ``{:,.2f}``, names as the
metric name in title case with its unit, no unit for tokens)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

import lltrace

AGG = (
    REPO / "tests" / "data" / "real" / "aiperf" / "aiperf-2025-10_gpt-oss-20b_c100_cancel10.profile_export_aiperf.json"
)
STAT_KEYS = ["avg", "min", "max", "p1", "p5", "p25", "p50", "p75", "p90", "p95", "p99", "std"]  # display_units_utils
GENAI_HEADER = ["Metric", "avg", "min", "max", "p99", "p95", "p90", "p75", "p50", "p25"]


def _aiperf_csv(records: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    request = {t: m for t, m in records.items() if any(m.get(k) is not None for k in STAT_KEYS if k[1:].isdigit())}
    system = {t: m for t, m in records.items() if t not in request}

    def name(m: dict[str, Any]) -> str:
        return m["header"] if m["unit"].lower() in ("count", "requests") else f"{m['header']} ({m['unit']})"

    def num(v: Any) -> str:
        return "" if v is None else f"{float(v):.2f}"

    w.writerow(["Metric", *STAT_KEYS])
    for _, m in sorted(request.items()):
        w.writerow([name(m), *(num(m.get(k)) for k in STAT_KEYS)])
    w.writerow([])
    w.writerow(["Metric", "Value"])
    for _, m in sorted(system.items()):
        w.writerow([name(m), num(m["avg"])])
    return buf.getvalue()


def _genai_perf_csv(records: dict[str, Any]) -> str:
    """GenAI-Perf's two sections for the metrics it has (its names: time_to_first_token, inter_token_latency,
    request_latency, the sequence lengths; system: request and output token throughput, unit 'per sec')."""
    rows = {
        "time_to_first_token": records["ttft"],
        "inter_token_latency": records["inter_token_latency"],
        "request_latency": records["request_latency"],
        "output_sequence_length": records["output_sequence_length"],
        "input_sequence_length": records["input_sequence_length"],
    }
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(GENAI_HEADER)
    for metric, m in rows.items():
        label = metric.replace("_", " ").title() + ("" if m["unit"] == "tokens" else f" ({m['unit']})")
        w.writerow([label, *(f"{m[k]:,.2f}" for k in GENAI_HEADER[1:])])
    w.writerow([])
    w.writerow(["Metric", "Value"])
    for metric in ("output_token_throughput", "request_throughput"):
        w.writerow([metric.replace("_", " ").title() + " (per sec)", f"{records[metric]['avg']:.2f}"])
    return buf.getvalue()


def _summary(path: Path, store: Path) -> dict[str, Any]:
    (entry,) = lltrace.analyze([str(path)], store=store).to_dict()["client_summary"]
    return entry


@pytest.mark.parametrize("tool", ["aiperf", "genai-perf"])
def test_the_aggregate_csv_gives_the_json_aggregates_figures(tool: str, tmp_path: Path) -> None:
    records = json.loads(AGG.read_text())["records"]
    text = _aiperf_csv(records) if tool == "aiperf" else _genai_perf_csv(records)
    path = tmp_path / f"profile_export_{tool.replace('-', '_')}.csv"
    path.write_text(text)
    run = lltrace.ingest([path], store=tmp_path / "csv")
    assert run.metadata["sources"][0]["format"] == "aiperf-summary-csv"
    assert run.metadata["sources"][0]["version"] == ("AIPerf" if tool == "aiperf" else "GenAI-Perf") + " csv_exporter"
    got = _summary(path, tmp_path / "csv2")
    json_path = tmp_path / "profile_export_aiperf.json"
    json_path.write_text(AGG.read_text())
    want = _summary(json_path, tmp_path / "json")
    for lat in ("ttft_s", "tpot_s", "e2e_s"):
        for stat in ("mean", "median", "p90", "p99"):
            assert got[lat][stat] == pytest.approx(want[lat][stat], abs=0.005e-3), (lat, stat)  # ms to 2 decimals
    assert got["achieved_rate_per_s"] == pytest.approx(want["achieved_rate_per_s"], abs=0.005)
    assert got["output_tokens_per_s"] == pytest.approx(want["output_tokens_per_s"], abs=0.005)
    assert got["mean_output_tokens"] == pytest.approx(want["mean_output_tokens"], abs=0.005)
    if tool == "aiperf":  # GenAI-Perf's CSV carries no counts or duration
        assert (got["completed"], got["failed"]) == (want["completed"], want["failed"])
        assert got["duration_s"] == pytest.approx(want["duration_s"], abs=0.005)


def test_a_figure_that_is_not_a_number_is_null_and_said(tmp_path: Path) -> None:
    records = json.loads(AGG.read_text())["records"]
    lines = _genai_perf_csv(records).splitlines()
    cells = next(csv.reader([lines[1]]))
    cells[8] = "fast"  # its p50
    lines[1] = ",".join(f'"{c}"' for c in cells)
    path = tmp_path / "profile_export_genai_perf.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.warns(lltrace.errors.InputWarning, match="1 summary figure"):
        got = _summary(path, tmp_path / "store")
    assert got["ttft_s"]["median"] is None and got["ttft_s"]["mean"] is not None


def test_a_row_cut_short_is_the_one_line_error(tmp_path: Path) -> None:
    records = json.loads(AGG.read_text())["records"]
    lines = _genai_perf_csv(records).splitlines()
    lines[2] = lines[2].rsplit(",", 3)[0]
    path = tmp_path / "profile_export_genai_perf.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(lltrace.errors.TraceFormatError, match="line 3"):
        lltrace.ingest([path], store=tmp_path / "store")


def test_the_csv_beside_its_json_aggregate_is_read_once(tmp_path: Path) -> None:
    """AIPerf writes profile_export_aiperf.json and .csv into one artifacts folder: one client summary."""
    folder = tmp_path / "artifacts"
    folder.mkdir()
    (folder / "profile_export_aiperf.json").write_text(AGG.read_text())
    (folder / "profile_export_aiperf.csv").write_text(_aiperf_csv(json.loads(AGG.read_text())["records"]))
    with pytest.warns(lltrace.errors.InputWarning, match="CSV copy of profile_export_aiperf.json"):
        run = lltrace.ingest([folder], store=tmp_path / "store")
    (entry,) = lltrace.analyze(run).to_dict()["client_summary"]
    assert entry["tool"] == "aiperf-summary"  # the JSON's full-precision figures


def test_a_csv_of_another_run_beside_a_json_aggregate_is_kept(tmp_path: Path) -> None:
    folder = tmp_path / "artifacts"
    folder.mkdir()
    records = json.loads(AGG.read_text())["records"]
    (folder / "profile_export_aiperf.json").write_text(AGG.read_text())
    records["ttft"] = records["ttft"] | {"avg": records["ttft"]["avg"] + 1.0}  # another run's TTFT
    (folder / "profile_export_aiperf.csv").write_text(_aiperf_csv(records))
    run = lltrace.ingest([folder], store=tmp_path / "store")
    tools = sorted(e["tool"] for e in lltrace.analyze(run).to_dict()["client_summary"])
    assert tools == ["aiperf-summary", "aiperf-summary-csv"]

"""guidellm's CSV report read as the run's client summary when it is the file given, and read once beside its
benchmarks.json. Real files: guidellm 0.8.1's exports of lltrace's own runs K_guidellm and M_guidellm_streams."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from conftest import SAMPLES

import lltrace

EXPORTS = SAMPLES / "guidellm_exports"
RUNS = SAMPLES / "vllm_cpu_limits"
PAIRS = [
    (EXPORTS / "benchmarks.csv", RUNS / "K_guidellm" / "bench" / "benchmarks.json"),
    (EXPORTS / "M_guidellm_streams" / "benchmarks.csv", RUNS / "M_guidellm_streams" / "bench" / "benchmarks.json"),
]


def _summary(path: Path, store: Path) -> list[dict]:
    entries = lltrace.analyze([str(path)], store=store).to_dict()["client_summary"]
    return [{k: v for k, v in e.items() if k not in ("source", "tool")} for e in entries]


@pytest.mark.parametrize(("report", "result"), PAIRS, ids=["K_poisson", "M_concurrent"])
def test_the_csv_alone_gives_the_figures_its_json_gives(report: Path, result: Path, tmp_path: Path) -> None:
    got, want = _summary(report, tmp_path / "csv"), _summary(result, tmp_path / "json")
    assert got == want and len(got) == len(json.loads(result.read_text())["benchmarks"])
    # and as the raw cells say: each benchmark's strategy, counts and mean TTFT
    rows = list(csv.reader(report.open(newline="")))
    column = {(g, n, s): i for i, (g, n, s) in enumerate(zip(*rows[:3], strict=True))}
    for row, entry in zip(rows[3:], got, strict=True):
        assert entry["completed"] == int(row[column[("Request Counts", "Successful", "")]])
        assert entry["failed"] == int(row[column[("Request Counts", "Errored", "")]])
        mean_ms = float(row[column[("Time to First Token", "Successful ms", "Mean")]])
        assert entry["ttft_s"]["mean"] == pytest.approx(mean_ms / 1e3, rel=1e-12)
        p99 = json.loads(row[column[("Request Latency", "Successful Sec", "Percentiles")]])[9]
        assert entry["e2e_s"]["p99"] == p99
        strategy = row[column[("Benchmark", "Strategy", "")]]
        if strategy.startswith("poisson@"):
            assert entry["requested_rate_per_s"] == float(strategy.split("@")[1])


def test_beside_its_json_the_csv_is_read_once(tmp_path: Path) -> None:
    report, result = PAIRS[0]
    folder = tmp_path / "bench"
    folder.mkdir()
    shutil.copy(report, folder)
    shutil.copy(result, folder)
    with pytest.warns(lltrace.InputWarning, match="read once, from the JSON"):
        run = lltrace.ingest([folder], store=tmp_path / "s")
    (csv_src,) = [s for s in run.metadata["sources"] if s["format"] == "guidellm-csv"]
    assert csv_src["copy_of"] == ["benchmarks.json"] and csv_src["guidellm_metrics"] is None
    doc = lltrace.analyze(run).to_dict()
    assert len(doc["client_summary"]) == 1 and doc["client_summary"][0]["tool"] == "guidellm-benchmarks"
    assert doc["requests"]["count"] == 80

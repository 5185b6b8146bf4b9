"""``vllm bench sweep serve`` output: each run's result in ``run=N.json``, all of a combination's runs again as a
JSON array in ``summary.json``, and its warm-up run in ``warmup.json`` (run_number -1). Built as
vllm/benchmarks/sweep/serve.py writes them (``run_benchmark``: the bench result plus ``run_number`` and the
settings; ``run_comb``: the list of them) from a real ``vllm bench serve`` 0.32 result of run A."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from conftest import data_file

import lltrace

REAL = data_file("vllm_cpu", "A_baseline", "bench", "bench_random_200req_rate4.json")


def _sweep(tmp_path: Path) -> tuple[Path, list[dict[str, Any]], dict[str, Any]]:
    combo = tmp_path / "exp" / "SERVE-max_num_seqs=8-BENCH-rate4"
    combo.mkdir(parents=True)
    result = json.loads(REAL.read_text())
    settings = {"max_num_seqs": 8}
    # the warm-up run (a cold server) ten times slower: counting it would move every figure
    warmup = result | {"run_number": -1, "ttfts": [t * 10 for t in result["ttfts"]]} | settings
    (combo / "warmup.json").write_text(json.dumps(warmup, indent=4))
    runs = []
    for n in range(2):
        run = result | {"run_number": n} | settings
        (combo / f"run={n}.json").write_text(json.dumps(run, indent=4))
        runs.append(run)
    (combo / "summary.json").write_text(json.dumps(runs, indent=4))
    return combo, runs, warmup


def test_a_combinations_summary_alone_is_its_runs(tmp_path: Path) -> None:
    combo, runs, _ = _sweep(tmp_path)
    run = lltrace.ingest([combo / "summary.json"], store=tmp_path / "store")
    assert run.metadata["sources"][0]["format"] == "vllm-bench"
    doc = lltrace.analyze(run).to_dict()
    assert [c["stage"] for c in doc["client_summary"]] == [0, 1]
    assert doc["requests"]["count"] == sum(len(r["input_lens"]) for r in runs)


def test_a_sweep_folder_counts_each_run_once_and_leaves_the_warmup_out(tmp_path: Path) -> None:
    combo, runs, warmup = _sweep(tmp_path)
    with pytest.warns(lltrace.errors.InputWarning, match="summary.json: 2 result.*read once"):
        run = lltrace.ingest([combo], store=tmp_path / "store")
    rows = run.table("requests").to_dicts()
    per_file = len(warmup["input_lens"])
    assert len(rows) == 3 * per_file  # run=0, run=1 and the warm-up, never summary.json's copies
    assert len({(r["client_id"], r["client_index"]) for r in rows}) == len(rows)
    assert sum(r["status"] == "warmup" for r in rows) == per_file
    doc = lltrace.analyze(run).to_dict()
    assert sorted(str(c["stage"]) for c in doc["client_summary"]) == ["None", "None", "warmup"]
    # the run's own figures: the two measured runs only, as the client measured them
    ttfts = [t for r in runs for t, e in zip(r["ttfts"], r["errors"], strict=True) if not e]
    req = doc["requests"]
    assert (req["count"], req["counted"]) == (3 * per_file, 2 * per_file)
    (warm,) = req["excluded"]
    assert (warm["outcome"], warm["requests"], warm["causes"], warm["no_cause_given"]) == (
        "warmup",
        per_file,
        [],
        per_file,
    )
    assert req["ttft_s"]["mean"] == pytest.approx(statistics.fmean(ttfts), rel=1e-9)


def test_the_sweeps_summary_csv_is_skipped_for_what_it_is(tmp_path: Path) -> None:
    """sweep/serve.py also writes the experiment's summary.csv (pandas' to_csv of every run's data, the index
    first): the same results again, said so rather than called an unknown or damaged file."""
    combo, runs, _ = _sweep(tmp_path)
    keys = list(dict.fromkeys(k for r in runs for k in r))
    lines = [",".join(["", *keys])] + [
        ",".join([str(i), *(json.dumps(r.get(k)) for k in keys)]) for i, r in enumerate(runs)
    ]
    (combo.parent / "summary.csv").write_text("\n".join(lines) + "\n")
    run = lltrace.ingest([combo.parent], store=tmp_path / "store")
    (skipped,) = [s for s in run.metadata["skipped"] if s["path"].endswith("summary.csv")]
    assert skipped["reason"].startswith("vllm bench sweep's summary.csv")


def test_the_sweeps_summary_csv_named_alone_says_what_it_is(tmp_path: Path) -> None:
    combo, runs, _ = _sweep(tmp_path)
    keys = list(dict.fromkeys(k for r in runs for k in r))
    path = combo.parent / "summary.csv"
    path.write_text(",".join(["", *keys]) + "\n0," + ",".join(json.dumps(runs[0].get(k)) for k in keys) + "\n")
    with pytest.raises(lltrace.errors.UnknownFormat, match="not read: vllm bench sweep's summary.csv"):
        lltrace.ingest([path], store=tmp_path / "store")

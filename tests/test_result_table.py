"""The result table vLLM's bench client prints to its stdout, read as the run's own summary.

Expected values come from the run's result file read with the json module and rounded the way the client prints
them (``"{:<10.2f}"``, vllm/benchmarks/serve.py ``benchmark``), never from lltrace's reading of that file. Every
real stdout in sample_traces/ is checked against its own result file; the layouts of other
versions are fixtures built from the client's source at that version.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA, SAMPLES

import lltrace
from lltrace.parsers import detect
from lltrace.parsers.result_table import read_tables

PAIRS = sorted(DATA.glob("vllm_cpu/*/bench/*.client.log")) + sorted(
    (SAMPLES / "vllm_cpu_limits").glob("[IN]_*/bench/*.client.log")
)
_NAMES = {"ttft": ("ttft",), "tpot": ("tpot",), "itl": ("itl",), "e2e": ("e2el", "e2e_latency")}


def _doc(paths: list[Path], store: Path) -> dict[str, Any]:
    return lltrace.analyze([str(p) for p in paths], store=store).to_dict()


def _result_file(log: Path) -> Path:
    return log.with_name(log.name.replace(".client.log", ".json"))


def _same_figures(entry: dict[str, Any], raw: dict[str, Any]) -> None:
    """A printed table's summary against its run's result object, each figure as the client prints it."""
    assert entry["completed"] == raw["completed"]
    assert entry["failed"] == raw.get("failed")  # SGLang prints no failed count, nor writes one
    assert entry["duration_s"] == pytest.approx(round(raw["duration"], 2), abs=1e-12)
    assert entry["achieved_rate_per_s"] == pytest.approx(round(raw["request_throughput"], 2), abs=1e-12)
    rate = raw["request_rate"]
    assert entry["requested_rate_per_s"] == ("inf" if rate in ("inf", float("inf")) else rate)
    assert entry["max_concurrency"] == raw.get("max_concurrency")
    assert entry["mean_input_tokens"] == pytest.approx(raw["total_input_tokens"] / raw["completed"])
    assert entry["mean_output_tokens"] == pytest.approx(raw["total_output_tokens"] / raw["completed"])
    assert entry["output_tokens_per_s"] == pytest.approx(round(raw["output_throughput"], 2), abs=1e-12)
    total = raw.get("total_token_throughput", raw.get("total_throughput"))
    assert entry["total_tokens_per_s"] == pytest.approx(round(total, 2), abs=1e-12)
    if raw.get("request_goodput") is not None:
        assert entry["goodput_per_s"] == pytest.approx(round(raw["request_goodput"], 2), abs=1e-12)
        assert entry["goodput_slos"]  # the SLOs from the same stdout's options
    compared = 0
    for lat, names in _NAMES.items():
        for stat in ("mean", "median", "p90", "p99"):
            ms = next((raw[f"{stat}_{n}_ms"] for n in names if f"{stat}_{n}_ms" in raw), None)
            got = (entry[f"{lat}_s"] or {}).get(stat)
            if ms is None:
                assert got is None
                continue
            assert got == pytest.approx(round(ms, 2) / 1e3, abs=1e-12), (lat, stat)
            compared += 1
    assert compared >= 9  # TTFT, TPOT and ITL: mean, median, p99 at least


@pytest.mark.parametrize("log", PAIRS, ids=lambda p: f"{p.parts[-3]}/{p.name}")
def test_printed_table_gives_the_result_files_figures_to_two_decimals(log: Path, tmp_path: Path) -> None:
    raw = json.loads(_result_file(log).read_text())
    [entry] = _doc([log], tmp_path)["client_summary"]
    assert entry["source"] == str(log) and entry["tool"] == "vllm-bench-client-log"
    _same_figures(entry, raw)


@pytest.mark.parametrize("run", ["Q_sglang_bench", "R_sglang_rates"])
def test_sglangs_printed_tables_give_its_result_lines_figures(run: str, tmp_path: Path) -> None:
    """SGLang's bench_serving prints a table of the same look that opens with its Backend row, one per rate."""
    bench = SAMPLES / "vllm_cpu_limits" / run / "bench"
    log = bench / "sglang_bench.client.log"
    assert detect(log).name == "sglang-bench-log"
    raws = [json.loads(line) for line in (bench / "sglang_bench.jsonl").read_text().splitlines() if line.strip()]
    entries = _doc([log], tmp_path / "alone")["client_summary"]
    assert len(entries) == len(raws) >= 1
    for entry, raw in zip(entries, raws, strict=True):
        assert entry["tool"] == "sglang-bench-log"
        _same_figures(entry, raw)
    both = _doc([log, bench / "sglang_bench.jsonl"], tmp_path / "both")
    assert [e["tool"] for e in both["client_summary"]] == ["sglang-bench"] * len(raws)


def test_a_stdout_beside_its_result_file_is_read_once_from_the_file(tmp_path: Path) -> None:
    """Each of run A's three stdouts prints the run its result file holds: one summary per run, the file's."""
    bench = DATA / "vllm_cpu" / "A_baseline" / "bench"
    doc = _doc(sorted(bench.iterdir()), tmp_path)
    assert [Path(e["source"]).name for e in doc["client_summary"]] == [
        "bench_profiled_8req.json",
        "bench_random_200req_rate4.json",
        "bench_random_300req_rate40.json",
    ]
    logs = [s for s in doc["run"]["sources"] if s["format"] == "vllm-bench-client-log"]
    assert len(logs) == 3
    for s in logs:
        assert s["version"].endswith(
            f"the same run as {Path(s['path']).name.replace('.client.log', '.json')} (read from there)"
        )


def test_another_runs_result_file_does_not_hide_a_printed_table(tmp_path: Path) -> None:
    """Run B's 32-request stdout given with its 64-request result file: two runs, two summaries."""
    bench = DATA / "vllm_cpu" / "B_kvpressure" / "bench"
    doc = _doc([bench / "bench_kvpressure_32req_profiled.client.log", bench / "bench_kvpressure_64req.json"], tmp_path)
    assert sorted(e["completed"] for e in doc["client_summary"]) == [32, 64]


# benchmark_serving.py as of late 2024 (its benchmark(): the rate, burstiness and concurrency lines, then the
# table without a failed count and with "Total Token throughput"), two runs in one stdout, as a sweep script
# prints them; the Namespace has neither bench_type nor request_id_prefix (the client pads each value to ten
# characters, left out here: the real stdouts above have it)
_OLD = """Namespace(backend='vllm', base_url=None, host='localhost', port=8000, endpoint='/v1/completions', \
dataset_name='random', model='meta-llama/Llama-3.1-8B-Instruct', num_prompts=32, request_rate={rate}, seed=0, \
save_result=False, max_concurrency=32)
Starting initial single prompt test run...
Initial test run completed. Starting main benchmark run...
Traffic request rate: {rate}
Burstiness factor: 1.0 (Poisson process)
Maximum request concurrency: 32
100%|██████████| 32/32 [02:30<00:00,  4.71s/it]
============ Serving Benchmark Result ============
Successful requests:                     32
Benchmark duration (s):                  {dur}
Total input tokens:                      65536
Total generated tokens:                  65536
Request throughput (req/s):              0.21
Output token throughput (tok/s):         434.40
Total Token throughput (tok/s):          868.80
---------------Time to First Token----------------
Mean TTFT (ms):                          7279.56
Median TTFT (ms):                        7099.88
P99 TTFT (ms):                           10999.46
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          70.14
Median TPOT (ms):                        70.23
P99 TPOT (ms):                           72.63
---------------Inter-token Latency----------------
Mean ITL (ms):                           70.14
Median ITL (ms):                         68.15
P99 ITL (ms):                            72.47
==================================================
"""


def test_2024_layout_two_runs_in_one_stdout(tmp_path: Path) -> None:
    log = tmp_path / "sweep.log"
    log.write_text(_OLD.format(rate="inf", dur="150.87") + _OLD.format(rate="2.0", dur="198.68").split("\n", 1)[1])
    assert detect(log).name == "vllm-bench-client-log"
    doc = _doc([log], tmp_path / "store")
    first, second = doc["client_summary"]
    assert (first["stage"], second["stage"]) == (0, 1)
    assert (first["requested_rate_per_s"], second["requested_rate_per_s"]) == ("inf", 2.0)
    assert first["max_concurrency"] == second["max_concurrency"] == 32
    assert (first["duration_s"], second["duration_s"]) == (150.87, 198.68)
    assert first["failed"] is None  # not printed before 2025: unknown, not 0
    assert first["total_tokens_per_s"] == 868.80 and first["mean_output_tokens"] == 65536 / 32
    assert first["ttft_s"] == pytest.approx({"mean": 7.27956, "median": 7.09988, "p90": None, "p99": 10.99946})


# vllm/benchmarks/serve.py @009e6d4a: concurrency and a configured rate inside the table, the peak figures, the
# goodput row, a percentile with a decimal; the table alone, as it is pasted into an issue
_NEW = """============ Serving Benchmark Result ============
Successful requests:                     50
Failed requests:                         2
Maximum request concurrency:             16
Request rate configured (RPS):           0.20
Benchmark duration (s):                  1044.40
Total input tokens:                      55836
Total generated tokens:                  190012
Request throughput (req/s):              0.05
Request goodput (req/s):                 0.04
Output token throughput (tok/s):         181.93
Peak output token throughput (tok/s):    240.00
Peak concurrent requests:                9.00
Total token throughput (tok/s):          235.40
---------------Time to First Token----------------
Mean TTFT (ms):                          51.20
Median TTFT (ms):                        48.75
P90 TTFT (ms):                           70.10
P99.9 TTFT (ms):                         99.00
----------------End-to-end Latency----------------
Mean E2EL (ms):                          20123.45
Median E2EL (ms):                        19876.00
P90 E2EL (ms):                           24000.12
==================================================
"""


def test_todays_layout_pasted_alone(tmp_path: Path) -> None:
    log = tmp_path / "issue.txt"
    log.write_text("Before this PR:\n\n" + _NEW)
    assert detect(log).name == "vllm-bench-client-log"
    [e] = _doc([log], tmp_path / "store")["client_summary"]
    assert (e["completed"], e["failed"], e["max_concurrency"]) == (50, 2, 16)
    assert (e["requested_rate_per_s"], e["achieved_rate_per_s"], e["goodput_per_s"]) == (0.2, 0.05, 0.04)
    assert e["goodput_slos"] is None  # no options printed: the SLOs are unknown
    assert e["ttft_s"] == pytest.approx({"mean": 0.0512, "median": 0.04875, "p90": 0.0701, "p99": None})
    assert e["e2e_s"] == pytest.approx({"mean": 20.12345, "median": 19.876, "p90": 24.00012, "p99": None})
    assert e["tpot_s"] is None and e["itl_s"] is None  # not selected, not printed
    [table] = read_tables(log.read_text())
    assert table.figures["p99.9_ttft_ms"] == 99.0 and table.figures["max_concurrent_requests"] == 9.0


def test_unstreamed_cut_off_and_garbled_tables_say_so(tmp_path: Path) -> None:
    rows = _NEW.splitlines()
    unstreamed = "\n".join(
        r.replace("51.20", "0.00").replace("48.75", "0.00").replace("70.10", "0.00").replace("99.00", "0.00")
        for r in rows
    )
    log = tmp_path / "run.log"
    # a garbled figure, then the stdout cut off inside the second table
    garbled = unstreamed.replace("181.93", "[result]")
    log.write_text(garbled + "\n" + "\n".join(rows[:8]) + "\n")
    result = lltrace.analyze([str(log)], store=tmp_path / "store")
    doc = result.to_dict()
    first, second = doc["client_summary"]
    assert first["ttft_s"] is None and first["e2e_s"]["mean"] == pytest.approx(20.12345)
    assert first["output_tokens_per_s"] is None
    assert second["duration_s"] == 1044.40 and second["ttft_s"] is None
    [src] = doc["run"]["sources"]
    warnings = "\n".join(src["warnings"])
    assert "line 1: every TTFT figure is 0 ms" in warnings
    assert "line 11: 1 figure not a number dropped (Output token throughput (tok/s):         [result])" in warnings
    assert "line 25: the result table is cut off" in warnings
    assert src["dropped"] == {"summary_values_not_numbers": 1}


# SGLang's bench_serving before 2025 (the layout of a public LoRA-serving study's results: "Total throughput", no
# peak rows, a median TPOT printed "-0.00"), one table per rate after a heading
_SGLANG_2024 = """# request rate: 2

============ Serving Benchmark Result ============
Backend:                                 sglang
Traffic request rate:                    2.0
Successful requests:                     996
Benchmark duration (s):                  264.25
Total input tokens:                      342460
Total generated tokens:                  218257
Total generated tokens (retokenized):    103837
Request throughput (req/s):              3.77
Input token throughput (tok/s):          1295.95
Output token throughput (tok/s):         825.94
Total throughput (tok/s):                2121.89
----------------End-to-End Latency----------------
Mean E2E Latency (ms):                   2098.07
Median E2E Latency (ms):                 606.86
---------------Time to First Token----------------
Mean TTFT (ms):                          2074.09
Median TTFT (ms):                        606.88
P99 TTFT (ms):                           15089.74
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          1.76
Median TPOT (ms):                        -0.00
P99 TPOT (ms):                           28.33
==================================================
"""


def test_sglangs_2024_layout(tmp_path: Path) -> None:
    log = tmp_path / "results.md"
    log.write_text(_SGLANG_2024 + "\n" + _SGLANG_2024.replace("rate: 2", "rate: 4").replace("2.0\n", "4.0\n"))
    assert detect(log).name == "sglang-bench-log"
    rows = _doc([log], tmp_path / "store")["client_summary"]
    assert [r["requested_rate_per_s"] for r in rows] == [2.0, 4.0]
    for r in rows:
        assert (r["completed"], r["duration_s"], r["total_tokens_per_s"]) == (996, 264.25, 2121.89)
        assert r["e2e_s"] == pytest.approx({"mean": 2.09807, "median": 0.60686, "p90": None, "p99": None})
        assert r["tpot_s"]["median"] == 0 and str(r["tpot_s"]["median"]) == "0.0"  # not -0.0


def test_a_server_and_its_bench_in_one_terminal(tmp_path: Path) -> None:
    """Run A's real server log and the stdout of its 200-request bench in one file (a notebook cell, one
    terminal): read as the server's log, its stats lines as the log alone gives them, and the bench's table. (The
    bench's options come after the server's first 64 KB, the part formats are told by.)"""
    a = DATA / "vllm_cpu" / "A_baseline"
    stdout = a / "bench" / "bench_random_200req_rate4.client.log"
    raw = json.loads(_result_file(stdout).read_text())
    one = tmp_path / "terminal.log"
    one.write_text((a / "server.log").read_text() + stdout.read_text())
    assert detect(one).name == "vllm-server-log"
    stats = "SELECT log_stamp, running, waiting, kv_usage FROM engine_stats ORDER BY log_stamp, running, waiting"
    alone = lltrace.ingest([a / "server.log"], store=tmp_path / "alone").sql(stats).rows()
    run = lltrace.ingest([one], store=tmp_path / "one")
    assert run.sql(stats).rows() == alone and len(alone) > 10
    [entry] = lltrace.analyze(run).to_dict()["client_summary"]
    _same_figures(entry, raw)
    both = _doc([one, _result_file(stdout)], tmp_path / "both")
    assert [Path(e["source"]).name for e in both["client_summary"]] == [_result_file(stdout).name]


# The prefixes a kept stdout's lines carry that the client did not print: each line's own stamp (a CI runner's,
# seven decimals; kubectl's, trailing zeros trimmed), a compose service, a comment sign in a script or README.
_PREFIXES = {
    "ci-stamp": lambda i: (
        f"2025-03-{1 + i // 86400 % 28:02d}T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}."
        f"{i * 7919 % 10**7:07d}Z "
    ),
    "kubectl-stamp": lambda i: f"2025-03-01T12:{i // 60 % 60:02d}:{i % 60:02d}.{(i * 31 + 1) % 10**6}Z ",
    "compose": lambda i: "bench-1  | ",
    "comment": lambda i: "    # ",
}


@pytest.mark.parametrize("style", sorted(_PREFIXES))
@pytest.mark.parametrize("run", ["N_bench_pcts", "R_sglang_rates"])
def test_a_table_kept_with_a_prefix_on_every_line(run: str, style: str, tmp_path: Path) -> None:
    """A real stdout with a prefix on each of its lines gives its result file's figures, as the stdout alone does."""
    bench = SAMPLES / "vllm_cpu_limits" / run / "bench"
    [stdout] = bench.glob("*.client.log")
    result = next(p for p in bench.iterdir() if p.suffix in (".json", ".jsonl"))
    raws = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
    prefix = _PREFIXES[style]
    log = tmp_path / "kept.log"
    log.write_text("".join(prefix(i) + line + "\n" for i, line in enumerate(stdout.read_text().splitlines())))
    assert detect(log).name == detect(stdout).name
    entries = _doc([log], tmp_path / "store")["client_summary"]
    assert len(entries) == len(raws) >= 1
    for entry, raw in zip(entries, raws, strict=True):
        _same_figures(entry, raw)


def test_lines_without_the_tables_prefix_are_not_its_rows() -> None:
    """In a compose log, another service's lines inside the table (a server's, with figures of the same names) are
    not read into it."""
    rows = _NEW.splitlines()
    lines = [f"bench-1   | {r}" for r in rows[:5]] + ["vllm-1    | Successful requests:  999"]
    lines += [f"bench-1   | {r}" for r in rows[5:]]
    [table] = read_tables("\n".join(lines))
    assert table.closed and table.figures["completed"] == 50 and table.figures["duration"] == 1044.40


def test_a_table_logged_whole_carries_the_prefix_on_its_first_line_only():
    """A wrapper that logs the printed table as one message: the logger's prefix on the header line alone."""
    rows = _NEW.splitlines()
    text = "\n".join(["INFO 12-01 10:00:00 [bench.py:42] " + rows[0], *rows[1:]])
    [table] = read_tables(text)
    [alone] = read_tables(_NEW)
    assert table.closed and table.figures == alone.figures and table.figures["completed"] == 50


def test_all_zero_inter_token_figures_are_no_measurement(tmp_path: Path) -> None:
    """The public LoRA study's tables end with an ITL section of zeros beside a 1.76 ms mean TPOT: the client's mean of
    no gaps (np.mean(itls or 0)), not a measured 0 ms. Its ITL figures are NULL and said so; TTFT and TPOT stand."""
    itl = (
        "---------------Inter-token Latency----------------\n"
        "Mean ITL (ms):                           0.00      \n"
        "Median ITL (ms):                         0.00      \n"
        "P99 ITL (ms):                            0.00      \n"
    )
    log = tmp_path / "results.md"
    log.write_text(_SGLANG_2024.replace("==================================================\n", itl + "=" * 50 + "\n"))
    [table] = read_tables(log.read_text())
    assert table.figures["mean_itl_ms"] == 0 and table.figures["p99_itl_ms"] == 0  # as printed
    doc = _doc([log], tmp_path / "store")
    [entry] = doc["client_summary"]
    assert entry["itl_s"] is None and entry["tpot_s"]["mean"] == pytest.approx(0.00176)
    assert entry["ttft_s"]["mean"] == pytest.approx(2.07409)
    [src] = doc["run"]["sources"]
    assert any("every inter-token latency figure is 0 ms" in w and "line 3" in w for w in src["warnings"])

"""The same benchmark result read from two files of one run, kept once.

AIPerf and GenAI-Perf write their statistics as JSON and again as CSV into one artifacts folder: the CSV copy is
left out where the JSON aggregate beside it gives the same figures (``copy_of`` in its source).

``vllm bench sweep serve`` writes each run of a combination to ``run=N.json`` and then all of them again, as a
JSON array, to the combination's ``summary.json`` (vllm/benchmarks/sweep/serve.py ``run_comb``); a folder holding
both would count every request and every client figure twice. A result is known by its fingerprint (its summary
keys and values and the lengths of its per-request lists, ``parsers.vllm.result_fingerprint``); the copy kept is
the one in the file holding the fewest results (a run's own file), the others are left out of the run's rows and
summaries and listed in their source's ``repeated_results``. Never a silent double count, never a silent drop.

vLLM's and SGLang's bench clients also print each run's result table to their stdout: a printed table whose run a
result file of the run gives too is left out (``printed_copies`` in its source), the file's figures kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def drop_repeated_results(stage: Path, sources: list[dict[str, Any]]) -> list[str]:
    """Keep each bench result once among the run's ``sources`` (their ``bench`` lists, edited in place) and
    its per-request rows once in ``stage/_bench``; returns one warning per source that repeated another's."""
    first: dict[str, str] = {}  # fingerprint -> where it is kept ("file" or "file#k")
    order = sorted(range(len(sources)), key=lambda i: (len(sources[i].get("bench") or []), i))
    dropped: dict[int, set[str]] = {}  # part -> client ids whose rows go
    for i in order:
        src = sources[i]
        kept = []
        for b in src.get("bench") or []:
            fp = b.get("fingerprint")
            if fp is None or fp not in first:
                if fp is not None:
                    first[fp] = b["client_id"]
                kept.append(b)
                continue
            dropped.setdefault(src["part"], set()).add(b["client_id"])
            src.setdefault("repeated_results", []).append({"client_id": b["client_id"], "same_as": first[fp]})
        if src.get("bench"):
            src["bench"] = kept
    for part, ids in dropped.items():
        path = stage / "_bench" / f"part-{part:05d}.parquet"
        if path.exists():
            table = pq.read_table(path)
            gone = pc.is_in(table["client_id"], value_set=pa.array(sorted(ids), pa.string()))
            pq.write_table(table.filter(pc.invert(gone)), path)
    _drop_printed_copies(sources)
    out = _csv_copies(sources)
    for src in sources:
        repeats = src.get("repeated_results")
        if repeats:
            same = sorted({r["same_as"] for r in repeats})
            out.append(
                f"{src['path']}: {len(repeats)} result(s) the run already has from {', '.join(same[:3])}"
                + (f" and {len(same) - 3} more" if len(same) > 3 else "")
                + " (a sweep's summary of its runs): read once"
            )
    return out


def _csv_copies(sources: list[dict[str, Any]]) -> list[str]:
    """AIPerf (and GenAI-Perf) write the same statistics as JSON and as CSV into one artifacts folder: the CSV
    copy, rounded to two decimals, is left out where the JSON aggregate beside it gives the same figures. guidellm
    writes benchmarks.json and benchmarks.csv: the CSV is left out where the run's JSON holds its benchmarks (by
    guidellm's benchmark ids; without ids, by their request counts and mean TTFT)."""
    out = _guidellm_csv_copies(sources)
    jsons = [s for s in sources if s.get("format") == "aiperf-summary" and s.get("aiperf_summary")]
    for src in sources:
        if src.get("format") != "aiperf-summary-csv" or not src.get("aiperf_summary"):
            continue
        for other in jsons:
            if Path(other["path"]).parent == Path(src["path"]).parent and _same_figures(src, other):
                src["aiperf_summary"] = None
                src["copy_of"] = other["path"]
                out.append(f"{src['path']}: the CSV copy of {Path(other['path']).name}'s figures beside it: read once")
                break
    return out


def _drop_printed_copies(sources: list[dict[str, Any]]) -> None:
    """vLLM's and SGLang's bench clients print each run's result table to their stdout and write the same figures
    to their result file: a printed table is left out where a result file among the run's sources gives the same
    run (its counts exact, its duration and request rate to the table's two decimals), and kept where it is the
    run's only record. What was left out is listed in the source's ``printed_copies`` and said in its
    ``version``, not warned: a stdout beside its result file is the usual case."""
    results = [b for s in sources if s.get("format") in ("vllm-bench", "sglang-bench") for b in s.get("bench") or []]
    for src in sources:
        tables = [b for b in src.get("bench") or [] if b.get("printed_at_line") is not None]
        if not tables:
            continue
        copies = {id(t): r for t in tables for r in results if _same_run(t, r)}
        if not copies:
            continue
        src["bench"] = [b for b in src["bench"] if id(b) not in copies]
        src["printed_copies"] = [
            {"line": t["printed_at_line"], "same_as": copies[id(t)]["client_id"]} for t in tables if id(t) in copies
        ]
        same = sorted({c["same_as"] for c in src["printed_copies"]})
        src["version"] = (
            f"{src.get('version')}, the same run{'s' if len(copies) > 1 else ''} as {', '.join(same[:3])}"
            + (f" and {len(same) - 3} more" if len(same) > 3 else "")
            + " (read from there)"
        )


def _same_run(table: dict[str, Any], result: dict[str, Any]) -> bool:
    """Whether a printed table is a result's own: the counts it prints as integers equal, the duration and the
    request rate it prints with two decimals (``{:<10.2f}``) equal to those decimals; the count of completed
    requests and the duration compared at least."""
    compared = set()
    for key in ("completed", "failed", "total_input_tokens", "total_output_tokens"):
        a, b = table.get(key), result.get(key)
        if a is not None and b is not None:
            if a != b:
                return False
            compared.add(key)
    for key in ("duration", "request_throughput"):
        a, b = table.get(key), result.get(key)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            if abs(a - b) > 0.0051:
                return False
            compared.add(key)
    return {"completed", "duration"} <= compared


def _same_figures(csv_src: dict[str, Any], json_src: dict[str, Any]) -> bool:
    """Whether the CSV's TTFT and request latency (mean, p50, p99) are the JSON's to the CSV's two decimals of a
    millisecond: the same run written twice, not two runs."""
    mine, theirs = csv_src["aiperf_summary"]["metrics"], json_src["aiperf_summary"]["metrics"]
    ttft = theirs.get("time_to_first_token") or theirs.get("ttft")
    pairs = [(mine.get("time_to_first_token"), ttft), (mine.get("request_latency"), theirs.get("request_latency"))]
    compared = 0
    for a, b in pairs:
        if not a or not b:
            continue
        for stat in ("avg", "p50", "p99"):
            x, y = a.get(stat), b.get(stat)
            if x is None or y is None:
                continue
            compared += 1
            if abs(x - y) > 0.0051e-3:  # ms figures written with two decimals
                return False
    return compared > 0


def _guidellm_key(summary: dict[str, Any]) -> Any:
    """What tells one guidellm benchmark from another: its id (>= 0.4), else its request counts and mean TTFT."""
    if summary.get("benchmark_id"):
        return summary["benchmark_id"]
    ttft = ((summary.get("metrics") or {}).get("time_to_first_token_ms") or {}).get("successful") or {}
    totals = summary.get("request_totals") or {}
    return (totals.get("successful"), totals.get("errored"), ttft.get("mean"))


def _guidellm_csv_copies(sources: list[dict[str, Any]]) -> list[str]:
    out = []
    held = {
        _guidellm_key(b)
        for s in sources
        if s.get("format") == "guidellm-benchmarks"
        for b in s.get("guidellm_metrics") or []
    }
    for src in sources:
        mine = src.get("guidellm_metrics") or []
        if src.get("format") != "guidellm-csv" or not mine or not all(_guidellm_key(b) in held for b in mine):
            continue
        src["guidellm_metrics"] = None
        json_files = sorted({Path(s["path"]).name for s in sources if s.get("format") == "guidellm-benchmarks"})
        src["copy_of"] = json_files
        out.append(f"{src['path']}: the CSV report of {', '.join(json_files)}'s benchmarks: read once, from the JSON")
    return out

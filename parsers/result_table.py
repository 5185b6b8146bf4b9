"""The result table a serving benchmark client prints to its stdout, read back into the figures its result file
would hold.

vLLM's ``vllm bench serve`` / ``benchmark_serving.py`` (and TensorRT-LLM's copy of it) and SGLang's
``bench_serving`` print one table per run, whether or not they save a result file, and that table is often the
only record a run leaves (a CI log, a pasted issue, a notebook cell)::

    ============ Serving Benchmark Result ============
    Successful requests:                     8
    Benchmark duration (s):                  0.15
    ...
    ---------------Time to First Token----------------
    Mean TTFT (ms):                          66.92
    P99 TTFT (ms):                           70.97
    ==================================================

Each row is ``"{:<40} {:<10}".format(label, value)``, every float printed with two decimals
(vllm/benchmarks/serve.py ``benchmark``; sglang/bench_serving.py ``benchmark``). A row is read back into the key
the same client writes to its result JSON (``mean_ttft_ms``, ``total_input_tokens``, ``request_rate``…), so the
figures are read by the same code as a result file's. vLLM prints its request rate and concurrency on lines of
their own before the table (``Traffic request rate: inf``); those are taken from the lines before each table.

Where the table was kept, its lines often carry a prefix the client did not print: a CI runner's or
``kubectl logs --timestamps``' stamp, ``docker compose``'s ``bench-1  | ``, a comment sign in a script or a
README. A table's rows are the lines that carry its header line's prefix, the same up to its digits and spacing
(a stamp changes from line to line), or none (a logger given the whole table prefixes its first line only); other
prefixed lines between them (a server's, another container's) are not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

HEADER = "Serving Benchmark Result"

# label (lower case, without its colon) -> the key the same client writes to its result JSON
_ROWS = {
    "successful requests": "completed",
    "failed requests": "failed",
    "maximum request concurrency": "max_concurrency",
    "max request concurrency": "max_concurrency",  # SGLang
    "request rate configured (rps)": "request_rate",
    "traffic request rate": "request_rate",  # SGLang in the table; vLLM on a line before it
    "benchmark duration (s)": "duration",
    "total input tokens": "total_input_tokens",
    "total generated tokens": "total_output_tokens",
    "total generated tokens (retokenized)": "total_output_tokens_retokenized",
    "request throughput (req/s)": "request_throughput",
    "request goodput (req/s)": "request_goodput",
    "input token throughput (tok/s)": "input_throughput",
    "output token throughput (tok/s)": "output_throughput",
    "peak output token throughput (tok/s)": "max_output_tokens_per_s",
    "peak concurrent requests": "max_concurrent_requests",
    "total token throughput (tok/s)": "total_token_throughput",  # "Total Token throughput" before 2025
    "total throughput (tok/s)": "total_throughput",  # SGLang before 2025
    "concurrency": "concurrency",  # SGLang: summed latency over duration
}
# "Mean TTFT (ms)", "P99.9 TPOT (ms)", "Median E2E Latency (ms)": {stat}_{metric}_ms
_STAT_ROW = re.compile(r"^(mean|median|std|max|p\d+(?:\.\d+)?) (ttft|tpot|itl|e2el|e2e latency) \(ms\)$")
_ROW = re.compile(r"^(?P<label>[A-Za-z][^:]*?):\s+(?P<value>\S+)\s*$")
_RULE = re.compile(r"^=+$")
# the header line "============ Serving Benchmark Result ============", after whatever prefix its line carries
_HEADER_LINE = re.compile(r"^(?P<prefix>.*?)=+ *" + HEADER + r" *=+\s*$")
_UNSET = ("none", "not set")  # vLLM's None, SGLang's "not set": no limit


@dataclass
class ResultTable:
    """One printed result table: its figures under the result file's keys, where it starts (1-based line) and
    whether its closing rule was seen."""

    line: int
    figures: dict[str, Any] = field(default_factory=dict)
    closed: bool = False
    not_numbers: list[tuple[int, str]] = field(default_factory=list)  # (line, row) whose value is not a number


def _key(label: str) -> str | None:
    label = label.strip().lower()
    if label in _ROWS:
        return _ROWS[label]
    m = _STAT_ROW.match(label)
    return f"{m.group(1)}_{m.group(2).replace(' ', '_')}_ms" if m else None


def _value(text: str) -> float | int | str | None:
    low = text.lower()
    if low in _UNSET:
        return None
    if low in ("inf", "infinity"):
        return "inf"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text) + 0.0  # "-0.00", a tiny negative printed with two decimals, is 0
    except ValueError:
        return text


def _prefix(prefix: str) -> re.Pattern[str]:
    """The prefix every line of a table carries, from its header line's: the same text, up to its digit runs
    (a time stamp, a container's number, a pid) and its spacing."""
    parts = re.split(r"(\d+|\s+)", prefix)
    return re.compile("".join(r"\d+" if p.isdigit() else r"\s*" if p.isspace() else re.escape(p) for p in parts))


def _row(line: str, prefix: re.Pattern[str]) -> tuple[str, str | None, str]:
    """A line of a table, its prefix removed: (the row, its result-file key or None, its value text). A line without
    the prefix is read as it is: a logger that prefixed only the first line of the table it was given (another
    process's prefixed line is no row either way)."""
    m = prefix.match(line)
    row = (line[m.end() :] if m else line).strip()
    r = _ROW.match(row)
    return row, (_key(r.group("label")) if r else None), (r.group("value") if r else "")


def read_tables(text: str) -> list[ResultTable]:
    """Every result table in a client's stdout, in order, with the rate and concurrency lines printed before it."""
    tables: list[ResultTable] = []
    lines = text.splitlines()
    since = 0  # the first line after the last table: vLLM's rate and concurrency lines come after it
    current: ResultTable | None = None
    prefix = _prefix("")
    for n, line in enumerate(lines, 1):
        if current is None:
            m = _HEADER_LINE.match(line)
            if m is None:
                continue
            prefix = _prefix(m.group("prefix"))
            current = ResultTable(line=n)
            for before in lines[since : n - 1]:  # vLLM's "Traffic request rate:" / "Maximum request concurrency:"
                _, key, value = _row(before, prefix)
                if key in ("request_rate", "max_concurrency"):
                    current.figures[key] = _value(value)
            continue
        row, key, value = _row(line, prefix)
        if _RULE.match(row):
            current.closed = True
            tables.append(current)
            current, since = None, n
            continue
        if key is None:
            continue  # section rules, SGLang's "Backend:", speculative decoding, probe requests: not figures here
        figure = _value(value)
        if isinstance(figure, str) and figure != "inf":
            current.not_numbers.append((n, row))
            continue
        current.figures[key] = figure
    if current is not None:
        tables.append(current)
    return tables


def table_tool(head: bytes) -> str | None:
    """Which client printed the first result table in ``head``: ``"sglang"`` (its table opens with a
    ``Backend:`` row), ``"vllm"`` (vLLM's, or a copy of it such as TensorRT-LLM's), or None when there is none."""
    if HEADER.encode() not in head:
        return None
    text = head.decode("utf-8", errors="replace")
    lines = text.splitlines()
    for n, line in enumerate(lines):
        m = _HEADER_LINE.match(line)
        if m is None:
            continue
        prefix = _prefix(m.group("prefix"))
        rows = [_row(r, prefix)[0] for r in lines[n + 1 : n + 4]]
        if any(r.startswith("Backend:") for r in rows):
            return "sglang"
        return "vllm" if any(r.startswith("Successful requests:") for r in rows) else None
    return None

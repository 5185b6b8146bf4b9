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


def read_tables(text: str) -> list[ResultTable]:
    """Every result table in a client's stdout, in order, with the rate and concurrency lines printed before it."""
    tables: list[ResultTable] = []
    before: dict[str, Any] = {}  # vLLM's "Traffic request rate:" / "Maximum request concurrency:" lines
    current: ResultTable | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if current is None:
            if HEADER in line and line.startswith("="):
                current = ResultTable(line=n, figures=dict(before))
                before = {}
                continue
            m = _ROW.match(line)
            key = _key(m.group("label")) if m else None
            if key in ("request_rate", "max_concurrency"):
                before[key] = _value(m.group("value"))
            continue
        if _RULE.match(line):
            current.closed = True
            tables.append(current)
            current = None
            continue
        m = _ROW.match(line)
        key = _key(m.group("label")) if m else None
        if key is None:
            continue  # section rules, SGLang's "Backend:", speculative decoding, probe requests: not figures here
        value = _value(m.group("value"))
        if isinstance(value, str) and value != "inf":
            current.not_numbers.append((n, line))
            continue
        current.figures[key] = value
    if current is not None:
        tables.append(current)
    return tables


def table_tool(head: bytes) -> str | None:
    """Which client printed the first result table in ``head``: ``"sglang"`` (its table opens with a
    ``Backend:`` row), ``"vllm"`` (vLLM's, or a copy of it such as TensorRT-LLM's), or None when there is none."""
    at = head.find(HEADER.encode())
    if at < 0:
        return None
    rows = head[at:].splitlines()[1:4]
    if any(r.strip().startswith(b"Backend:") for r in rows):
        return "sglang"
    return "vllm" if any(r.strip().startswith(b"Successful requests:") for r in rows) else None

"""SGLang: ``sglang.bench_serving`` output and scheduler logs (``Prefill batch`` / ``Decode batch`` lines in
every version seen, ``Retract requests`` (SGLang's preemption) and ``Req Time Stats`` per-request lines).
What each file holds: docs/formats.md.

The bench output's per-request lists (``--output-details``) have vLLM's semantics and go through the same
bench staging (joined later if spans exist).

Prefill batches become ``engine_steps`` rows (source log): SGLang logs every prefill batch but only every
Nth decode batch, so decode lines are load samples (``engine_stats``), not steps. Times are the log's
``YYYY-MM-DD HH:MM:SS`` (no zone: UTC assumed, recorded in the metadata).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers import vllm
from lltrace.parsers._io import (
    COLLECTOR_CLOCK,
    WALL_CLOCK_FLOOR_S,
    WALL_CLOCK_SLACK_S,
    check_wall_clock,
    collected_seconds,
    json_log_as_text,
    log_date_seconds,
    write_rows,
)
from lltrace.parsers._lines import without_cut_record
from lltrace.parsers.result_table import read_tables, table_tool
from lltrace.parsers.sglang_requests import FINISH, JSON_FINISHED, JSON_RECEIVED, RECEIVE, FinishLines
from lltrace.parsers.vllm_log_lines import Tracebacks, Trouble
from lltrace.source_info import SourceInfo

SCHEDULER_LOG = "sglang-scheduler-log"
SGLANG_BENCH = "sglang-bench"
BENCH_LOG = "sglang-bench-log"


def sniff_sglang_bench(head: bytes) -> bool:
    """SGLang bench_serving output: JSON lines whose keys include SGLang-only fields."""
    line = head.lstrip().split(b"\n", 1)[0]
    return line.startswith(b"{") and b'"backend"' in line and any(k in line for k in vllm.SGLANG_ONLY_KEYS)


# the result schemas bench_serving has written, each told by a key only it (and those after it) has, newest first
_BENCH_SCHEMAS = (
    (
        "total_input",
        "2026 (sglang/benchmark/metrics.py save_results: BenchmarkMetrics field names, total_input / total_output / "
        "total_throughput, p99 e2e; request_rate 'trace' for a trace's own times)",
    ),
    (
        "request_throughput",
        "2024-09 to 2026 (bench_serving.py, sglang.benchmark.serving to 0.5.23 at least: request and input "
        "throughput, mean / median / std / p99 TTFT, TPOT and ITL, concurrency, accept length)",
    ),
    ("completed", "2024-07 (bench_serving.py: mean and median e2e, median TTFT and ITL, output throughput)"),
)


def ingest_sglang_bench(path: str, stage: Path, part: int, **kw: Any) -> SourceInfo:
    """One object per line (a run per request rate), bare ``Infinity``/``NaN`` allowed; the schema named by the
    keys of its results (``_BENCH_SCHEMAS``)."""
    info = vllm.ingest_bench(
        path, stage, part, schema_of=_bench_schema, lists="with --output-details (per-request lists)", **kw
    )
    info.format = SGLANG_BENCH
    return info


def _bench_schema(result: dict[str, Any]) -> str:
    """The bench_serving schema that wrote one result (``_BENCH_SCHEMAS``), by its keys."""
    return next((name for key, name in _BENCH_SCHEMAS if key in result), "keys of no known schema")


def sniff_bench_log(head: bytes) -> bool:
    """SGLang bench_serving's stdout: its result table (``result_table``: the one that opens with a ``Backend:``
    row), after whatever its imports and ``benchmark_args=Namespace(...)`` printed, or pasted alone."""
    return table_tool(head) == "sglang"


def ingest_bench_log(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Each run's printed result table as that run's summary (``bench``), read as a result file's figures are
    (``vllm.printed_results``); left out where the run's result file gives the same run
    (``lltrace.ingest.repeats``)."""
    info = SourceInfo(path=path, format=BENCH_LOG)
    tables = read_tables(Path(path).read_text(encoding="utf-8", errors="replace"))
    if not tables:
        raise TraceFormatError(path, "line 1", "no result table")
    info.details["bench"] = vllm.printed_results(path, tables, info)
    info.records = len(tables)
    info.version = f"sglang bench_serving stdout: {len(tables)} result table{'s' if len(tables) != 1 else ''}"
    return info


_HEAD = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)((?: [A-Z][A-Z_]*\d+)*)\]\s*")
_BATCH = re.compile(r"(Prefill|Decode) batch[.,]\s*(#(?:new-seq|running-req): \d.*)")
_FIELD = re.compile(r"(#?[A-Za-z][\w -]*?(?: \(token/s\))?): (-?\d+(?:\.\d+)?|True|False)")
_RETRACT = re.compile(r"Retract requests\. #retracted_reqs: (\d+)")
_REQ_STATS = re.compile(
    r"Req Time Stats\(rid=([^,]+), input len=(\d+), output len=(\d+), type=(\w+)\): queue_duration=([\d.]+)ms, "
    r"forward_duration=([\d.]+)ms"
)


def sniff_scheduler_log(head: bytes) -> bool:
    """SGLang scheduler output: Prefill/Decode batch lines, retraction or request time stats."""
    text = head.decode("utf-8", "replace")
    return bool(
        re.search(r"(Prefill|Decode) batch[.,] #", text)
        or "Retract requests. #retracted_reqs" in text
        or "Req Time Stats(rid=" in text
        or FINISH + "GenerateReqInput(" in text
        or RECEIVE in text
        or (JSON_FINISHED in text and '"meta_info": {' in text)
    )


def _records(text: str) -> Iterator[tuple[int, str, float | None]]:
    """Log records: lines, split again where a ``[date time ...]`` header starts inside one (lines glued
    together when two processes wrote to one file at once); each with its line's number and the time a log
    collector stamped its line with (``kubectl logs --timestamps``: ``_io.collected_seconds``), else None."""
    for n, line in enumerate(text.splitlines(), 1):
        starts = [m.start() for m in _HEAD.finditer(line)]
        if not starts or starts == [0]:
            yield n, line, None
            continue
        collected = collected_seconds(line[: starts[0]])
        cuts = ([0] if starts[0] and collected is None else []) + starts + [len(line)]
        yield from ((n, line[a:b], collected) for a, b in pairwise(cuts) if line[a:b].strip())


def _engine(rank: str | None) -> str:
    """The engine a rank header names: its data-parallel and pipeline ranks (``DP1 PP0``; "0" where neither). The
    tensor, expert, MoE data-parallel and attention context-parallel ranks (``TP``, ``EP``, ``MOE_DP``, ``ATTN_CP``)
    run its batches together: SGLang's scheduler logs a batch from each attention TP group's first rank (every
    context-parallel rank, or every rank with --enable-metrics-for-all-schedulers: the same batch again)."""
    return " ".join(p for p in (rank or "").split() if re.fullmatch(r"(?:DP|PP)\d+", p)) or "0"


# the scheduler's start-up line with the values it runs with (every SGLang version since 2024 prints it):
# "max_total_num_tokens=N, chunked_prefill_size=N, max_prefill_tokens=N, max_running_requests=N, context_len=N"
_LIMITS = re.compile(r"max_total_num_tokens=(\d+),.*?max_running_requests=(\d+)")
_LIMITS_ORIGIN = "SGLang scheduler start-up line"


def ingest_scheduler_log(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Prefill batches → steps; batch lines → load samples; retractions → cumulative preemptions."""
    info = SourceInfo(path=path, format=SCHEDULER_LOG, version="SGLang scheduler log")
    steps: list[dict[str, Any]] = []
    stats: list[dict[str, Any]] = []
    reqs: list[dict[str, Any]] = []
    finished = FinishLines()
    retracted: dict[str, int] = {}  # by engine
    suspicious = impossible = stamped = 0
    last_ts: float | None = None
    text = without_cut_record(path, Path(path).read_text(encoding="utf-8", errors="replace"), info)
    text, unwrapped = json_log_as_text(text)  # Docker's json-file lines: each line after its collector's stamp
    if unwrapped:
        info.version += f", {unwrapped}"
    trouble = Trouble()
    tracebacks = Tracebacks(trouble)
    seen: dict[tuple, set[str]] = {}  # this second's batch and retraction lines by engine and figures: their ranks
    second: list[Any] = [None, 0]  # the second, and the other ranks' copies read once so far

    def copy_of(h: re.Match[str] | None, rank: str | None, figures: tuple) -> bool:
        """Whether the line is another rank's copy of one its engine logged this second (read once, counted)."""
        if h is None or rank is None:
            return False
        if h.group(1) != second[0]:
            second[0] = h.group(1)
            seen.clear()
        ranks = seen.setdefault((_engine(rank), *figures), set())
        if ranks and rank not in ranks:
            second[1] += 1
            return True
        ranks.add(rank)
        return False

    horizon = time.time() + WALL_CLOCK_SLACK_S
    for n, line, collected in _records(text):
        h = _HEAD.match(line)
        body = line[h.end() :] if h else line
        tracebacks.read(body, n)
        # a collector's stamp is the line's moment with its zone and fraction as written (SGLang's own: to the
        # second, zone unknown)
        ts = collected if collected is not None else log_date_seconds(h.group(1)) if h else None
        if ts is not None and not WALL_CLOCK_FLOOR_S <= ts <= horizon:  # a dated line no real run has
            check_wall_clock(path, f"line {n}", ts, "the line")
        impossible += bool(h) and ts is None
        stamped += collected is not None
        rank = (h.group(2) or "").strip() or None if h else None
        own = h is not None and collected is None  # the time is SGLang's own stamp: the server's local time
        last_ts = ts or last_ts
        if (m := _LIMITS.search(body)) and "engine_config" not in info.details:
            # the running limit is SGLang's sequence limit; the KV pool's size in tokens is what token usage is of
            info.details["engine_config"] = {
                "engine": "sglang",
                "kv_cache_tokens": int(m.group(1)),
                "max_num_seqs": int(m.group(2)),
            }
            info.details["engine_config_origin"] = {
                "kv_cache_tokens": f"{_LIMITS_ORIGIN} (max_total_num_tokens)",
                "max_num_seqs": f"{_LIMITS_ORIGIN} (max_running_requests)",
            }
        elif m := _BATCH.search(body):
            kind, rest = m.groups()
            f = {k.strip(): v for k, v in _FIELD.findall(rest)}
            if copy_of(h, rank, (kind, *sorted((k, v) for k, v in f.items() if "throughput" not in k))):
                continue
            usage = f.get("token usage", f.get("full token usage"))
            stat = {
                "part": part,
                "ts_s": ts,
                "engine": _engine(rank),
                "source": "log",
                "running": float(f["#running-req"]) if "#running-req" in f else None,
                "waiting": float(f["#queue-req"]) if "#queue-req" in f else None,
                "kv_usage": float(usage) if usage is not None else None,
                "log_stamp": h.group(1) if h else None,
                "_local": own,
            }
            if kind == "Prefill":
                stat["prompt_throughput"] = (
                    float(f["input throughput (token/s)"]) if "input throughput (token/s)" in f else None
                )
                steps.append(
                    {
                        "part": part,
                        "step_id": len(steps),
                        "engine": _engine(rank),
                        "start_s": None,
                        "end_s": ts,
                        "kind": "prefill",
                        "kind_from": "log line",
                        "prefill_reqs": int(f.get("#new-seq", 0)),
                        "prefill_tokens": int(f.get("#new-token", 0)),
                        "cached_tokens": int(f["#cached-token"]) if "#cached-token" in f else None,
                        "decode_reqs": None,
                        "decode_tokens": None,
                        "kv_usage": stat["kv_usage"],
                        "log_stamp": h.group(1) if h else None,
                        "_local": own,
                        "cuda_graph": (f.get("cuda graph") or f.get("npu graph")) == "True"
                        if ("cuda graph" in f or "npu graph" in f)
                        else None,
                        "detection": "sglang prefill batch log",
                        "source": "log",
                    }
                )
            else:
                stat["generation_throughput"] = (
                    float(f["gen throughput (token/s)"]) if "gen throughput (token/s)" in f else None
                )
                # speculative decoding: tokens per verify step over the interval's decode batches (scheduler's
                # spec_num_accepted_tokens / spec_num_forward_ct, each reset after the line)
                stat["spec_accept_length"] = float(f["accept len"]) if "accept len" in f else None
            stats.append(stat)
        elif m := _RETRACT.search(body):
            if copy_of(h, rank, ("retract", m.group(1))):
                continue
            retracted[_engine(rank)] = retracted.get(_engine(rank), 0) + int(m.group(1))
            stats.append(
                {
                    "part": part,
                    "ts_s": ts if h else last_ts,
                    "engine": _engine(rank),
                    "source": "log",
                    "preemptions_total": float(retracted[_engine(rank)]),  # each engine's own count
                    "log_stamp": h.group(1) if h else None,
                    "_local": own,
                }
            )
        elif (at := max(body.find(FINISH), body.find(RECEIVE))) >= 0 or JSON_FINISHED in body or JSON_RECEIVED in body:
            if h is None and collected is None and (found := collected_seconds(body[: max(at, 0)])) is not None:
                ts, collected = found, found  # a collector's stamp before a line SGLang wrote without its own
                stamped += 1
            finished.read(body, ts, None if collected is not None else 1.0, collected is None)
        elif m := _REQ_STATS.search(body):
            rid, n_in, n_out, _type, queue_ms, fwd_ms = m.groups()
            if float(fwd_ms) > 1e9:  # one SGLang build logged an epoch in ms here; not a duration
                suspicious += 1
            reqs.append(
                {
                    "request_id": rid,
                    "input_tokens": int(n_in),
                    "output_tokens": int(n_out),
                    "queue_s": float(queue_ms) / 1e3,
                    "status": "finished",
                    "client_id": Path(path).name,
                }
            )
    trouble.report(path, text, info)
    time_stats = len(reqs)
    reqs = _with_finish_lines(path, reqs, finished, info)
    zone = finished.zone_offset_s()
    if zone:  # SGLang's own stamps read in the zone its request lines' epoch stamps show, not as UTC
        for row in (*steps, *stats, *reqs):
            for k in ("end_s", "ts_s", "arrival_s", "finished_s") if row.get("_local") else ():
                if row.get(k) is not None:
                    row[k] -= zone
        info.warnings.append(
            f"{path}: SGLang's own stamps are the server's local time, UTC{zone / 3600:+g} h (its request lines' "
            "epoch stamps show it): read in that zone"
        )
    for table, rows in (("engine_steps", steps), ("engine_stats", stats), ("requests", reqs)):
        if rows:
            write_rows(stage, table, part, rows)
    if impossible:
        info.dropped["impossible_log_dates"] = impossible
        info.warnings.append(
            f"{path}: {impossible} line(s) stamped with an impossible date or time: their values are kept, "
            "their times are NULL"
        )
    if suspicious:
        info.warnings.append(
            f"{path}: {suspicious} Req Time Stats lines have forward_duration beyond 1e9 ms "
            "(an epoch, not a duration): ignored"
        )
    info.records = len(steps) + len(stats) + len(reqs)
    info.details["log_lines"] = {
        "prefill_batches": len(steps),
        "load_samples": len(stats),
        "retracted": sum(retracted.values()),
        "request_time_stats": time_stats,
        "rank_copies": second[1],
    }
    info.details["clock"] = (
        {"origin": COLLECTOR_CLOCK, "stamped_lines": stamped}
        if stamped
        else {"origin": f"log date-time, zone UTC{zone / 3600:+g} h (its request lines' epoch stamps)"}
        if zone
        else {"origin": "log date-time, zone UTC (assumed)"}
    )
    return info


def _with_finish_lines(path: str, stats: list[dict[str, Any]], lines: FinishLines, info: SourceInfo) -> list[dict]:
    """The log's requests: its Finish lines' (``sglang_requests``), each with its Req Time Stats line's queue time
    where the Finish line gives none, and the Req Time Stats lines of requests no Finish line lists."""
    if not lines.requests and not lines.received and not lines.unreadable:
        return stats
    unfinished = lines.unfinished()
    rows = [r | {"client_id": Path(path).name} for r in (*lines.requests.values(), *unfinished)]
    by_id = {r["request_id"]: r for r in rows}
    for s in stats:
        r = by_id.get(s["request_id"])
        if r is None:
            rows.append(s)
        elif r["queue_s"] is None:
            r["queue_s"] = s["queue_s"]
    said: dict[str, Any] = {
        "requests": len(lines.requests),
        "received_not_finished": len(unfinished),
        "not_generation": lines.not_generation,
        "unreadable": lines.unreadable,
        "aborted": dict(lines.aborts),
        "used": "the requests SGLang logged as finished (every one, unless SGLANG_LOG_REQUEST_EXCEEDED_MS kept only "
        "the slower ones: the log cannot tell)",
    }
    if zone := lines.zone_offset_s():
        said["stamp_zone_offset_s"] = zone
    if unfinished:
        info.warnings.append(
            f"{path}: {len(unfinished)} request(s) received and never finished in this log (running at its end, or "
            "lost when the server failed; where SGLANG_LOG_REQUEST_EXCEEDED_MS was set, the faster ones have no Finish "
            "line): incomplete"
        )
    if lines.unreadable:
        info.dropped["unreadable_finish_lines"] = lines.unreadable
        info.warnings.append(f"{path}: {lines.unreadable} Finish line(s) without a readable meta_info: left out")
    info.details["finish_lines"] = said
    info.version += f", request lines ({len(lines.requests)} finished" + (
        f", {len(unfinished)} received without a Finish line)" if unfinished else ")"
    )
    return rows

"""vLLM server logs: V1 ``Engine NNN:`` stats and ``Iteration(k)`` lines, V0 stats and preemption warnings
(ANSI colours, process prefixes, glued lines), and what the server states of its settings; also the V0
engine stats and run configuration that the BurstGPT replay tooling samples beside a server.

Log times are ``MM-DD HH:MM:SS`` with no year or zone: kept as ``log_stamp`` and placed on the run clock
when the run is assembled (``lltrace.ingest.clocks``); a log whose logging config prints the year (NVIDIA NIM, a
platform plugin) is placed as read, its zone UTC (assumed). What each file holds: docs/formats.md.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import (
    COLLECTOR_CLOCK,
    WALL_CLOCK_FLOOR_S,
    WALL_CLOCK_SLACK_S,
    chain_iteration_ends,
    check_wall_clock,
    collected_seconds,
    json_log,
    json_log_as_text,
    log_date_seconds,
    strip_bom,
    write_rows,
)
from lltrace.parsers._lines import read_text, without_cut_record
from lltrace.parsers.result_table import read_tables
from lltrace.parsers.vllm import bench_objects, printed_results, sniff_client_log
from lltrace.parsers.vllm_log_lines import REQUEST_LINES, RequestLines, Trouble
from lltrace.source_info import SourceInfo

SERVER_LOG = "vllm-server-log"


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# vLLM's own format is "%(levelname)s %(asctime)s [%(filename)s:%(lineno)d]" with the date "%m-%d %H:%M:%S"
# (vllm/logger.py); a logging config of its own (NVIDIA NIM's "INFO 2025-09-10 16:32:05.957 metrics.py:386]", a
# platform plugin's "[vllm-rbln] INFO 2026-10-07 22:01:17,796 [loggers.py:248]") prints the year and milliseconds
_HEADER = re.compile(
    r"(?:INFO|WARNING|ERROR|DEBUG)\s+(?:(\d{4})-)?(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:[.,](\d+))?\s+\[?[\w./-]+:\d+\]"
)
_F = r"(\d+(?:\.\d+)?)"  # a plain decimal number, as the loggers print them
_V1_STATS = re.compile(
    rf"Engine (\d+): Avg prompt throughput: {_F} tokens/s, Avg generation throughput: {_F} tokens/s, "
    rf"Running: (\d+) reqs, Waiting: (\d+) reqs,(?: Preemptions: (\d+),)?\s*(?:\w+ )?KV cache usage: {_F}%"
    rf"(?:, Prefix cache hit rate: {_F}%)?"
)
_V0_STATS = re.compile(
    rf"Avg prompt throughput: {_F} tokens/s, Avg generation throughput: {_F} tokens/s, Running: (\d+) reqs, "
    rf"Swapped: (\d+) reqs, Pending: (\d+) reqs(?:, GPU KV cache usage: {_F}%)?"
)
_ITERATION = re.compile(
    r"Engine (\d+): Iteration\((\d+)\): (\d+) context requests, (\d+) context tokens, (\d+) generation requests, "
    rf"(\d+) generation tokens, iteration elapsed time: {_F} ms(?:, (?:\w+ )?KV cache usage: {_F}%)?"
)
_ITERATION_START = re.compile(r"Engine \d+: Iteration\(")
# speculative decoding: V1 logs each interval's counts ("SpecDecoding metrics: ... Accepted: 1013 tokens, Drafted: 2508
# tokens, ...", v1/spec_decode/metrics.py), V0 its worker's running totals ("Speculative metrics: ... Number of
# accepted tokens: 24, Number of draft tokens: 36, ...")
_SPEC_V1 = re.compile(r"SpecDecoding metrics: .*?Accepted: (\d+) tokens, Drafted: (\d+) tokens")
_SPEC_V0 = re.compile(r"Speculative metrics: .*?Number of accepted tokens: (\d+), Number of draft tokens: (\d+)")
_V0_PREEMPT = re.compile(r"is preempted by PreemptionMode\.(\w+) mode.*?total_num_cumulative_preemption=(\d+)")


def sniff_server_log(head: bytes) -> bool:
    """A vLLM server log: its logger header lines with stats, iteration or startup lines (also as vLLM's JSON
    records)."""
    if sniff_client_log(head):  # a bench client's stdout carries vLLM's logger lines too
        return False
    if json_log(head) == "vllm":
        return True
    text = head.decode("utf-8", "replace")
    return _HEADER.search(text) is not None and any(
        k in text
        for k in ("vLLM", "vllm", "Avg prompt throughput", "Iteration(", "api_server", "loggers.py", "Added request ")
    )


_ARG_INT = re.compile(
    r"'(num_gpu_blocks_override|max_num_seqs|max_num_batched_tokens|block_size|max_model_len|tensor_parallel_size"
    r"|max_log_len|long_prefill_token_threshold|data_parallel_size)'"
    r": (\d+)"
)
_ARG_STR = re.compile(r"'(model|kv_cache_dtype|quantization|dtype)': '([^']*)'")
_ARG_BOOL = re.compile(
    r"'(enable_chunked_prefill|enable_prefix_caching|long_prefill_token_threshold_adaptive)': (True|False)"
)
_ARG_PARALLEL_DRAFTING = re.compile(r"'parallel_drafting': (True|False)")
_KV_TOKENS = re.compile(r"KV cache size: ([\d,]+) tokens")


_ENGINE_LINE = re.compile(r"Initializing a V1 LLM engine \(v([\w.+-]+)\) with config: (.*)")
# (its data_parallel_size is each engine core's own view, 1 under data parallelism: the API server's argument tells)
_ENGINE_INT = re.compile(r"\b(tensor_parallel_size|pipeline_parallel_size)=(\d+)")
_ENGINE_BOOL = re.compile(r"\b(enable_prefix_caching|enable_chunked_prefill)=(True|False)")
_ENGINE_DEVICE = re.compile(r"\bdevice_config=(\w+)")
# the engine's speculative decoding: None, or its method and the tokens a draft proposes (config/speculative.py)
_ENGINE_SPEC = re.compile(
    r"\bspeculative_config=(?:None|SpeculativeConfig\((?:method='([\w-]+)')?.*?num_spec_tokens=(\d+))"
)
_RESOLVED_BUDGET = re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)")


def _engine_config(text: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The settings the log states, and the line each came from: the API server's ``non-default args``, the
    engine's config line (version, device, parallelism, caching), the scheduler's resolved token budget and
    the KV cache size. Only what the log prints; defaults the engine applied silently are not guessed here
    (``lltrace.ingest.engine`` resolves them)."""
    config: dict[str, Any] = {}
    origin: dict[str, str] = {}

    def put(key: str, value: Any, where: str) -> None:
        config[key], origin[key] = value, where

    if (start := text.find("non-default args:")) >= 0:
        line = text[start : text.find("\n", start)]
        for k, v in _ARG_INT.findall(line):
            put(k, int(v), "server log: non-default args")
        for k, v in _ARG_BOOL.findall(line):
            put(k, v == "True", "server log: non-default args")
        for k, v in _ARG_STR.findall(line):
            put(k, v, "server log: non-default args")
        if p := _ARG_PARALLEL_DRAFTING.search(line):  # inside its speculative_config
            put("parallel_drafting", p.group(1) == "True", "server log: non-default args")
    if m := _ENGINE_LINE.search(text):
        put("engine", "vllm", "server log: engine config line")
        put("engine_version", m.group(1), "server log: engine config line")
        line = m.group(2)
        for k, v in _ENGINE_INT.findall(line):
            put(k, int(v), "server log: engine config line")
        for k, v in _ENGINE_BOOL.findall(line):
            put(k, v == "True", "server log: engine config line")
        if d := _ENGINE_DEVICE.search(line):
            put("device", d.group(1), "server log: engine config line")
        if d := _ENGINE_SPEC.search(line):
            how = (
                "speculative_config=None"
                if d.group(2) is None
                else "num_spec_tokens" + (f", method {d.group(1)}" if d.group(1) else "")
            )
            put("num_speculative_tokens", int(d.group(2) or 0), f"server log: engine config line ({how})")
            if d.group(1):
                put("speculative_method", d.group(1), "server log: engine config line")
    if m := _RESOLVED_BUDGET.search(text):  # the scheduler's own resolved value
        put("max_num_batched_tokens", int(m.group(1)), "server log: the scheduler's chunked-prefill line")
        put("enable_chunked_prefill", True, "server log: the scheduler's chunked-prefill line")
    if m := _KV_TOKENS.search(text):
        put("kv_cache_tokens", int(m.group(1).replace(",", "")), "server log: KV cache size line")
    return config, origin


def _possible_stamp(month: int, day: int, hour: int, minute: int, second: int) -> bool:
    """Whether ``MM-DD HH:MM:SS`` names a moment of some year (2000 is a leap year, so 02-29 passes)."""
    try:
        datetime(2000, month, day, hour, minute, second)
    except ValueError:
        return False
    return True


def ingest_server_log(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Stats lines (V0 and V1) → ``engine_stats``; ``Iteration(k)`` lines → ``engine_steps`` (source log).

    Log times are ``MM-DD HH:MM:SS`` with no year or zone; they are kept as ``log_stamp`` and placed on the
    run clock when the run is assembled (year from another source of the run; zone assumed UTC).
    """
    info = SourceInfo(path=path, format=SERVER_LOG)
    text = _ANSI.sub("", Path(path).read_text(encoding="utf-8", errors="replace"))
    text = without_cut_record(path, text, info)
    text, json_records = json_log_as_text(text)
    stats: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    heads = list(_HEADER.finditer(text))
    config, origin = _engine_config(text)
    requests = RequestLines(config.get("max_log_len"))
    v0 = v1 = unparsed = dated = collected = 0
    impossible: list[int] = []  # line numbers of stamps on days no year has
    counted = [0, 1]  # (offset, its line number): line numbers counted on as the lines are read, never from 0

    def line_of(offset: int) -> int:
        counted[1] += text.count("\n", counted[0], offset)
        counted[0] = offset
        return counted[1]

    trouble = Trouble()
    horizon = time.time() + WALL_CLOCK_SLACK_S
    spec = [0, 0]  # speculative decoding's accepted and draft tokens so far (V1 logs each interval's)
    for i, h in enumerate(heads):
        body = text[h.end() : heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        level = h.group(0)[:5]
        if level == "ERROR" or trouble.shutdown_line is None:
            trouble.read(level, h.group(0).rsplit("[", 1)[-1], h.group(0)[5:], body, line_of(h.start()))
        year = h.group(1)
        stamp: str | None = f"{h.group(2)}-{h.group(3)} {h.group(4)}:{h.group(5)}:{h.group(6)}"
        ts = collected_seconds(text[text.rfind("\n", 0, h.start()) + 1 : h.start()])
        exact = ts is not None  # the line's moment to the millisecond or better: an iteration's end is its stamp
        if ts is not None:
            # the collector's stamp: the moment the line was printed, with its date and zone, to the millisecond
            # or better (vLLM's own is to the second, without either)
            stamp = datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
            collected += 1
        elif not _possible_stamp(*(int(g) for g in h.groups()[1:6])):
            impossible.append(text.count("\n", 0, h.start()) + 1)
            stamp = None  # the line's values stand; its time is unknown
        elif year is not None:  # dated: placed as read, its zone UTC (assumed, as for SGLang's logs)
            ts = log_date_seconds(f"{year}-{stamp}")
            if ts is None:  # 02-29 of a year without one
                impossible.append(text.count("\n", 0, h.start()) + 1)
                stamp = None
            else:
                stamp = f"{year}-{stamp}"
                dated += 1
                if h.group(7):  # the moment, not its second: logging's msecs (NIM prints them unpadded: ".7" is
                    # 7 ms; Python's default ",007"), or a longer decimal fraction (%f)
                    digits = h.group(7)
                    ts += int(digits) / 1000 if len(digits) <= 3 else float(f"0.{digits}")
                    exact = True
        if ts is not None and not WALL_CLOCK_FLOOR_S <= ts <= horizon:  # a dated line no real run has
            check_wall_clock(path, f"line {line_of(h.start())}", ts, "the line")
        if m := _ITERATION.search(body):
            eng, k, nc, tc, ng, tg, ms, kv = m.groups()
            eng = _engine_index(eng)
            tc_i, tg_i = int(tc), int(tg)
            kind = "mixed" if tc_i and tg_i else "prefill" if tc_i else "decode" if tg_i else "idle"
            # printed when the iteration ends: a stamp to the millisecond (a collector's, or a dated config's)
            # places its end as it is; a stamp to the second is chained below
            placed = {"end_s": ts, "start_s": ts - float(ms) / 1e3} if exact and ts is not None else {}
            steps.append(
                {
                    "part": part,
                    "step_id": int(k),
                    "engine": eng,
                    "kind": kind,
                    "kind_from": "log counts",
                    "prefill_reqs": int(nc),
                    "prefill_tokens": tc_i,
                    "decode_reqs": int(ng),
                    "decode_tokens": tg_i,
                    "wall_s": float(ms) / 1e3,
                    "kv_usage": float(kv) / 100 if kv else None,
                    "log_stamp": stamp,
                    "detection": "vllm iteration log",
                    "source": "log",
                }
                | placed
            )
            v1 += 1
        elif m := _V1_STATS.search(body):
            eng, pt, gt, run, wait, pre, kv, hit = m.groups()
            eng = _engine_index(eng)
            stats.append(
                {
                    "part": part,
                    "engine": eng,
                    "running": float(run),
                    "waiting": float(wait),
                    "preemptions_total": float(pre) if pre else None,
                    "kv_usage": float(kv) / 100,
                    "prompt_throughput": float(pt),
                    "generation_throughput": float(gt),
                    "prefix_cache_hit_rate": float(hit) / 100 if hit else None,
                    "log_stamp": stamp,
                    "ts_s": ts,
                    "source": "log",
                }
            )
            v1 += 1
        elif m := _V0_STATS.search(body):
            pt, gt, run, swapped, pending, kv = m.groups()
            stats.append(
                {
                    "part": part,
                    "engine": "0",
                    "running": float(run),
                    "waiting": float(pending),
                    "swapped": float(swapped),
                    "kv_usage": float(kv) / 100 if kv else None,
                    "prompt_throughput": float(pt),
                    "generation_throughput": float(gt),
                    "log_stamp": stamp,
                    "ts_s": ts,
                    "source": "log",
                }
            )
            v0 += 1
        elif body[:24].lstrip().startswith(REQUEST_LINES) and requests.read(body, stamp, ts, exact, line_of(h.start())):
            pass
        elif (m := _SPEC_V1.search(body)) or (m := _SPEC_V0.search(body)):
            accepted, drafted = int(m.group(1)), int(m.group(2))
            if m.re is _SPEC_V1:  # an interval's counts: the totals since the log began
                spec[0] += accepted
                spec[1] += drafted
                accepted, drafted = spec
            row = {"spec_accepted_tokens_total": float(accepted), "spec_draft_tokens_total": float(drafted)}
            stats.append({"part": part, "engine": "0", **row, "log_stamp": stamp, "ts_s": ts, "source": "log"})
        elif m := _V0_PREEMPT.search(body):
            # Logged only every 50th preemption: the cumulative count is the figure, not the line count.
            stats.append(
                {
                    "part": part,
                    "engine": "0",
                    "preemptions_total": float(m.group(2)),
                    "log_stamp": stamp,
                    "ts_s": ts,
                    "source": "log",
                }
            )
        elif "Avg prompt throughput:" in body or _ITERATION_START.search(body):
            unparsed += 1  # a stats or iteration line mangled past reading
    if impossible:
        info.dropped["impossible_log_dates"] = len(impossible)
        info.warnings.append(
            f"{path}: line {impossible[0]}: {len(impossible)} line(s) stamped with an impossible date or time: "
            "their values are kept, their times are NULL"
        )
    if unparsed:
        info.dropped["unreadable_stats_lines"] = unparsed
        info.warnings.append(f"{path}: {unparsed} stats or iteration lines that do not parse: skipped")
    trouble.report(path, text, info)
    if requests.reused_ids:
        info.warnings.append(
            f"{path}: {requests.reused_ids} request id(s) received again after an earlier request of the same id (a "
            "restart, or a client reusing its ids): each a request of its own, the later named <id>#2, <id>#3 …"
        )
    if not stats and not steps and not requests.records:
        info.warnings.append(f"{path}: no stats, iteration or request lines found in the log")
    steps = _repeated_iterations(path, steps, info)
    write_rows(stage, "engine_stats", part, stats)
    logged = requests.rows(part)
    if logged:
        write_rows(stage, "_log_requests", part, logged)
        info.details["log_requests"] = requests.summary()
    # dated iteration lines placed as read (undated ones when the run is assembled, by the same rule)
    chain_iteration_ends([r for r in steps if r["log_stamp"] and len(r["log_stamp"]) == 19], log_date_seconds)
    if steps:
        write_rows(stage, "engine_steps", part, steps)
    info.records = len(stats) + len(steps) + len(logged)  # the lines read into rows, not every timestamped line
    info.version = "V0 (metrics.py)" if v0 and not v1 else "V1 (loggers.py)" if v1 else "no stats lines"
    info.details["log_lines"] = {
        "stats": len(stats),
        "iterations": len(steps),
        "requests": len(logged),
        "timestamped": len(heads),
    }
    if logged:
        info.version += f", request lines ({len(logged)} requests)"
    if json_records:
        info.version += f", {json_records}"
    if collected:
        info.details["clock"] = {
            "origin": COLLECTOR_CLOCK,
            "stamped_lines": collected,
        }
    elif dated:
        info.details["clock"] = {"origin": "log date-time, zone UTC (assumed)", "dated_lines": dated}
    # a server and its bench client in one terminal: the client's printed result tables, as its stdout's are read
    printed = printed_results(path, read_tables(text), info)
    if printed:
        info.details["bench"] = printed
        info.version += f", {len(printed)} printed result table{'s' if len(printed) != 1 else ''}"
    if config:
        info.details["engine_config"] = config
        info.details["engine_config_origin"] = origin
    return info


# -- custom engine-stats scrapes (BurstGPT replay tooling) ---------------------------------------------------

STATS_CSV = "vllm-stats-csv"
REPLAY_CONFIG = "burstgpt-replay-config"


def sniff_stats_csv(head: bytes) -> bool:
    """A CSV of vLLM V0 engine stats sampled by a client (liao4s/BurstGPT_test ``vllm_log_*.csv``)."""
    first = head.split(b"\n", 1)[0].strip()
    return first.startswith(b"timestamp,prompt_throughput,generation_throughput,num_running")


def ingest_stats_csv(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Samples → ``engine_stats``. ``timestamp`` is a monotonic clock (arbitrary origin) and the KV usage
    columns are percentages (0–100), as the capture script writes them."""
    import csv as _csv
    import io as _stdio

    info = SourceInfo(path=path, format=STATS_CSV, version="V0 stats sampled by a client")
    text = read_text(path)  # a byte-order mark is accepted, as in every reader
    rows = []
    bad: list[tuple[int, str]] = []
    reader = _csv.DictReader(_stdio.StringIO(text, newline=""))
    need = {"timestamp", "num_running", "num_pending", "gpu_kvcache_usage"}
    missing = need - set(reader.fieldnames or [])
    if missing:
        raise TraceFormatError(path, "line 1", f"missing column(s): {', '.join(sorted(missing))}")

    def number(r: dict[str, Any], key: str) -> float | None:
        return float(r[key]) if r.get(key) not in (None, "") else None

    for r in reader:
        n = reader.line_num
        try:
            if None in r.values() or None in r:
                raise ValueError("a row with a different number of cells than the header")
            rows.append(
                {
                    "part": part,
                    "ts_s": float(r["timestamp"]),
                    "engine": "0",
                    "source": "scrape",
                    "running": float(r["num_running"]),
                    "waiting": float(r["num_pending"]),
                    "swapped": number(r, "num_swapped"),
                    "kv_usage": float(r["gpu_kvcache_usage"]) / 100,
                    "prompt_throughput": number(r, "prompt_throughput"),
                    "generation_throughput": number(r, "generation_throughput"),
                }
            )
        except ValueError as exc:
            bad.append((n, str(exc)))
    if bad and len(bad) >= len(rows):
        raise TraceFormatError(path, f"line {bad[0][0]}", f"not a number ({bad[0][1]})")
    if bad:  # a row cut by a truncated write, or damaged: only that row lost, counted
        info.dropped["damaged_rows"] = len(bad)
        info.truncated = f"damaged line {bad[0][0]}"
        info.warnings.append(
            f"{path}: line {bad[0][0]}: {len(bad)} row(s) that do not read ({bad[0][1]}): dropped, the rest read"
        )
    write_rows(stage, "engine_stats", part, rows)
    info.records = len(rows)
    info.details["clock"] = {"origin": "client monotonic seconds (arbitrary origin); not aligned to wall clock"}
    return info


def sniff_replay_config(head: bytes) -> bool:
    """The run configuration the BurstGPT replay tool appends (objects back to back, no separator)."""
    text = strip_bom(head)
    return text.startswith(b"{") and b'"server_config"' in text and b'"prompt_config"' in text


def ingest_replay_config(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """The configurations (model, QPS, trace scale) into the run metadata; no rows."""
    info = SourceInfo(path=path, format=REPLAY_CONFIG, version="appended JSON objects")
    text = read_text(path)
    objs = bench_objects(path, text)
    info.details["configs"] = objs
    info.records = len(objs)
    return info


def _engine_index(written: str | None) -> str | None:
    """The engine's data-parallel index as the metrics' ``engine`` label spells it: the log's ``Engine 000`` is
    engine ``0``, so a log and a scrape of one engine name it alike."""
    return str(int(written)) if written is not None and written.isdigit() else written


_SAME_LINE = (
    "step_id",
    "engine",
    "prefill_reqs",
    "prefill_tokens",
    "decode_reqs",
    "decode_tokens",
    "wall_s",
    "log_stamp",
)


def _repeated_iterations(path: str, steps: list[dict[str, Any]], info: SourceInfo) -> list[dict[str, Any]]:
    """vLLM numbers each engine's iterations 0, 1, 2 …: where every line that reuses a number repeats the earlier
    line whole (the same counts, elapsed time and stamp: a log copied into itself), the copies are dropped; where
    some reuse it with other counts (a server restarted into the same log, or the log edited), every line is kept
    as written. Either is said in one warning."""
    seen: dict[tuple[Any, int], tuple[Any, ...]] = {}
    copies: list[int] = []
    other = 0
    for i, r in enumerate(steps):
        key, whole = (r["engine"], r["step_id"]), tuple(r.get(c) for c in _SAME_LINE)
        if key not in seen:
            seen[key] = whole
        elif seen[key] == whole:
            copies.append(i)
        else:
            other += 1
    if other:
        info.warnings.append(
            f"{path}: {other + len(copies)} iteration line(s) reuse an earlier Iteration(k) number, {other} with other "
            "counts (a server restarted into the same log, or the log edited): kept as written, in the order written"
        )
        return steps
    if copies:
        info.dropped["repeated_iteration_lines"] = len(copies)
        info.warnings.append(
            f"{path}: {len(copies)} iteration line(s) repeat an earlier line whole (the same Iteration(k), counts, "
            "elapsed time and stamp: a log copied into itself): dropped"
        )
        dropped = set(copies)
        return [r for i, r in enumerate(steps) if i not in dropped]
    return steps

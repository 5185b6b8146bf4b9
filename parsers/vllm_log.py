"""vLLM server logs: V1 ``Engine NNN:`` stats and ``Iteration(k)`` lines, V0 stats and preemption warnings
(ANSI colours, process prefixes, glued lines), and what the server states of its settings; also the V0
engine stats and run configuration that the BurstGPT replay tooling samples beside a server.

Log times are ``MM-DD HH:MM:SS`` with no year or zone: kept as ``log_stamp`` and placed on the run clock
when the run is assembled (``lltrace.ingest.clocks``); a log whose logging config prints the year (NVIDIA NIM, a
platform plugin) is placed as read, its zone UTC (assumed). Field facts: docs/SERVING_FORMATS.md §A3.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import (
    COLLECTOR_CLOCK,
    chain_iteration_ends,
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
from lltrace.tables import SourceInfo

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
_V0_PREEMPT = re.compile(r"is preempted by PreemptionMode\.(\w+) mode.*?total_num_cumulative_preemption=(\d+)")
# The request lines of --enable-log-requests (on by default before 0.10: --disable-log-requests): the frontend's
# "Received request ID: [prompt: ..., ]params: ..." (entrypoints/logger.py; serve/utils/request_logger.py since
# 0.11), the engine's "Added request ID." (V1 0.11+ appends "-<8 hex>" to the frontend's id), V0's "Finished request
# ID.", "Aborted request ID." (V1: "Aborted request(s) ID,ID."), and "Generated response ID[ (streaming
# complete)]: output: ..., finish_reason: R" (--enable-log-outputs, chat and responses endpoints)
_RECEIVED = re.compile(r"Received request (\S+?): (?:prompt: |params: )")
_ENGINE_EVENT = re.compile(r"(Added|Finished|Aborted) request(?:\(s\))? (\S+?)\.?(?:\s|$)")
_GENERATED = re.compile(r"Generated response (\S+?)( \(streaming (?:complete|delta)\))?: output: ")
_FINISH_REASON = re.compile(r"finish_reason: (\w+)\s*$")
_MAX_TOKENS = re.compile(r"\bmax_tokens=(\d+|None)")
_REQUEST_LINES = ("Received request", "Added request", "Finished request", "Aborted request", "Generated response")


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
    r"|max_log_len)'"
    r": (\d+)"
)
_ARG_STR = re.compile(r"'(model|kv_cache_dtype|quantization|dtype)': '([^']*)'")
_ARG_BOOL = re.compile(r"'(enable_chunked_prefill|enable_prefix_caching)': (True|False)")
_KV_TOKENS = re.compile(r"KV cache size: ([\d,]+) tokens")


_ENGINE_LINE = re.compile(r"Initializing a V1 LLM engine \(v([\w.+-]+)\) with config: (.*)")
_ENGINE_INT = re.compile(r"\b(tensor_parallel_size|pipeline_parallel_size|data_parallel_size)=(\d+)")
_ENGINE_BOOL = re.compile(r"\b(enable_prefix_caching|enable_chunked_prefill)=(True|False)")
_ENGINE_DEVICE = re.compile(r"\bdevice_config=(\w+)")
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
    if m := _RESOLVED_BUDGET.search(text):  # the scheduler's own resolved value
        put("max_num_batched_tokens", int(m.group(1)), "server log: the scheduler's chunked-prefill line")
        put("enable_chunked_prefill", True, "server log: the scheduler's chunked-prefill line")
    if m := _KV_TOKENS.search(text):
        put("kv_cache_tokens", int(m.group(1).replace(",", "")), "server log: KV cache size line")
    return config, origin


# uvicorn's access line, '127.0.0.1:36506 - "POST /v1/chat/completions HTTP/1.1" 200 OK' (printed when a response
# starts: a stream aborted later still shows its 200)
_ACCESS = re.compile(r' - "([A-Z]+) (\S+) HTTP/[\d.]+" (\d{3})')
# the server's shutdown (vLLM 0.11+ tags each of its lines "[shutdown]"; earlier API servers print "Shutting down
# FastAPI HTTP server."): ERROR records after it (a killed engine's EngineDeadError) are the shutdown's
_SHUTDOWN = ("[shutdown]", "Shutting down FastAPI HTTP server")


class _Trouble:
    """The log's ERROR records (a traceback's lines, one record each, counted once: same stamp and source line)
    before and after the server began shutting down, and uvicorn's access lines by status."""

    def __init__(self) -> None:
        self.shutdown_line: int | None = None
        self.errors: list[dict[str, Any]] = []  # {"line", "message", "after_shutdown"}
        self._last: tuple[str, str] | None = None

    def read(self, level: str, where: str, stamp: str | None, body: str, line: int) -> None:
        if self.shutdown_line is None and any(mark in body[:80] for mark in _SHUTDOWN):
            self.shutdown_line = line
        if level != "ERROR":
            self._last = None
            return
        key = (stamp or "", where)
        if key == self._last:  # the next line of one traceback
            return
        self._last = key
        message = body.strip().splitlines()[0][:160] if body.strip() else ""
        self.errors.append({"line": line, "message": message, "after_shutdown": self.shutdown_line is not None})

    def report(self, path: str, text: str, info: SourceInfo) -> None:
        """Into ``info``: the counts (details ``errors``, ``http``) and a warning for what happened while serving."""
        serving = [e for e in self.errors if not e["after_shutdown"]]
        if self.errors:
            info.details["errors"] = {
                "records": len(self.errors),
                "while_serving": len(serving),
                "first": [{k: e[k] for k in ("line", "message")} for e in (serving or self.errors)[:3]],
                "shutdown_line": self.shutdown_line,
            }
        if serving:
            info.warnings.append(
                f"{path}: line {serving[0]['line']}: {len(serving)} ERROR record(s) while the server was serving "
                f"(first: {serving[0]['message']})"
            )
        statuses: dict[tuple[str, str, str], int] = {}
        for method, where, status in _ACCESS.findall(text):
            key = (method, where.split("?")[0], status)
            statuses[key] = statuses.get(key, 0) + 1
        if not statuses:
            return
        failed = {k: n for k, n in statuses.items() if k[2] >= "500" or (k[0] == "POST" and k[2] >= "400")}
        info.details["http"] = {
            "responses": sum(statuses.values()),
            "by_status": {
                st: sum(n for k, n in statuses.items() if k[2] == st) for st in sorted({k[2] for k in statuses})
            },
            "failed": [{"method": m, "path": w, "status": int(st), "responses": n} for (m, w, st), n in failed.items()],
        }
        if failed:
            said = ", ".join(f"{m} {w} {st} x{n:,}" for (m, w, st), n in sorted(failed.items(), key=lambda kv: -kv[1]))
            info.warnings.append(
                f"{path}: {sum(failed.values()):,} request(s) answered with an HTTP error (uvicorn's access lines: "
                f"{said})"
            )


class _RequestLines:
    """The request lines of one log, gathered into one record per request (the frontend's id; the engine's id
    where it adds a suffix). A request is generation where its params are SamplingParams or BeamSearchParams;
    others (a tokenize call's ``params: None``, an embedding's PoolingParams) are counted, not kept."""

    def __init__(self, max_log_len: int | None) -> None:
        self.max_log_len = max_log_len
        self.records: list[dict[str, Any]] = []
        self.by_id: dict[str, dict[str, Any]] = {}  # each id's latest request
        self.engine_ids: dict[str, str] = {}  # the engine's id -> the frontend's
        self.counts = dict.fromkeys(("received", "added", "finished", "aborted", "generated", "not_generation"), 0)
        self.unknown_ids = 0  # an engine line about a request no Received or Added line named
        self.reused_ids = 0  # a Received line with an id an earlier one had (a restart, a client reusing its ids)

    def _record(self, rid: str, stamp: str | None, ts: float | None, exact: bool, line: int) -> dict[str, Any]:
        """A new request under ``rid``; an id received before is a request of its own, named ``<id>#2`` …"""
        name = rid
        if rid in self.by_id:
            self.reused_ids += 1
            name = f"{rid}#{sum(r['request_id'].split('#')[0] == rid for r in self.records) + 1}"
        rec = {"request_id": name, "arrival_stamp": stamp, "arrival_s": ts, "exact": exact, "line": line}
        self.records.append(rec)
        self.by_id[rid] = rec
        return rec

    def _known(self, eid: str) -> dict[str, Any] | None:
        rid = self.engine_ids.get(eid, eid)
        if rid not in self.by_id and "-" in eid:  # V1 0.11+: the frontend's id and "-<suffix>"
            rid = eid.rsplit("-", 1)[0]
        return self.by_id.get(rid.split("#")[0])

    def read(self, body: str, stamp: str | None, ts: float | None, exact: bool, line: int) -> bool:
        """Take one line's request event; whether it was one."""
        if m := _RECEIVED.match(body.lstrip()):
            rid = m.group(1)
            at = body.rfind("params: ")
            params = body[at + 8 : at + 40]
            if not params.startswith(("SamplingParams(", "BeamSearchParams(")):
                self.counts["not_generation"] += 1
                return True
            self.counts["received"] += 1
            rec = self._record(rid, stamp, ts, exact, line)
            if mt := _MAX_TOKENS.search(body, at):
                rec["max_tokens"] = int(mt.group(1)) if mt.group(1) != "None" else None
            ids_at = body.find("prompt_token_ids: [", at)
            if ids_at >= 0:  # listed whole unless --max-log-len cut it (a list of that length may have been longer)
                close = body.find("]", ids_at)
                listed = body[ids_at + 19 : close]
                n = listed.count(",") + 1 if listed.strip() else 0
                if close > 0 and (self.max_log_len is None or n < self.max_log_len):
                    rec["input_tokens"] = n
            return True
        if m := _ENGINE_EVENT.match(body.lstrip()):
            what, ids = m.groups()
            for eid in ids.split(","):
                if what == "Added":
                    self.counts["added"] += 1
                    rec = self._known(eid)
                    if rec is None or "added" in rec:  # no Received line (a frontend of its own, the log's start cut)
                        rec = self._record(eid, stamp, ts, exact, line)
                    if eid != rec["request_id"].split("#")[0]:
                        rec["engine_request_id"] = eid
                    rec["added"] = True
                    self.engine_ids[eid] = rec["request_id"].split("#")[0]
                    continue
                rec = self._known(eid)
                if rec is None:
                    self.unknown_ids += 1
                    continue
                self.counts[what.lower()] += 1
                rec |= {"outcome": what.lower(), "end_stamp": stamp, "end_s": ts, "exact": rec["exact"] and exact}
            return True
        if m := _GENERATED.match(body.lstrip()):
            if m.group(2) == " (streaming delta)":
                return True
            rec = self._known(m.group(1))
            if rec is None:
                self.unknown_ids += 1
                return True
            self.counts["generated"] += 1
            reason = _FINISH_REASON.search(body.rstrip())
            rec |= {
                "outcome": "aborted" if reason and reason.group(1) == "abort" else "finished",
                "finish_reason": reason.group(1) if reason else None,
                "end_stamp": stamp,
                "end_s": ts,
                "exact": rec["exact"] and exact,
            }
            return True
        return False

    def rows(self, part: int) -> list[dict[str, Any]]:
        """One row per generation request, in the order first logged."""
        return [{k: v for k, v in r.items() if k != "added"} | {"part": part} for r in self.records]

    def summary(self) -> dict[str, int]:
        """The lines read, by kind (run metadata)."""
        return {
            "requests": len(self.records),
            **self.counts,
            "unknown_ids": self.unknown_ids,
            "reused_ids": self.reused_ids,
        }


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
    requests = _RequestLines(config.get("max_log_len"))
    v0 = v1 = unparsed = dated = collected = 0
    impossible: list[int] = []  # line numbers of stamps on days no year has
    counted = [0, 1]  # (offset, its line number): line numbers counted on as the lines are read, never from 0

    def line_of(offset: int) -> int:
        counted[1] += text.count("\n", counted[0], offset)
        counted[0] = offset
        return counted[1]

    trouble = _Trouble()
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
        elif body[:24].lstrip().startswith(_REQUEST_LINES) and requests.read(
            body, stamp, ts, exact, line_of(h.start())
        ):
            pass
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

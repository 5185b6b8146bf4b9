"""What a vLLM server log says of its requests and its trouble, line by line (``vllm_log.ingest_server_log`` reads
the lines and hands each on): the request lines of ``--enable-log-requests`` gathered into one record per request,
and the ERROR records and uvicorn's failed responses."""

from __future__ import annotations

import re
from typing import Any

from lltrace.source_info import SourceInfo

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
REQUEST_LINES = ("Received request", "Added request", "Finished request", "Aborted request", "Generated response")


# uvicorn's access line, '127.0.0.1:36506 - "POST /v1/chat/completions HTTP/1.1" 200 OK' (printed when a response
# starts: a stream aborted later still shows its 200)
_ACCESS = re.compile(r' - "([A-Z]+) (\S+) HTTP/[\d.]+" (\d{3})')
# the server's shutdown (vLLM 0.11+ tags each of its lines "[shutdown]"; earlier API servers print "Shutting down
# FastAPI HTTP server."): ERROR records after it (a killed engine's EngineDeadError) are the shutdown's
_SHUTDOWN = ("[shutdown]", "Shutting down FastAPI HTTP server")


class Trouble:
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


# the line a traceback ends with ("module.Name: message", unindented), after a collector's stamps if any
_RAISED = re.compile(
    r"^(?:\d+\t)?(?:\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:?\d\d)?[\t ])?"
    r"([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt))(?::\s?(.*))?$"
)


class Tracebacks:
    """Python tracebacks in a log whose records carry no level (SGLang's ``[stamp rank] message``): each one an error
    record of a ``Trouble``, said as the message before it and the exception it ends with (``Scheduler hit an
    exception: RuntimeError: ...``)."""

    def __init__(self, trouble: Trouble) -> None:
        self.trouble = trouble
        self._open: dict[str, Any] | None = None

    def read(self, body: str, line: int) -> None:
        """Take one line of the log (its own header removed)."""
        at = body.find("Traceback (most recent call last)")
        if at >= 0:
            self._open = {"line": line, "message": body[:at].strip(), "after_shutdown": False}
            self.trouble.errors.append(self._open)
        elif self._open is not None and (m := _RAISED.match(body.rstrip())):
            raised = f"{m.group(1)}: {m.group(2)}" if m.group(2) else m.group(1)
            self._open["message"] = f"{self._open['message']} {raised}".strip()[:200]
            self._open = None


class RequestLines:
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
        rec = {"request_id": name, "arrival_stamp": stamp, "arrival_s": ts, "exact": exact, "arrival_exact": exact}
        rec["line"] = line
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

"""SGLang's request log (``--log-requests``): each finished request's own figures, as its tokenizer manager logs them.

SGLang logs ``Finish: obj=GenerateReqInput(...), out={..., 'meta_info': {...}}`` when a request ends (the text
format: Python reprs, long strings and lists cut with `` ... `` at ``--log-requests-level 2``), or a JSON line with
``"event": "request.finished"`` (``--log-requests-format json``). Every level keeps ``out``'s ``meta_info``
(sglang/srt/utils/request_logger.py), whose keys grew across versions:

- ``id``, ``finish_reason`` (``{'type': 'stop' | 'length' | 'abort', ...}``; an abort may carry ``message`` and
  ``status_code``), ``prompt_tokens``, ``completion_tokens``, ``cached_tokens``, ``e2e_latency`` (seconds, the
  tokenizer manager's ``finished_time - created_time``): every version seen;
- ``total_retractions`` (earlier ``num_retractions``): the times the scheduler retracted (preempted) it;
- ``queue_time``: the scheduler's ``forward_entry_time - wait_queue_entry_time`` (seconds); exactly 0.0 where the
  scheduler's stamps did not reach the tokenizer manager (a difference of two clock readings is never exactly 0);
- ``request_received_ts``, ``response_sent_to_client_ts``, ``request_finished_ts`` (2026: ``time.time()`` epochs):
  the first response is sent at the first streamed chunk (``stream=True``), else at the end.

Each becomes a ``requests`` row: arrival at ``request_received_ts``, else the line's moment less ``e2e_latency``
(to the second where SGLang's own stamp is the line's only time: ``arrival_resolution_s`` says so); the server's
TTFT only for a streamed request with both stamps. A ``Receive: obj=GenerateReqInput(...)`` line (JSON:
``request.received``) that no Finish line ends is a request still running when the log ends, or lost when the
server failed: incomplete. ``SGLANG_LOG_REQUEST_EXCEEDED_MS`` makes SGLang log the Finish lines of the requests
slower than it only: the log then lists those alone, which the source's details say it cannot tell.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import error_line, json_objects, write_rows
from lltrace.source_info import SourceInfo

FINISH = "Finish: obj="
JSON_FINISHED = '"event": "request.finished"'
RECEIVE = "Receive: obj=GenerateReqInput("
JSON_RECEIVED = '"event": "request.received"'
_RID = re.compile(r"(?:\(|, )rid='([^'\\]*)'")

# the meta_info keys read (the others, a level-3 line's token lists among them, are never evaluated)
_USED = {
    "id",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "e2e_latency",
    "queue_time",
    "request_received_ts",
    "response_sent_to_client_ts",
    "request_finished_ts",
    "total_retractions",
    "num_retractions",
}
_SCALAR = re.compile(
    r"'(" + "|".join(sorted(_USED - {"finish_reason"})) + r")': "
    r"('[^'\n]*'|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|None|True|False)"
)
_REASON = re.compile(r"'finish_reason': (\{[^{}]*\}|None)")
_FLAT = re.compile(r"'(\w+)': ('[^'\n]*'|\"[^\"\n]*\"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|None|True|False)")
_STREAM = re.compile(r"\bstream=(True|False)\b")
_KEY = re.compile(r"\s*'([^'\\]*)':\s*")
_CLOSE = {"{": "}", "[": "]", "(": ")"}


def _past_string(text: str, at: int) -> int:
    """The index just past the quoted string opening at ``text[at]`` (a backslash escapes the next character)."""
    quote, i, n = text[at], at + 1, len(text)
    while i < n and text[i] != quote:
        i += 2 if text[i] == "\\" else 1
    return i + 1


def _end_of(text: str, at: int) -> int:
    """The index just past the bracketed value opening at ``text[at]`` (strings inside kept apart), or -1 where the
    text ends first."""
    depth: list[str] = []
    i, n = at, len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            i = _past_string(text, i)
            continue
        if c in _CLOSE:
            depth.append(_CLOSE[c])
        elif depth and c == depth[-1]:
            depth.pop()
            if not depth:
                return i + 1
        i += 1
    return -1


def _entries(text: str) -> dict[str, str]:
    """The top-level ``'key': value`` entries of a dict's repr (braces included), each value as its text."""
    out: dict[str, str] = {}
    i, n = 1, len(text) - 1
    while i < n and (m := _KEY.match(text, i)):
        start = i = m.end()
        while i < n and text[i] != ",":
            if text[i] in "'\"":
                i = _past_string(text, i)
            elif text[i] in _CLOSE:
                i = _end_of(text, i)
                if i < 0:
                    return out
            else:
                i += 1
        out[m.group(1)] = text[start:i].strip()
        i += 1
    return out


def _iso_seconds(stamp: Any) -> float | None:
    """Seconds since the epoch of an ISO 8601 stamp; one without a zone read as UTC, as SGLang's own stamps are."""
    try:
        when = datetime.fromisoformat(stamp)
    except (TypeError, ValueError):
        return None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


def _meta_info(body: str, at: int) -> dict[str, Any] | None:
    """The meta_info dict whose key starts at ``body[at]``, its keys read (``_USED``): each a number, None or a plain
    string, and ``finish_reason`` a flat dict, found by name (none of them is a key of the dicts nested in it); else,
    where one is written otherwise, entry by entry (a level-2 line's lists cut with `` ... `` are no literal)."""
    text = body[at:]
    found = {m.group(1): m.group(2) for m in _SCALAR.finditer(text)}
    reason = _REASON.search(text)
    if "id" in found and "\\" not in "".join(found.values()) + (reason.group(1) if reason else ""):
        meta: dict[str, Any] = {k: _scalar(v) for k, v in found.items()}
        if reason:
            meta["finish_reason"] = {k: _scalar(v) for k, v in _FLAT.findall(reason.group(1))}
        return meta
    end = _end_of(body, at + 13)
    return {k: _value(v) for k, v in _entries(body[at + 13 : end]).items() if k in _USED} if end > 0 else None


def _scalar(raw: str) -> Any:
    """A number, None, a boolean or a string without escapes, as Python's repr writes it."""
    if raw[0] in "'\"":
        return raw[1:-1]
    if raw in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[raw]
    return float(raw) if any(c in raw for c in ".eE") else int(raw)


def _value(raw: str | None) -> Any:
    if raw is None:
        return None
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class FinishLines:
    """A log's Finish lines, one request each (an id logged again: the later line)."""

    def __init__(self) -> None:
        self.requests: dict[str, dict[str, Any]] = {}
        self.received: dict[str, dict[str, Any]] = {}  # each Receive line's request: its arrival as the line says
        self.not_generation = 0  # an embedding's Finish line
        self.unreadable = 0
        self.aborts: Counter[str] = Counter()
        self.zone_checks: list[float] = []  # the line's own stamp less request_finished_ts (both where given)

    def read(self, body: str, ts: float | None, resolution_s: float | None, local: bool) -> bool:
        """Take one line's finished request; whether the line was one. ``ts``: the line's moment (its collector's
        stamp, else SGLang's own); ``resolution_s``: how finely that stamp writes it where coarser than a millisecond;
        ``local``: the stamp is SGLang's own, local time read as UTC."""
        if RECEIVE in body or JSON_RECEIVED in body:
            self._receive(body, ts, resolution_s, local)
            return True
        if FINISH + "EmbeddingReqInput(" in body:
            self.not_generation += 1
            return True
        if FINISH in body:
            at = body.rfind("'meta_info': {")
            meta = _meta_info(body, at) if at >= 0 else None
            streams = _STREAM.findall(body, 0, body.rfind(", out={"))
            stream = streams[-1] == "True" if streams else None
        elif JSON_FINISHED in body:
            try:
                record = json.loads(body[body.index("{") :])
                meta = record["out"]["meta_info"]
                stream = record.get("obj", {}).get("stream")
                if ts is None or local:  # its own stamp: local time to the microsecond (datetime.now().isoformat())
                    ts, resolution_s, local = _iso_seconds(record.get("timestamp")), None, True
            except (ValueError, KeyError, TypeError):
                meta = None
        else:
            return False
        if not isinstance(meta, dict) or not isinstance(meta.get("id"), str):
            self.unreadable += 1
            return True
        self.take(meta, stream, ts, resolution_s, local)
        return True

    def take(
        self, meta: dict[str, Any], stream: bool | None, ts: float | None, resolution_s: float | None, local: bool
    ) -> None:
        """One finished request's ``meta_info`` (``stream``: whether it was streamed; ``ts``: the moment its
        record was written, where known)."""
        received, e2e = _number(meta.get("request_received_ts")), _number(meta.get("e2e_latency"))
        finished = _number(meta.get("request_finished_ts"))
        if finished is not None and ts is not None and local:
            self.zone_checks.append(ts - finished)
        end = finished if finished is not None else ts
        arrival = received if received is not None else end - e2e if end is not None and e2e is not None else None
        sent = _number(meta.get("response_sent_to_client_ts"))
        queue = _number(meta.get("queue_time"))
        reason = meta.get("finish_reason") if isinstance(meta.get("finish_reason"), dict) else {}
        kind = reason.get("type")
        status = kind if isinstance(kind, str) else None
        if kind == "abort":
            code = reason.get("status_code")
            status = "error" if isinstance(code, int) and code >= 500 else "aborted"
            self.aborts[f"{reason.get('message') or 'abort'} ({code if code is not None else 'no status'})"] += 1
        retractions = meta.get("total_retractions", meta.get("num_retractions"))
        self.requests[meta["id"]] = {
            "request_id": meta["id"],
            "arrival_s": arrival,
            "arrival_resolution_s": resolution_s
            if received is None and finished is None and arrival is not None
            else None,
            "finished_s": end,
            "input_tokens": meta.get("prompt_tokens") if isinstance(meta.get("prompt_tokens"), int) else None,
            "output_tokens": meta.get("completion_tokens") if isinstance(meta.get("completion_tokens"), int) else None,
            "cached_tokens": meta.get("cached_tokens") if isinstance(meta.get("cached_tokens"), int) else None,
            "num_preemptions": retractions if isinstance(retractions, int) else None,
            "status": status,
            # an abort's HTTP status and message (FINISH_ABORT: status_code, message)
            "error_code": reason.get("status_code")
            if kind == "abort" and isinstance(reason.get("status_code"), int)
            else None,
            "error": error_line(reason.get("message")) if kind == "abort" else None,
            "queue_s": queue if queue else None,  # exactly 0.0: the scheduler's stamps never came (module doc)
            "server_e2e_s": e2e,
            "server_ttft_s": sent - received if stream and sent is not None and received is not None else None,
            "_local": local and received is None and finished is None,  # its times from SGLang's own stamp
        }

    def _receive(self, body: str, ts: float | None, resolution_s: float | None, local: bool) -> None:
        if RECEIVE in body:
            m = _RID.search(body, body.find(RECEIVE) + len(RECEIVE) - 1)
            rid = m.group(1) if m else None
        else:
            try:
                record = json.loads(body[body.index("{") :])
                rid = record.get("rid")
                if ts is None or local:
                    ts, resolution_s, local = _iso_seconds(record.get("timestamp")), None, True
            except (ValueError, AttributeError):
                rid = None
        if isinstance(rid, str):
            self.received[rid] = {"arrival_s": ts, "arrival_resolution_s": resolution_s, "_local": local}

    def unfinished(self) -> list[dict[str, Any]]:
        """The requests a Receive line names and no Finish line ends (running at the log's end, lost when the server
        failed, or faster than ``SGLANG_LOG_REQUEST_EXCEEDED_MS``): status incomplete, at the Receive line's time."""
        return [
            {"request_id": rid, "status": "incomplete", "finished_s": None} | r
            for rid, r in self.received.items()
            if rid not in self.requests
        ]

    def zone_offset_s(self) -> int:
        """Where SGLang's own stamps are local time off UTC, the offset (seconds, a multiple of 15 minutes) between
        them and the epoch times the lines carry; 0 where they agree or nothing tells."""
        if not self.zone_checks:
            return 0
        middle = sorted(self.zone_checks)[len(self.zone_checks) // 2]
        return round(middle / 900) * 900


METRICS_EXPORT = "sglang-request-metrics"


def sniff_metrics_export(head: bytes) -> bool:
    """``--export-metrics-to-file`` JSON lines: each a request's ``meta_info`` beside its parameters as JSON text."""
    text = head.lstrip()
    return text[:1] == b"{" and b'"request_parameters": "' in text and (b'"e2e_latency"' in text or b'"id"' in text)


def ingest_metrics_export(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """SGLang's request metrics exporter (``FileRequestMetricsExporter``, ``sglang-request-metrics-<hour>.log``):
    one JSON line per finished request, ``{"request_parameters": json.dumps(obj's fields), **meta_info}``: the
    same ``meta_info`` the request log's Finish line carries, read as it is (``FinishLines.take``), the request's
    ``stream`` from its parameters. Times come only from the meta_info's own epoch stamps (2026 versions): an
    older record has none, and its request no arrival."""
    info = SourceInfo(path=path, format=METRICS_EXPORT)
    lines = FinishLines()
    for record in json_objects(path, info):
        try:
            params = json.loads(record.get("request_parameters") or "{}")
        except (TypeError, ValueError):
            params = {}
        meta = {k: v for k, v in record.items() if k != "request_parameters"}
        if not isinstance(meta.get("id"), str):
            lines.unreadable += 1
            continue
        stream = params.get("stream") if isinstance(params, dict) else None
        lines.take(meta, stream if isinstance(stream, bool) else None, None, None, False)
    if not lines.requests:
        raise TraceFormatError(path, "line 1", "no request record with a meta_info id")
    rows = [
        {k: v for k, v in r.items() if k != "_local"} | {"client_id": Path(path).name} for r in lines.requests.values()
    ]
    if lines.unreadable:
        info.dropped["records_without_id"] = lines.unreadable
        info.warnings.append(f"{path}: {lines.unreadable} record(s) without a meta_info id: left out")
    write_rows(stage, "requests", part, rows)
    info.records = len(rows)
    timed = sum(r["arrival_s"] is not None for r in rows)
    info.version = f"request metrics export: {len(rows):,} requests" + (
        "" if timed == len(rows) else f", {len(rows) - timed:,} without a time (no epoch stamps in their meta_info)"
    )
    if lines.aborts:
        info.details["aborted"] = dict(lines.aborts)
    return info

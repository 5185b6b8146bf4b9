"""Hugging Face TGI: router log lines with per-request timing spans (Rust duration strings), and response
headers (``x-queue-time``, ``x-total-time``, ...) saved by a client. What each file holds: docs/formats.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import check_wall_clock, collected_seconds, json_objects, stamp_ns, write_rows
from lltrace.parsers._lines import read_text, without_cut_record
from lltrace.source_info import SourceInfo

TGI_LOG = "tgi-log"
_RUST_DURATION = re.compile(r"([\d.]+)\s*(s|ms|µs|us|ns)$")
_TGI_FIELDS = re.compile(r'(total_time|validation_time|queue_time|inference_time|time_per_token)="([^"]+)"')
_INTEGER = re.compile(r"-?\d+")


def rust_duration_s(text: str) -> float:
    """``1.19s``, ``204.8µs``, ``23.1us``, ``19.9ms``, ``5ns`` → seconds."""
    m = _RUST_DURATION.match(text.strip())
    if m is None:
        raise ValueError(text)
    value, unit = float(m.group(1)), m.group(2)
    return value * {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}[unit]


def sniff_tgi_log(head: bytes) -> bool:
    """TGI router log lines with its per-request timing span fields."""
    text = head.decode("utf-8", "replace")
    return 'queue_time="' in text and 'inference_time="' in text


def ingest_tgi_log(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per request: queue time and server total; inference (prefill + decode) is not split by TGI."""
    info = SourceInfo(path=path, format=TGI_LOG, version="router log")
    rows = []
    text = without_cut_record(path, Path(path).read_text(encoding="utf-8", errors="replace"), info)
    for n, line in enumerate(text.splitlines(), start=1):
        fields = dict(_TGI_FIELDS.findall(line))
        if "queue_time" not in fields:
            continue
        try:
            d = {k: rust_duration_s(v) for k, v in fields.items()}
        except ValueError as exc:
            raise TraceFormatError(path, f"line {n}", f"not a duration: {exc.args[0]!r}") from None
        # the line's RFC 3339 stamp (tracing's, before its span fields): read as a collector's stamp is
        finished = collected_seconds(line[: _TGI_FIELDS.search(line).start()])
        if finished is not None:
            check_wall_clock(path, f"line {n}", finished, "a log line")
        rows.append(
            {
                "client_id": Path(path).name,
                "client_index": len(rows),
                "queue_s": d.get("queue_time"),
                "server_e2e_s": d.get("total_time"),
                "finished_s": finished,
                "status": "ok",
                "arrival_s": finished - d["total_time"] if finished is not None and "total_time" in d else None,
            }
        )
    info.records = write_rows(stage, "requests", part, rows)
    return info


# -- GenAI-Perf / AIPerf ----------------------------------------------------------------------------------


TGI_HEADERS = "tgi-response-headers"
_TGI_MS = {"x-queue-time": "queue_s", "x-total-time": "server_e2e_s"}


def sniff_tgi_headers(head: bytes) -> bool:
    """TGI response headers saved by a client, one response per JSON line or CSV row."""
    first = head.lstrip().split(b"\n", 1)[0]
    return b"x-queue-time" in first and (b"x-inference-time" in first or b"x-total-time" in first)


def ingest_tgi_headers(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Per response: queue and total time (integer ms headers), prompt and generated tokens.

    ``x-inference-time`` covers prefill and decode together (TGI does not split it), and
    ``x-time-per-token`` is inference time over generated tokens, prefill included; both stay in the
    metadata's description, not in the requests columns.
    """
    import csv as _csv

    info = SourceInfo(path=path, format=TGI_HEADERS)
    text = read_text(path)
    if text.lstrip().startswith("{"):
        records, info.version = json_objects(path, info), "JSON lines"
    else:
        records, info.version = list(_csv.DictReader(text.splitlines())), "CSV"
    rows = []
    not_whole: dict[str, int] = {}
    for i, h in enumerate(records):
        h = {str(k).lower(): v for k, v in h.items()}

        def whole(key: str, h: dict = h, i: int = i) -> int | None:
            """TGI writes these headers as integers (router/src/server.rs): a fraction is no value (NULL,
            counted), a number beyond int64 the one-line error."""
            v = str(h.get(key) or "").strip()
            if not _INTEGER.fullmatch(v):
                if v:
                    not_whole[key] = not_whole.get(key, 0) + 1
                return None
            return stamp_ns(path, f"record {i + 1}", int(v))

        row: dict[str, Any] = {
            "client_id": Path(path).name,
            "client_index": i,
            "status": "ok",
            "input_tokens": whole("x-prompt-tokens"),
            "output_tokens": whole("x-generated-tokens"),
        }
        for key, col in _TGI_MS.items():
            v = whole(key)
            row[col] = v / 1e3 if v is not None else None
        rows.append(row)
    if not_whole:
        info.dropped["not_whole_numbers"] = sum(not_whole.values())
        info.warnings.append(
            f"{path}: {sum(not_whole.values())} header value(s) that are not whole numbers, left NULL: "
            + ", ".join(f"{k} ({n})" for k, n in sorted(not_whole.items()))
        )
    info.records = write_rows(stage, "requests", part, rows)
    return info

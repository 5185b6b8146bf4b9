"""Join the files of one run into the canonical ``requests`` table, on one clock.

Bench rows (client side, ``perf_counter`` clock) are matched to ``llm_request`` spans (engine side, wall
clock) by request id: vLLM's bench client sends ``cmpl-<request_id_prefix><i>-0`` for its i-th request.
The prefix comes from the client log naming the bench file; without one it is inferred from the spans (the
prefix whose ids cover 0..n-1 with the same token counts). The client clock is then mapped onto the wall
clock by the median offset between each matched request's send time and its span's start; the method,
offset and residual (median and p90 of the absolute mismatch) go into the run metadata.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from lltrace.queries import install_views
from lltrace.tables import REQUEST_EVENTS, REQUESTS, table_from_rows

PROVENANCE = {
    "requests.queue_s": "measured: span gen_ai.latency.time_in_queue",
    "requests.prefill_s": "measured: span gen_ai.latency.time_in_model_prefill",
    "requests.decode_s": "measured: span gen_ai.latency.time_in_model_decode",
    "requests.arrival_s": "measured: span start (frontend wall clock); for client-only rows, derived: client "
    "send time + the aligned clock offset",
    "requests.first_token_s": "derived: arrival_s + span time_to_first_token",
    "requests.scheduled_s": "derived: first_token_s - prefill_s",
    "requests.queued_s": "derived: scheduled_s - queue_s",
    "requests.last_token_s": "derived: first_token_s + decode_s",
    "requests.ttft_s": "measured by the client (bench ttfts)",
    "requests.e2e_s": "measured by the client (bench latencies)",
    "engine_steps.start_s (source log)": "estimated: iteration ends chained from elapsed times within 1 s log stamps",
    "engine_stats.ts_s (source log)": "derived: log stamp with the year of another source, zone UTC or inferred",
    "requests.queue_s_est / prefill_s_est": "estimated: client TTFT split by a prefill rate calibrated on the "
    "run's engine steps (split_basis says how)",
}

_ID = re.compile(r"^cmpl-(.*?)(\d+)-0$")


def staged_rows(folder: Path) -> list[dict[str, Any]]:
    """Every row of a staged table (``stage/_bench``, ``stage/_spans``) as dicts."""
    tables = [pq.read_table(f) for f in sorted(folder.glob("*.parquet"))]
    return pa.concat_tables(tables).to_pylist() if tables else []


def _infer_prefix(bench: list[dict], spans_by_id: dict[str, dict]) -> str | None:
    """The request-id prefix under which the spans cover this bench file's requests with its token counts."""
    prefixes: dict[str, int] = {}
    for rid in spans_by_id:
        m = _ID.match(rid)
        if m:
            prefixes[m.group(1)] = prefixes.get(m.group(1), 0) + 1
    best, best_hits = None, 0
    for prefix in prefixes:
        hits = 0
        for b in bench:
            s = spans_by_id.get(f"cmpl-{prefix}{b['idx']}-0")
            if s and s["prompt_tokens"] == b["input_tokens"]:
                hits += 1
        if hits > best_hits:
            best, best_hits = prefix, hits
    return best if best_hits >= max(1, len(bench) // 2) else None


def _request_events(spans_by_id: dict[str, dict], requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """State changes per request: the engine's journey events where the spans carry them (measured), else
    the span's timeline (derived: queued, scheduled, first_token, finished)."""
    events: list[dict[str, Any]] = []
    for r in requests:
        s = spans_by_id.get(r["request_id"])
        if s is None:
            continue
        journey = json.loads(s["journey"]) if s.get("journey") else []
        if journey:
            for name, t_ns in journey:
                events.append(
                    {
                        "request_id": r["request_id"],
                        "ts_s": t_ns / 1e9,
                        "event": name,
                        "tokens": None,
                        "basis": "measured",
                    }
                )
            continue
        for name, col in (
            ("queued", "queued_s"),
            ("scheduled", "scheduled_s"),
            ("first_token", "first_token_s"),
            ("finished", "finished_s"),
        ):
            if r.get(col) is not None:
                events.append(
                    {
                        "request_id": r["request_id"],
                        "ts_s": r[col],
                        "event": name,
                        "tokens": r["output_tokens"] if name == "finished" else None,
                        "basis": "derived",
                    }
                )
    return events


def preempted_times(events: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per request with a preemption: time preempted until rescheduled, and the part before its first token,
    summed over the ``request_preemptions`` view (the one pairing of the two) over these events."""
    if not any(e["event"] == "preempted" for e in events):
        return {}
    con = duckdb.connect()
    try:
        con.register("_events", table_from_rows(events, REQUEST_EVENTS))
        con.execute("CREATE VIEW request_events AS SELECT *, 'staged' AS run_id FROM _events")
        install_views(con, ["request_preemptions"])
        rows = con.execute(
            "SELECT request_id, sum(coalesce(duration_s, 0)), "
            "coalesce(sum(duration_s) FILTER (WHERE before_first_token), 0) FROM request_preemptions GROUP BY 1"
        ).fetchall()
    finally:
        con.close()
    return {rid: {"preempted_s": total, "preempted_in_prefill_s": first} for rid, total, first in rows}


def assemble_requests(stage: Path, sources: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Build ``stage/requests`` from the staged ``_bench`` and ``_spans`` rows; returns the join report."""
    has_bench = any((stage / "_bench").glob("*.parquet"))
    has_spans = any((stage / "_spans").glob("*.parquet"))
    if not has_bench and not has_spans:
        return None
    bench = staged_rows(stage / "_bench")
    spans = staged_rows(stage / "_spans")
    spans_by_id: dict[str, dict] = {}
    duplicates = 0
    for s in spans:
        if s["request_id"] in spans_by_id:
            duplicates += 1
        spans_by_id[s["request_id"]] = s  # a repeated id keeps the last span; counted in the report
    prefixes = {}
    for src in sources:
        client = src.get("client")
        if client and client.get("request_id_prefix") is not None:
            prefixes[client.get("result_filename")] = client["request_id_prefix"]

    by_client: dict[str, list[dict]] = {}
    for b in bench:
        by_client.setdefault(b["client_id"], []).append(b)
    report: dict[str, Any] = {"clients": [], "duplicate_span_ids": duplicates}
    matched: dict[str, dict] = {}
    offsets: list[float] = []
    for client_id, rows in by_client.items():
        file = rows[0]["client_file"]
        prefix = prefixes.get(file) if "#" not in client_id else None
        how = "client log request_id_prefix"
        if prefix is None and spans_by_id:
            prefix = _infer_prefix(rows, spans_by_id)
            how = "inferred from span ids and token counts"
        n_match = mismatched = 0
        for b in rows:
            s = spans_by_id.get(f"cmpl-{prefix}{b['idx']}-0") if prefix is not None else None
            if s is None or s["request_id"] in matched:
                continue
            if (
                s["prompt_tokens"] is not None
                and b["input_tokens"] is not None
                and s["prompt_tokens"] != b["input_tokens"]
            ):
                mismatched += 1
                continue
            matched[s["request_id"]] = b
            n_match += 1
            if b["client_start_s"] is not None:
                offsets.append(s["start_ns"] / 1e9 - b["client_start_s"])
        report["clients"].append(
            {
                "client_id": client_id,
                "requests": len(rows),
                "matched": n_match,
                "prefix": prefix,
                "prefix_from": how if prefix is not None else None,
                "token_mismatches": mismatched,
            }
        )
    offset = statistics.median(offsets) if offsets else None
    clock = None
    if offset is not None:
        residuals = sorted(abs(o - offset) for o in offsets)
        clock = {
            "source": "bench client perf_counter",
            "method": "median offset of matched request send times to span starts (frontend wall clock)",
            "offset_s": offset,
            "residual_median_s": residuals[len(residuals) // 2],
            "residual_p90_s": residuals[min(len(residuals) - 1, int(0.9 * len(residuals)))],
            "matched_events": len(offsets),
        }
    report["clock"] = clock

    out: list[dict[str, Any]] = []
    bench_matched = {id(b) for b in matched.values()}
    for rid, s in spans_by_id.items():
        b = matched.get(rid)
        arrival = s["start_ns"] / 1e9
        first = arrival + s["ttft_s"] if s["ttft_s"] is not None else None
        sched = first - s["prefill_s"] if first is not None and s["prefill_s"] is not None else None
        out.append(
            {
                "request_id": rid,
                "client_id": b["client_id"] if b else None,
                "client_index": b["idx"] if b else None,
                "arrival_s": arrival,
                "queued_s": sched - s["queue_s"] if sched is not None and s["queue_s"] is not None else None,
                "scheduled_s": sched,
                "first_token_s": first,
                "last_token_s": first + s["decode_s"] if first is not None and s["decode_s"] is not None else None,
                "finished_s": s["end_ns"] / 1e9,
                "input_tokens": s["prompt_tokens"] if s["prompt_tokens"] is not None else (b or {}).get("input_tokens"),
                "output_tokens": s["completion_tokens"]
                if s["completion_tokens"] is not None
                else (b or {}).get("output_tokens"),
                "cached_tokens": s.get("cached_tokens"),
                "prefix_block_ids": None,
                "num_preemptions": s["num_preemptions"],
                "status": (b["status"] if b else None) or s["finish_status"] or "finished",
                "ttft_s": b["ttft_s"] if b else None,
                "e2e_s": b["e2e_s"] if b else None,
                "queue_s": s["queue_s"],
                "prefill_s": s["prefill_s"],
                "decode_s": s["decode_s"],
                "server_ttft_s": s["ttft_s"],
                "server_e2e_s": s["e2e_s"],
                "client_start_s": b["client_start_s"] if b else None,
                "arrival_ns": s["start_ns"],
                "matched_by": "request_id" if b else None,
            }
        )
    for b in bench:
        if id(b) in bench_matched:
            continue
        arrival = b["client_start_s"] + offset if b["client_start_s"] is not None and offset is not None else None
        out.append(
            {
                "request_id": f"{b['client_id']}:{b['idx']}",
                "client_id": b["client_id"],
                "client_index": b["idx"],
                "arrival_s": arrival,
                "input_tokens": b["input_tokens"],
                "output_tokens": b["output_tokens"],
                "status": b["status"],
                "ttft_s": b["ttft_s"],
                "e2e_s": b["e2e_s"],
                "client_start_s": b["client_start_s"],
                "matched_by": None,
            }
        )
    events = _request_events(spans_by_id, out)
    if events:
        (stage / "request_events").mkdir(exist_ok=True)
        pq.write_table(table_from_rows(events, REQUEST_EVENTS), stage / "request_events" / "part-joined.parquet")
        preempted = preempted_times(events)
        for r in out:
            r.update(preempted.get(r["request_id"], {}))
    report["request_events"] = len(events)
    (stage / "requests").mkdir(exist_ok=True)
    table = table_from_rows(out, REQUESTS).sort_by([("arrival_s", "ascending")])
    pq.write_table(table, stage / "requests" / "part-joined.parquet", compression="zstd")
    report["requests"] = len(out)
    report["spans"] = len(spans)
    report["bench_rows"] = len(bench)
    return report

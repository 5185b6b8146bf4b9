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
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lltrace.parsers.schema import REQUEST_SCHEMA, table_from_rows

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


def _rows(folder: Path) -> list[dict[str, Any]]:
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


EVENT_SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("ts_s", pa.float64()),
        ("event", pa.string()),
        ("tokens", pa.int64()),
        ("basis", pa.string()),
    ]
)


def _preempted(span: dict) -> dict[str, float]:
    """Preempted time from journey events: each PREEMPTED until the next SCHEDULED (measured)."""
    journey = json.loads(span["journey"]) if span.get("journey") else []
    if not any(name == "preempted" for name, _ in journey):
        return {}
    first_token = next((t for name, t in journey if name == "first_token"), None)
    total = in_prefill = 0.0
    pending = None
    for name, t in sorted(journey, key=lambda e: e[1]):
        if name == "preempted":
            pending = t
        elif name == "scheduled" and pending is not None:
            total += (t - pending) / 1e9
            if first_token is None or pending < first_token:
                in_prefill += (t - pending) / 1e9
            pending = None
    return {"preempted_s": total, "preempted_in_prefill_s": in_prefill}


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


def assemble_requests(stage: Path, sources: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Build ``stage/requests`` from the staged ``_bench`` and ``_spans`` rows; returns the join report."""
    has_bench = any((stage / "_bench").glob("*.parquet"))
    has_spans = any((stage / "_spans").glob("*.parquet"))
    if not has_bench and not has_spans:
        return None
    bench = _rows(stage / "_bench")
    spans = _rows(stage / "_spans")
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
                "cached_tokens": None,
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
                **_preempted(s),
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
        pq.write_table(table_from_rows(events, EVENT_SCHEMA), stage / "request_events" / "part-joined.parquet")
    report["request_events"] = len(events)
    (stage / "requests").mkdir(exist_ok=True)
    table = table_from_rows(out, REQUEST_SCHEMA).sort_by([("arrival_s", "ascending")])
    pq.write_table(table, stage / "requests" / "part-joined.parquet", compression="zstd")
    report["requests"] = len(out)
    report["spans"] = len(spans)
    report["bench_rows"] = len(bench)
    return report


def _needs_year(stamp: str | None) -> bool:
    """A vLLM-style ``MM-DD HH:MM:SS`` stamp (SGLang's carry their year and are placed when read)."""
    return stamp is not None and len(stamp) == 14


def place_log_times(stage: Path) -> dict[str, Any] | None:
    """Put log-stamped rows (``MM-DD HH:MM:SS``, no year, no zone) on the run clock.

    The year comes from another source of the run (span start, scrape time or profiler clock, the earliest
    one); the zone is UTC unless the spans show the log's clock a whole number of hours off, in which case
    that offset is applied. Iteration lines are printed when an iteration ends: each ``end_s`` is chained
    from the previous end plus the elapsed time and kept at or after its own 1-second stamp (estimated).
    """
    stat_files = sorted((stage / "engine_stats").glob("*.parquet"))
    step_files = sorted((stage / "engine_steps").glob("*.parquet"))
    logged = [
        f
        for f in stat_files + step_files
        if "log_stamp" in pq.read_schema(f).names
        and any(_needs_year(x) for x in pq.read_table(f, columns=["log_stamp"]).column("log_stamp").to_pylist())
    ]
    if not logged:
        return None
    anchors: list[tuple[float, str]] = []
    spans = _rows(stage / "_spans")
    if spans:
        anchors.append((min(s["start_ns"] for s in spans) / 1e9, "llm_request span start"))
    for f in stat_files:
        ts = [t for t in pq.read_table(f, columns=["ts_s"]).column("ts_s").to_pylist() if t is not None]
        if ts:
            anchors.append((min(ts), "Prometheus scrape time"))
    for f in step_files:
        if "start_ns" in pq.read_schema(f).names:
            ns = [t for t in pq.read_table(f, columns=["start_ns"]).column("start_ns").to_pylist() if t]
            if ns:
                anchors.append((min(ns) / 1e9, "profiler clock"))
    report: dict[str, Any] = {"source": "server log", "zone": "UTC (assumed)", "zone_offset_h": 0}
    if not anchors:
        report["method"] = "no other dated source in the run: log rows keep ts_s NULL (log_stamp only)"
        return report
    anchor, what = min(anchors)
    year = datetime.fromtimestamp(anchor, tz=timezone.utc).year
    report["method"] = f"year {year} from the {what}; zone UTC unless the spans say otherwise"

    def epoch(stamp: str) -> float:
        return datetime.strptime(f"{year}-{stamp}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()

    shift = 0.0
    step_rows = [r for f in step_files if f in logged for r in pq.read_table(f).to_pylist()]
    step_rows = [r for r in step_rows if _needs_year(r.get("log_stamp"))]
    if spans and step_rows:
        first_log = min(epoch(r["log_stamp"]) for r in step_rows)
        gap = first_log - min(s["start_ns"] for s in spans) / 1e9
        hours = round(gap / 3600)
        if hours:
            shift = -hours * 3600.0
            report["zone"] = f"UTC{hours:+d} (inferred: the log's first iteration is {hours} h off the first span)"
            report["zone_offset_h"] = hours
        report["first_iteration_minus_first_span_s"] = gap + shift
        if not hours:
            report["zone"] = f"UTC (checked: the first iteration is {gap:+.2f} s from the first span)"
    for f in logged:
        rows = pq.read_table(f).to_pylist()
        schema = pq.read_schema(f)
        if "ts_s" in schema.names:  # engine_stats
            for r in rows:
                if _needs_year(r.get("log_stamp")) and r.get("ts_s") is None:
                    r["ts_s"] = epoch(r["log_stamp"]) + shift
        else:  # engine_steps from iteration lines
            prev_end = None
            for r in sorted(rows, key=lambda r: r["step_id"]):
                if not _needs_year(r.get("log_stamp")) or r.get("end_s") is not None:
                    continue
                stamp = epoch(r["log_stamp"]) + shift
                end = stamp if prev_end is None else max(stamp, prev_end + (r["wall_s"] or 0.0))
                r["end_s"], r["start_s"] = end, end - (r["wall_s"] or 0.0)
                prev_end = end
        pq.write_table(table_from_rows(rows, schema), f)
    return report


def estimate_ttft_split(stage: Path) -> dict[str, Any] | None:
    """Split client TTFTs into queue and prefill where no engine source measured them (labelled estimated).

    The prefill rate is calibrated on the run itself: tokens per second of the engine's prefill-carrying
    iterations (``engine_steps`` from the server's iteration log or a profiler). Each request's prefill is
    its prompt at that rate; the rest of its TTFT is queue (plus frontend overhead, which no source here
    separates). Requests whose TTFT is shorter than that prefill keep both estimates NULL.
    """
    req_files = sorted((stage / "requests").glob("*.parquet"))
    step_files = sorted((stage / "engine_steps").glob("*.parquet"))
    if not req_files or not step_files:
        return None
    tokens = seconds = 0.0
    n = 0
    for f in step_files:
        t = pq.read_table(f, columns=["prefill_tokens", "decode_tokens", "wall_s"]).to_pylist()
        for r in t:
            if (r["prefill_tokens"] or 0) > 0 and r["wall_s"]:
                tokens += r["prefill_tokens"]
                seconds += r["wall_s"]
                n += 1
    if not n or not seconds:
        return None
    rate = tokens / seconds
    basis = f"estimated: prompt / calibrated prefill rate {rate:,.0f} tok/s ({n} prefill-carrying engine steps)"
    changed = 0
    for f in req_files:
        table = pq.read_table(f)
        rows = table.to_pylist()
        touched = False
        for r in rows:
            if r.get("ttft_s") is None or r.get("queue_s") is not None or r.get("prefill_s") is not None:
                continue
            if not r.get("input_tokens"):
                continue
            prefill = r["input_tokens"] / rate
            if prefill > r["ttft_s"]:
                continue
            r["prefill_s_est"], r["queue_s_est"], r["split_basis"] = prefill, r["ttft_s"] - prefill, basis
            changed += 1
            touched = True
        if touched:
            pq.write_table(table_from_rows(rows, REQUEST_SCHEMA), f)
    return {"prefill_tokens_per_s": rate, "steps": n, "requests_split": changed, "basis": basis} if changed else None

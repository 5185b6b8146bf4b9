"""Join the files of one run into the canonical ``requests`` table, on one clock.

Client records (the vLLM bench's staged rows, and the ``requests`` rows of other client formats) are paired with
engine records (``llm_request`` spans, and the ``requests`` rows of engine formats such as TGI's log): by request id
where the engine kept the client's (vLLM's bench client's i-th request is the engine's
``cmpl-<request_id_prefix><i>-0``, on the chat endpoint ``chatcmpl-<request_id_prefix><i>``; the prefix from the
client log naming the bench file, else inferred from the spans), else on what both saw (``match``: clock offset from
the arrival sequences, then an optimal one-to-one assignment). Each client clock is mapped onto the engine's wall
clock by the median offset of its joined pairs; the method, offsets and residuals (median and p90 of the absolute
mismatch), the unmatched records and the ties go into the run metadata.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lltrace.arrow_rows import table_from_rows
from lltrace.ingest.events import preempted_times, request_events_of
from lltrace.ingest.identity import unique_spans
from lltrace.ingest.match import Side, clock_offset, match
from lltrace.ingest.order import join_in_order
from lltrace.parsers import FORMATS
from lltrace.tables import REQUEST_EVENTS, REQUESTS

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
    "requests.arrival_s (client_id 'server log')": "measured: the log's Received request line's stamp (to the "
    "second as vLLM prints it; to the millisecond where a collector's or a dated config's stamp prints it)",
    "requests.server_e2e_s (client_id 'server log')": "measured: Finished (or Generated response) line's stamp - "
    "the Received line's, only where both stamps print milliseconds; else NULL",
    "engine_steps.start_s (source log)": "estimated: iteration ends chained from elapsed times within 1 s log stamps",
    "engine_stats.ts_s (source log)": "derived: log stamp with the year of another source, zone UTC or inferred",
    "requests.queue_s_est / prefill_s_est": "estimated: client TTFT split by a prefill rate calibrated on the "
    "run's engine steps (split_basis says how)",
}

# the id vLLM gives the i-th request of a bench client sending "<prefix><i>": cmpl-<prefix><i>-0 (completions: a
# prompt's index after the id), chatcmpl-<prefix><i> (chat: one prompt)
_ID = re.compile(r"^(?:cmpl-(.*?)(\d+)-0|chatcmpl-(.*?)(\d+))$")


def _span_of(spans_by_id: dict[str, dict], prefix: str, idx: int) -> dict | None:
    """The span of a bench client's ``idx``-th request sent under ``prefix`` (either of ``_ID``'s forms)."""
    return spans_by_id.get(f"cmpl-{prefix}{idx}-0") or spans_by_id.get(f"chatcmpl-{prefix}{idx}")


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
            prefix = m.group(1) if m.group(1) is not None else m.group(3)
            prefixes[prefix] = prefixes.get(prefix, 0) + 1
    best, best_hits = None, 0
    for prefix in prefixes:
        hits = 0
        for b in bench:
            s = _span_of(spans_by_id, prefix, b["idx"])
            if s and s["prompt_tokens"] == b["input_tokens"]:
                hits += 1
        if hits > best_hits:
            best, best_hits = prefix, hits
    return best if best_hits >= max(1, len(bench) // 2) else None


@dataclass
class FeatureJoin:
    """What :func:`join_on_features` found: the (client row, span) pairs, per client its report entry, and the
    join's summary (method, residuals, ties, unmatched spans)."""

    pairs: list[tuple[dict, dict]]
    clients: dict[str, dict[str, Any]]
    summary: dict[str, Any]


_CLIENT_KEYS = {
    "arrival": "client_start_s",
    "first_token": "_first_s",
    "last_token": "_last_s",
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
}
_SPAN_KEYS = {
    "arrival": "_arrival_s",
    "first_token": "_first_s",
    "last_token": "_last_s",
    "input_tokens": "prompt_tokens",
    "output_tokens": "completion_tokens",
}
FEATURE_METHOD = (
    "features: send time against the engine's arrival (clock offset from the two arrival sequences), first- and "
    "last-token times, prompt and output token counts; optimal one-to-one assignment (toolkit/ingest/match.py)"
)


def _client_times(b: dict[str, Any]) -> dict[str, Any]:
    start = b["client_start_s"]
    ok = start is not None and b["status"] in ("ok", "warmup")  # a warm-up request was served all the same
    return b | {
        "_first_s": start + b["ttft_s"] if ok and b["ttft_s"] is not None else None,
        "_last_s": start + b["e2e_s"] if ok and b["e2e_s"] is not None else None,
    }


def _span_times(s: dict[str, Any]) -> dict[str, Any]:
    arrival = s["start_ns"] / 1e9 if s["start_ns"] is not None else None
    end = s["end_ns"] / 1e9 if s["end_ns"] is not None else None
    return s | {
        "_arrival_s": arrival,
        "_first_s": arrival + s["ttft_s"] if arrival is not None and s["ttft_s"] is not None else None,
        "_last_s": arrival + s["e2e_s"] if arrival is not None and s["e2e_s"] is not None else end,
    }


def _clock(source: str, method: str, offsets: list[float]) -> dict[str, Any]:
    """A client clock's alignment: the median of the joined pairs' offsets and the residuals around it."""
    offset = statistics.median(offsets)
    residuals = sorted(abs(o - offset) for o in offsets)
    return {
        "source": source,
        "method": method,
        "offset_s": offset,
        "residual_median_s": residuals[len(residuals) // 2],
        "residual_p90_s": residuals[min(len(residuals) - 1, int(0.9 * len(residuals)))],
        "matched_events": len(offsets),
    }


def join_on_features(clients: dict[str, list[dict]], spans: list[dict]) -> FeatureJoin:
    """Join client rows without ids in common with the engine's spans on what both saw (``match``): each client
    file's clock offset from its own arrival sequence, then one assignment over all of them, so no span is
    taken twice."""
    engine = [_span_times(s) for s in spans]
    engine_side = Side.of(engine, _SPAN_KEYS)
    shifted: list[dict] = []
    owner: list[str] = []
    position: list[int] = []
    entries: dict[str, dict[str, Any]] = {}
    for client_id, rows in clients.items():
        timed = [_client_times(b) for b in rows]
        side = Side.of(timed, _CLIENT_KEYS)
        offset = clock_offset(side.arrival, engine_side.arrival)
        entries[client_id] = {"client_id": client_id, "requests": len(rows), "method": "features"}
        entries[client_id]["clock_offset_s"] = offset
        for k, b in enumerate(timed):
            position.append(k)
            shifted.append(
                {
                    k: (v + offset if k in ("client_start_s", "_first_s", "_last_s") and v is not None else v)
                    for k, v in b.items()
                }
                if offset is not None
                else b | {"client_start_s": None}
            )
            owner.append(client_id)
    result = match(Side.of(shifted, _CLIENT_KEYS), engine_side, offset=0.0)
    pairs = [(clients[owner[ci]][position[ci]], spans[ej]) for ci, ej in result.pairs]
    for client_id, entry in entries.items():
        mine = [ci for ci, who in enumerate(owner) if who == client_id]
        got = [(ci, ej) for ci, ej in result.pairs if owner[ci] == client_id]
        lags = [engine[ej]["_arrival_s"] - shifted[ci]["client_start_s"] for ci, ej in got]
        no_send = sum(1 for ci in mine if shifted[ci]["client_start_s"] is None)
        entry.update(
            matched=len(got),
            unmatched=len(mine) - len(got),
            unmatched_why="no engine record within the request's client lifetime with its token counts"
            + (f"; {no_send} without a send time" if no_send else ""),
            ties=sum(1 for ci in mine if ci in result.tied),
        )
        if entry["clock_offset_s"] is not None and lags:
            entry["clock"] = _clock(
                f"{client_id}: client clock",
                "clock offset from the client's and the engine's arrival sequences (no ids in common)",
                [entry["clock_offset_s"] + x for x in lags],
            )
    summary = {
        "method": FEATURE_METHOD,
        "residuals": result.residuals,
        "systematic": result.systematic,
        "exact_token_counts": result.exact_tokens,
        "ties": len(result.tied),
        "ties_note": "requests the features cannot tell apart (same sizes, sent and answered within the "
        "residuals): which of them got which span is arbitrary, the set of pairs is not",
        "unmatched_spans": len(result.unmatched_engine),
    }
    return FeatureJoin(pairs, entries, summary)


CLIENT_RECORDS = {f.name for f in FORMATS if f.saved_by_client}
"""Formats whose rows are a client's record of engine requests although they hold the engine's own figures (vLLM's
per-request metrics in the response bodies a client saved): joined to the engine's spans as a client's records."""


def _request_parts(
    stage: Path, sources: list[dict[str, Any]]
) -> tuple[list[tuple[Path, list[dict]]], list[tuple[Path, list[dict]]]]:
    """The ``requests`` parts the formats wrote, as (client parts, engine parts): client latencies and no engine
    measures (AIPerf, guidellm, GenAI-Perf, trtllm-bench …, and the formats of ``CLIENT_RECORDS``), or engine measures
    and no client latencies (TGI's router log …). The join pairs the one with the other like the vLLM bench's
    records with its spans."""
    formats = {s.get("part"): s.get("format") for s in sources}
    client_parts, engine_parts = [], []
    for f in sorted((stage / "requests").glob("part-*.parquet")):
        # decided on the columns alone: a part that is neither (an arrival trace's millions of rows) is never
        # read as Python rows
        client, engine = _gives(f, ("ttft_s", "e2e_s")), _gives(f, ("server_e2e_s", "queue_s"))
        if formats.get(int(f.stem.split("-")[1])) in CLIENT_RECORDS:
            client, engine = True, False
        if client != engine:
            (client_parts if client else engine_parts).append((f, pq.read_table(f).to_pylist()))
    return client_parts, engine_parts


def _gives(part: Path, columns: tuple[str, ...]) -> bool:
    """Whether a staged ``requests`` part has a value in any of ``columns`` (the file's columns only are read)."""
    have = [c for c in columns if c in pq.read_schema(part).names]
    return bool(have) and any(c.null_count < len(c) for c in pq.read_table(part, columns=have).columns)


def _engine_row(row: dict[str, Any], b: dict[str, Any] | None, how: str | None) -> dict[str, Any]:
    """An engine format's request row with its client record's measures joined on."""
    if b is None:
        return row
    client = b.get("_row") or {}
    return row | {
        "client_id": b["client_id"],
        "client_index": b["idx"],
        "ttft_s": b["ttft_s"],
        "e2e_s": b["e2e_s"],
        "client_start_s": client.get("client_start_s", b["client_start_s"]),
        "input_tokens": row.get("input_tokens") if row.get("input_tokens") is not None else b["input_tokens"],
        "output_tokens": row.get("output_tokens") if row.get("output_tokens") is not None else b["output_tokens"],
        "status": b["status"] if b["status"] != "ok" else row.get("status"),
        "error_code": b.get("error_code") if b.get("error_code") is not None else row.get("error_code"),
        "error": b.get("error") or row.get("error"),
        "matched_by": how,
    }


def _as_engine_record(row: dict[str, Any], part: Path, k: int) -> dict[str, Any]:
    """An engine format's request row in the shape of a staged span (its own row kept whole in ``_row``)."""
    arrival, finished = row.get("arrival_s"), row.get("finished_s")
    if finished is None and arrival is not None and row.get("server_e2e_s") is not None:
        finished = arrival + row["server_e2e_s"]
    rid = row.get("request_id") or f"{row.get('client_id') or part.stem}:{k}"
    return {
        "request_id": rid,
        "start_ns": round(arrival * 1e9) if arrival is not None else None,
        "end_ns": round(finished * 1e9) if finished is not None else None,
        "ttft_s": row.get("server_ttft_s"),
        "e2e_s": row.get("server_e2e_s"),
        "queue_s": row.get("queue_s"),
        "prefill_s": row.get("prefill_s"),
        "decode_s": row.get("decode_s"),
        "prompt_tokens": row.get("input_tokens"),
        "completion_tokens": row.get("output_tokens"),
        "cached_tokens": row.get("cached_tokens"),
        "num_preemptions": row.get("num_preemptions"),
        "finish_status": row.get("status"),
        "journey": None,
        "_row": row | {"request_id": rid},
    }


def _as_client_record(row: dict[str, Any], part: Path, k: int) -> dict[str, Any]:
    """A client format's request row in the shape the join reads (its own row kept whole in ``_row``)."""
    ok = row.get("status") in (None, "ok", "finished", "success")
    start = row.get("client_start_s") if row.get("client_start_s") is not None else row.get("arrival_s")
    return {
        "client_id": row.get("client_id") or part.stem,
        "client_file": row.get("client_id") or part.stem,
        "idx": row.get("client_index") if row.get("client_index") is not None else k,
        "input_tokens": row.get("input_tokens"),
        "output_tokens": row.get("output_tokens"),
        "ttft_s": row.get("ttft_s"),
        "e2e_s": row.get("e2e_s"),
        "client_start_s": start,
        "status": "ok" if ok else "error",
        "error_code": row.get("error_code"),
        "error": row.get("error"),
        "_row": row,
        "_part": part,
    }


def _span_for_id(rid: str | None, spans_by_id: dict[str, dict], engine_rid: str | None = None) -> dict | None:
    """The span of the id a client sent: the same id, or the engine's ``cmpl-<id>-0`` / ``chatcmpl-<id>``; else of
    the id the engine answered with (a response's ``id``: vLLM's ``cmpl-<x>``, whose first prompt the engine runs
    as ``cmpl-<x>-0``, or ``chatcmpl-<x>`` itself)."""
    candidates = (rid, f"cmpl-{rid}-0", f"chatcmpl-{rid}", f"cmpl-{rid}") if rid else ()
    if engine_rid:
        candidates += (engine_rid, f"{engine_rid}-0")
    for candidate in candidates:
        if candidate in spans_by_id:
            return spans_by_id[candidate]
    return None


def assemble_requests(stage: Path, sources: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Build ``stage/requests`` from the staged ``_bench`` and ``_spans`` rows; returns the join report."""
    bench = staged_rows(stage / "_bench")
    spans = staged_rows(stage / "_spans")
    client_parts, engine_parts = _request_parts(stage, sources)
    if (bench or client_parts) and (spans or engine_parts):
        # both sides of the requests are here: every client format against every engine format
        others = client_parts + engine_parts
        for f, rows in client_parts:
            bench.extend(_as_client_record(r, f, k) for k, r in enumerate(rows))
        for f, rows in engine_parts:
            spans.extend(_as_engine_record(r, f, k) for k, r in enumerate(rows))
    elif not bench and not spans:
        return None
    else:
        others = []
    spans, duplicates = unique_spans(spans, sources)
    spans_by_id: dict[str, dict] = {s["request_id"]: s for s in spans}
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
    how_matched: dict[int, str] = {}  # id(bench row) -> request_id | features
    offsets: list[float] = []
    unjoined: dict[str, list[dict]] = {}
    own_offset: dict[str, float] = {}  # client formats on their own clocks
    for client_id, rows in by_client.items():
        if rows[0].get("_row") is not None:
            # another client's records: joined by the ids it sent where the engine kept them, else on features
            found = [(b, _span_for_id(b["_row"].get("request_id"), spans_by_id)) for b in rows]
            ids_from = "the ids the client sent"
            if not any(s for _, s in found):  # the ids it kept never reached the engine: the ids it was answered with
                found = [(b, _span_for_id(None, spans_by_id, b["_row"].get("engine_request_id"))) for b in rows]
                ids_from = "the ids the engine answered with: each response's id"
            found = [(b, s) for b, s in found if s is not None and s["request_id"] not in matched]
            if 2 * len(found) < len(rows):
                unjoined[client_id] = rows
                continue
            lags = []
            for b, s in found:
                matched[s["request_id"]] = b
                how_matched[id(b)] = "request_id"
                if b["client_start_s"] is not None and s["start_ns"] is not None:
                    lags.append(s["start_ns"] / 1e9 - b["client_start_s"])
            entry = {
                "client_id": client_id,
                "requests": len(rows),
                "matched": len(found),
                "method": "request_id",
                "prefix_from": ids_from,
                "unmatched": len(rows) - len(found),
                # a client that counts output tokens by tokenising the text it got back (AIPerf's OSL) can count
                # other than the engine did; the joined row keeps the engine's
                "output_token_mismatches": sum(
                    b["output_tokens"] is not None
                    and s["completion_tokens"] is not None
                    and b["output_tokens"] != s["completion_tokens"]
                    for b, s in found
                ),
            }
            if lags:
                entry["clock"] = _clock(
                    f"{client_id}: client clock",
                    "median offset of the id-joined requests' send times to span starts",
                    lags,
                )
                own_offset[client_id] = entry["clock"]["offset_s"]
            report["clients"].append(entry)
            continue
        file = rows[0]["client_file"]
        prefix = prefixes.get(file) if "#" not in client_id else None
        how = "client log request_id_prefix"
        if prefix is None and spans_by_id:
            prefix = _infer_prefix(rows, spans_by_id)
            how = "inferred from span ids and token counts"
        if prefix is None:
            unjoined[client_id] = rows  # no ids in common: joined on what both saw, below
            continue
        mismatched = 0
        found: list[tuple[dict, dict]] = []
        for b in rows:
            s = _span_of(spans_by_id, prefix, b["idx"])
            if s is None or s["request_id"] in matched:
                continue
            if (
                s["prompt_tokens"] is not None
                and b["input_tokens"] is not None
                and s["prompt_tokens"] != b["input_tokens"]
            ):
                mismatched += 1
                continue
            found.append((b, s))
        if 2 * len(found) < len(rows):
            unjoined[client_id] = rows  # the ids the client sent are not the engine's (a proxy rewrote them)
            continue
        n_match = len(found)
        for b, s in found:
            matched[s["request_id"]] = b
            how_matched[id(b)] = "request_id"
            if b["client_start_s"] is not None and s["start_ns"] is not None:
                offsets.append(s["start_ns"] / 1e9 - b["client_start_s"])
        report["clients"].append(
            {
                "client_id": client_id,
                "requests": len(rows),
                "matched": n_match,
                "method": "request_id",
                "prefix": prefix,
                "prefix_from": how,
                "token_mismatches": mismatched,
                "unmatched": len(rows) - n_match,
            }
        )
    offset = statistics.median(offsets) if offsets else None
    clocks: list[dict[str, Any]] = []
    if offset is not None:
        clocks.append(
            _clock(
                "bench client perf_counter",
                "median offset of matched request send times to span starts (frontend wall clock)",
                offsets,
            )
        )
    client_offset = dict.fromkeys(by_client, offset) | own_offset
    clocks.extend(c["clock"] for c in report["clients"] if c.get("clock"))
    free = [s for rid, s in spans_by_id.items() if rid not in matched]
    if unjoined and free:  # clients without send times first, by the order they sent in
        in_order, entries, unjoined = join_in_order(unjoined, free)
        for b, s in in_order:
            matched[s["request_id"]], how_matched[id(b)] = b, "order"
        report["clients"].extend(entries)
        free = [s for s in free if s["request_id"] not in matched]
    if unjoined and free:
        joined = join_on_features(unjoined, free)
        for b, s in joined.pairs:
            matched[s["request_id"]] = b
            how_matched[id(b)] = "features"
        for client_id, entry in joined.clients.items():
            report["clients"].append(entry)
            client_offset[client_id] = entry["clock_offset_s"]
            if entry.get("clock"):
                clocks.append(entry["clock"])
        report["features"] = joined.summary
    elif unjoined:
        for client_id, rows in unjoined.items():
            report["clients"].append(
                {
                    "client_id": client_id,
                    "requests": len(rows),
                    "matched": 0,
                    "method": None,
                    "unmatched": len(rows),
                    "unmatched_why": "no engine records left to join",
                }
            )
    report["clock"] = clocks[0] if clocks else None
    report["clocks"] = clocks
    if bench and spans_by_id:
        report["unmatched_spans"] = len(spans_by_id) - len(matched)

    out: list[dict[str, Any]] = []
    bench_matched = {id(b) for b in matched.values()}
    for rid, s in spans_by_id.items():
        b = matched.get(rid)
        if s.get("_row") is not None:  # an engine format's row: itself, with the client's side joined on
            out.append(_engine_row(s["_row"], b, how_matched.get(id(b)) if b else None))
            continue
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
                "error_code": b.get("error_code") if b else None,
                "error": b.get("error") if b else None,
                "ttft_s": b["ttft_s"] if b else None,
                "e2e_s": b["e2e_s"] if b else None,
                "queue_s": s["queue_s"],
                "prefill_s": s["prefill_s"],
                "decode_s": s["decode_s"],
                "server_ttft_s": s["ttft_s"],
                "server_e2e_s": s["e2e_s"],
                "client_start_s": b["client_start_s"] if b else None,
                "arrival_ns": s["start_ns"],
                "matched_by": how_matched.get(id(b)) if b else None,
            }
        )
        if b is not None and b.get("_row") is not None:
            row = b["_row"]  # what the client format gives and the span does not
            joined = out[-1]
            joined["client_start_s"] = row.get("client_start_s")
            for key in ("cached_tokens", "prefix_block_ids", "engine_request_id"):
                if joined.get(key) is None:
                    joined[key] = row.get(key)
            if row.get("status") not in (None, "ok", "finished", "success"):
                joined["status"] = row["status"]
    # a client record no engine record joined and no send time places, beside engine records no client record
    # joined, cannot be told from them: kept, but not counted (status unjoined), so no request is counted twice
    left, placeless = len(spans_by_id) - len(matched), dict.fromkeys(by_client, 0)
    for b in bench:
        if id(b) in bench_matched:
            continue
        shift = client_offset.get(b["client_id"])
        arrival = b["client_start_s"] + shift if b["client_start_s"] is not None and shift is not None else None
        status = "unjoined" if left and b["client_start_s"] is None and b["status"] == "ok" else b["status"]
        placeless[b["client_id"]] += status == "unjoined"
        if b.get("_row") is not None:
            row = b["_row"] | ({"status": status} if status == "unjoined" else {})
            out.append(row | {"arrival_s": arrival if arrival is not None else b["_row"].get("arrival_s")})
            continue
        out.append(
            {
                "request_id": f"{b['client_id']}:{b['idx']}",
                "client_id": b["client_id"],
                "client_index": b["idx"],
                "arrival_s": arrival,
                "input_tokens": b["input_tokens"],
                "output_tokens": b["output_tokens"],
                "status": status,
                "error_code": b.get("error_code"),
                "error": b.get("error"),
                "ttft_s": b["ttft_s"],
                "e2e_s": b["e2e_s"],
                "client_start_s": b["client_start_s"],
                "matched_by": None,
            }
        )
    for entry in report["clients"]:
        if placeless.get(entry["client_id"]):
            entry["not_counted"] = placeless[entry["client_id"]]
    events = request_events_of(spans_by_id, out)
    if events:
        (stage / "request_events").mkdir(exist_ok=True)
        pq.write_table(table_from_rows(events, REQUEST_EVENTS), stage / "request_events" / "part-joined.parquet")
        preempted = preempted_times(events)
        for r in out:
            r.update(preempted.get(r["request_id"], {}))
    report["request_events"] = len(events)
    (stage / "requests").mkdir(exist_ok=True)
    for f, _ in others:
        f.unlink()  # its rows are in the joined part now
    table = table_from_rows(out, REQUESTS).sort_by([("arrival_s", "ascending")])
    pq.write_table(table, stage / "requests" / "part-joined.parquet", compression="zstd")
    report["requests"] = len(out)
    report["spans"] = len(spans)
    report["bench_rows"] = len(bench)
    return report

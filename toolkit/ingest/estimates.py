"""Estimates made at ingest, labelled: a client-measured TTFT split into queue and prefill where no engine
source measured them; an engine-measured TTFT less the engine's queue time as prefill where the engine gives both
but no prefill time (SGLang's request log)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from lltrace.arrow_rows import table_from_rows
from lltrace.tables import REQUESTS

SERVER_SPLIT = (
    "estimated: the server's TTFT less the scheduler's queue time (the frontend's tokenization and dispatch "
    "included in prefill)"
)


def estimate_server_prefill(stage: Path) -> int:
    """Prefill where the engine measured its TTFT and queue time but not its prefill (SGLang's request log: the first
    response sent less the scheduler's wait): ``prefill_s_est``, labelled in ``split_basis``; the rows estimated."""
    changed = 0
    for f in sorted((stage / "requests").glob("*.parquet")):
        if not {"server_ttft_s", "queue_s", "prefill_s"} <= set(pq.read_schema(f).names):
            continue
        given = pq.read_table(f, columns=["server_ttft_s", "queue_s"]).columns  # (an arrival trace's millions of
        if any(c.null_count == len(c) for c in given):  # rows are never read as Python rows)
            continue
        rows = pq.read_table(f).to_pylist()
        touched = 0
        for r in rows:
            ttft, queue = r.get("server_ttft_s"), r.get("queue_s")
            if ttft is None or queue is None or r.get("prefill_s") is not None or ttft < queue:
                continue
            r["prefill_s_est"], r["split_basis"] = ttft - queue, SERVER_SPLIT
            touched += 1
        if touched:
            pq.write_table(table_from_rows(rows, REQUESTS), f)
            changed += touched
    return changed


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
            pq.write_table(table_from_rows(rows, REQUESTS), f)
    return {"prefill_tokens_per_s": rate, "steps": n, "requests_split": changed, "basis": basis} if changed else None

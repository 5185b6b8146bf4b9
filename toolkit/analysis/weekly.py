"""``weekly``: the workload-mix report across the runs of a store, by time window.

Every request with an arrival time falls into a window (hour, day or week; by default the one that gives
at least a handful of windows over the span). Per window: traffic, the share of requests whose prefill
outweighs their decode, prompt/output lengths and their drift from the previous window, latency
percentiles where latencies exist, and KV pressure from the engine samples. A request's side of the
crossover comes from its measured attribution where there is one, else from the latency model of the
``--model``/``--gpu`` given (labelled estimated), else it stays unknown.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from lltrace.analysis.classify import label
from lltrace.errors import StoreError
from lltrace.ingest.targets import as_store
from lltrace.physics.estimate import estimate
from lltrace.queries import thresholds
from lltrace.store import Store

WINDOWS = {"hour": 3600, "day": 86400, "week": 7 * 86400}


def _epoch(date: str | None) -> float | None:
    return datetime.fromisoformat(date).timestamp() if date else None


def weekly(
    *,
    store: Store | str | os.PathLike[str] | None = None,
    since: str | None = None,
    until: str | None = None,
    window: str = "auto",
    model: str | None = None,
    gpu: str | None = None,
) -> dict[str, Any]:
    """Per-window workload mix, latency and KV figures (the weekly document)."""
    st = as_store(store)
    if not st.run_ids():
        raise StoreError(f"{st.root}: the store holds no runs")
    if "requests" not in st.present():
        raise StoreError(f"{st.root}: no run in the store has requests")
    con = st.connect()
    try:
        lo, hi = _epoch(since), _epoch(until)
        where = (
            "arrival_s IS NOT NULL"
            + (f" AND arrival_s >= {lo}" if lo else "")
            + (f" AND arrival_s < {hi}" if hi else "")
        )
        t0, t1 = con.execute(f"SELECT min(arrival_s), max(arrival_s) FROM requests WHERE {where}").fetchone()
        if t0 is None:
            raise StoreError(f"{st.root}: no request with an arrival time in the period asked for")
        if window == "auto":
            span = t1 - t0
            window = "week" if span > 28 * 86400 else "day" if span > 4 * 86400 else "hour"
        width = WINDOWS[window]
        lstar_expr = "NULL"
        basis = "measured attribution"
        if model and gpu:
            rates = estimate(model=model, gpu=gpu, input_tokens=1024, output_tokens=128)
            lstar_expr = f"{rates['prefill_tokens_per_s']} * q.output_tokens * {rates['decode_s_per_token']}"
            basis = f"measured attribution, else the latency model of {model} on {gpu} (estimated)"
        rows = con.execute(
            f"""
            WITH r AS (
                SELECT q.run_id, q.request_id, q.arrival_s, q.input_tokens, q.output_tokens, q.e2e_s, q.ttft_s,
                       coalesce(a.dominant_phase,
                                CASE WHEN {lstar_expr} IS NOT NULL AND q.input_tokens IS NOT NULL
                                     THEN CASE WHEN q.input_tokens > {lstar_expr} THEN 'prefill' ELSE 'decode' END
                                END) AS phase,
                       floor(q.arrival_s / {width}) * {width} AS w
                FROM requests_latency q
                LEFT JOIN attribution_request a ON a.run_id = q.run_id AND a.request_id = q.request_id
                WHERE {where.replace("arrival_s", "q.arrival_s")}
            )
            SELECT w, count(*) AS requests, count(DISTINCT run_id) AS runs,
                   count(*) FILTER (WHERE phase = 'prefill') / nullif(count(phase), 0) AS prefill_dominant_share,
                   count(phase) AS classified,
                   quantile_cont(input_tokens, 0.5) AS input_p50, quantile_cont(input_tokens, 0.9) AS input_p90,
                   quantile_cont(output_tokens, 0.5) AS output_p50, quantile_cont(output_tokens, 0.9) AS output_p90,
                   quantile_cont(ttft_s, 0.5) AS ttft_p50, quantile_cont(ttft_s, 0.9) AS ttft_p90,
                   quantile_cont(e2e_s, 0.5) AS e2e_p50, quantile_cont(e2e_s, 0.9) AS e2e_p90
            FROM r GROUP BY w ORDER BY w
            """
        ).fetchall()
        cols = [
            "window_start_s",
            "requests",
            "runs",
            "prefill_dominant_share",
            "classified",
            "input_p50",
            "input_p90",
            "output_p50",
            "output_p90",
            "ttft_p50",
            "ttft_p90",
            "e2e_p50",
            "e2e_p90",
        ]
        windows = [dict(zip(cols, r, strict=True)) for r in rows]
        kv = {}
        for w, peak, pre_max, pre_min, cap in con.execute(
            f"SELECT floor(ts_s / {width}) * {width}, max(kv_usage), max(preemptions_total), "
            f"min(preemptions_total), max(waiting_capacity) FROM engine_stats WHERE ts_s IS NOT NULL GROUP BY 1"
        ).fetchall():
            kv[w] = {
                "peak_kv_usage": peak,
                "preemptions": (pre_max - pre_min) if pre_max is not None else None,
                "peak_waiting_capacity": cap,
            }
    finally:
        con.close()
    prev = None
    drift_named = thresholds()["weekly_drift"]
    for win in windows:
        win |= kv.get(
            win["window_start_s"], {"peak_kv_usage": None, "preemptions": None, "peak_waiting_capacity": None}
        )
        share = win["prefill_dominant_share"]
        win["label"] = None if share is None else label(prefill_share=share, decode_share=1 - share)
        win["changes"] = []
        if prev:
            for k in ("input_p50", "output_p50"):
                if prev[k] and win[k] is not None:
                    drift = win[k] / prev[k] - 1
                    win[f"{k}_drift"] = drift
                    if abs(drift) >= drift_named:
                        win["changes"].append(f"{k.split('_')[0]} length p50 {drift:+.0%}")
            if prev["label"] and win["label"] and prev["label"] != win["label"]:
                win["changes"].append(
                    f"traffic turned {win['label']} (was {prev['label']}): the advice changes with it (engine vs pipe)"
                )
            if (win.get("peak_waiting_capacity") or 0) > 0 and not (prev.get("peak_waiting_capacity") or 0):
                win["changes"].append(
                    "requests started waiting for scheduling capacity (slots, token budget or KV room: the run's "
                    "queue split says which)"
                )
        prev = win
    return {
        "window": window,
        "window_s": width,
        "classification_basis": basis,
        "windows": windows,
        "relative_clock": t0 < 1e9,
    }

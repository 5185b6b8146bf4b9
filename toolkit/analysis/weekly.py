"""``weekly``: the workload-mix report across the runs of a store, by time window.

Every request with an arrival time falls into a window (hour, day or week; by default the one that gives
at least a handful of windows over the span). Per window: traffic and the requests that failed; over the requests
``analyze`` counts (not failed, cancelled, warm-up...), the share of requests whose prefill
outweighs their decode, prompt/output lengths and their drift from the previous window, latency
percentiles where latencies exist, and load, KV pressure and preemptions from the engine samples. A
request's side of the crossover comes from its measured attribution where there is one, else from the
latency model of the ``--model``/``--gpu`` given (labelled estimated), else it stays unknown.

A store that holds only the engine's own metrics (a Prometheus server's export, no request file) gets the
same windows from them (``figures: engine histograms``): requests from the e2e histogram's count, the mix
from the prompt- and generation-token histograms, the latency trend from the latency histograms (labelled
estimates, each with the bounds of the bucket it fell in), the prefill/decode side from the prefill and
decode time sums, and load and KV from the gauges (``engine_windows``, ``engine_histogram_windows``).
"""

from __future__ import annotations

import math
import os
from datetime import datetime
from typing import Any

from lltrace.analysis.classify import label
from lltrace.analysis.engine_windows import engine_windows
from lltrace.analysis.incidents import store_incidents
from lltrace.documents import plain
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
    present = st.present()
    if "requests" not in present and "engine_stats" not in present:
        raise StoreError(f"{st.root}: no run in the store has requests or engine metrics")
    con = st.connect()
    try:
        lo, hi = _epoch(since), _epoch(until)
        period = (f" AND {{t}} >= {lo}" if lo else "") + (f" AND {{t}} < {hi}" if hi else "")
        by_requests = (
            "requests" in present
            and con.execute(
                f"SELECT count(*) FROM requests WHERE arrival_s IS NOT NULL{period.format(t='arrival_s')}"
            ).fetchone()[0]
        )
        if by_requests:
            t0, t1 = con.execute(
                f"SELECT min(arrival_s), max(arrival_s) FROM requests WHERE arrival_s IS NOT NULL"
                f"{period.format(t='arrival_s')}"
            ).fetchone()
        else:
            t0, t1 = con.execute(
                f"SELECT min(ts_s), max(ts_s) FROM engine_stats WHERE ts_s IS NOT NULL{period.format(t='ts_s')}"
            ).fetchone()
        if t0 is None:
            raise StoreError(f"{st.root}: no request with an arrival time (nor engine sample) in the period asked for")
        if window == "auto":
            span = t1 - t0
            window = "week" if span > 28 * 86400 else "day" if span > 4 * 86400 else "hour"
        width = WINDOWS[window]
        if by_requests:
            basis, windows = _request_windows(con, period.format(t="q.arrival_s"), width, model, gpu)
        else:
            basis, windows = "engine histograms (estimated: prefill vs decode time sums)", []
        engine = engine_windows(con, width, lo, hi)
        found = _incidents(store_incidents(con) if by_requests else [], width, lo, hi)
    finally:
        con.close()
    if not by_requests:
        # failed: what the API server refused or failed (4xx and 5xx responses), where its counter was scraped
        windows = [
            w | {"prefill_dominant_share": None, "classified": None, "failed": w["http_failed"]}
            for w in engine.values()
            if w["requests"]
        ]
    else:
        for win in windows:
            win |= {k: v for k, v in engine.get(win["window_start_s"], {}).items() if k in _ENGINE_LOAD}
            for k in _ENGINE_LOAD:
                win.setdefault(k, None)
    for win in windows:
        win["incidents"] = found.get(win["window_start_s"], [])
    _changes(windows)
    doc = {
        "window": window,
        "window_s": width,
        "figures": "requests" if by_requests else "engine histograms",
        "classification_basis": basis,
        "windows": windows,
        "relative_clock": t0 < 1e9,
    }
    return plain(doc, "weekly")


def _incidents(found: list[dict[str, Any]], width: float, lo: float | None, hi: float | None) -> dict[float, list]:
    """The store's incidents (``store_incidents``) by the window of their start, within the period asked for."""
    out: dict[float, list[dict[str, Any]]] = {}
    for i in found:
        if (lo is not None and i["start_s"] < lo) or (hi is not None and i["start_s"] >= hi):
            continue
        out.setdefault(math.floor(i["start_s"] / width) * width, []).append(i)
    return out


def _changes(windows: list[dict[str, Any]]) -> None:
    """Each window's label by the classification rule and what changed from the window before (its ``changes``:
    length drift beyond ``weekly_drift``, the label turning, failures or waiting for capacity starting)."""
    prev = None
    drift_named = thresholds()["weekly_drift"]
    for win in windows:
        share = win["prefill_dominant_share"]
        if share is None:  # the engine's figures alone: which phase the requests' time went to
            share = win.get("prefill_time_share")
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
            if win.get("failed") and not prev.get("failed"):
                win["changes"].append(f"requests started failing: {win['failed']:,} of {win['requests']:,}")
            if (win.get("peak_waiting_capacity") or 0) > 0 and not (prev.get("peak_waiting_capacity") or 0):
                win["changes"].append(
                    "requests started waiting for scheduling capacity (slots, token budget or KV room: the run's "
                    "queue split says which)"
                )
        prev = win


_ENGINE_LOAD = ("peak_kv_usage", "preemptions", "peak_waiting_capacity", "mean_running", "mean_waiting", "queue_share")


def _request_windows(
    con: Any, where: str, width: float, model: str | None, gpu: str | None
) -> tuple[str, list[dict[str, Any]]]:
    """Per window, the figures of the requests that arrived in it: all of them, the failed among them, and the mix,
    crossover side and latencies of those the run's figures count (``requests_latency.counted``, as ``analyze``)."""
    lstar_expr = "NULL"
    basis = "measured attribution"
    if model and gpu:
        rates = estimate(model=model, gpu=gpu, input_tokens=1024, output_tokens=128)
        lstar_expr = f"{rates['prefill_tokens_per_s']} * q.output_tokens * {rates['decode_s_per_token']}"
        basis = f"measured attribution, else the latency model of {model} on {gpu} (estimated)"
    cur = con.execute(
        f"""
        WITH r AS (
            SELECT q.run_id, q.request_id, q.arrival_s, q.input_tokens, q.output_tokens, q.e2e_s, q.ttft_s,
                   q.counted, q.outcome,
                   coalesce(a.dominant_phase,
                            CASE WHEN {lstar_expr} IS NOT NULL AND q.input_tokens IS NOT NULL
                                 THEN CASE WHEN q.input_tokens > {lstar_expr} THEN 'prefill' ELSE 'decode' END
                            END) AS phase,
                   floor(q.arrival_s / {width}) * {width} AS window_start_s
            FROM requests_latency q
            LEFT JOIN attribution_request a ON a.run_id = q.run_id AND a.request_id = q.request_id
            WHERE q.arrival_s IS NOT NULL{where}
        )
        SELECT window_start_s, count(*) AS requests, count(DISTINCT run_id) AS runs,
               count(*) FILTER (WHERE outcome = 'failed') AS failed,
               count(*) FILTER (WHERE counted) AS counted,
               count(*) FILTER (WHERE phase = 'prefill' AND counted)
                   / nullif(count(phase) FILTER (WHERE counted), 0) AS prefill_dominant_share,
               count(phase) FILTER (WHERE counted) AS classified,
               quantile_cont(input_tokens, 0.5) FILTER (WHERE counted) AS input_p50,
               quantile_cont(input_tokens, 0.9) FILTER (WHERE counted) AS input_p90,
               quantile_cont(output_tokens, 0.5) FILTER (WHERE counted) AS output_p50,
               quantile_cont(output_tokens, 0.9) FILTER (WHERE counted) AS output_p90,
               quantile_cont(ttft_s, 0.5) FILTER (WHERE counted) AS ttft_p50,
               quantile_cont(ttft_s, 0.9) FILTER (WHERE counted) AS ttft_p90,
               quantile_cont(e2e_s, 0.5) FILTER (WHERE counted) AS e2e_p50,
               quantile_cont(e2e_s, 0.9) FILTER (WHERE counted) AS e2e_p90
        FROM r GROUP BY window_start_s ORDER BY window_start_s
        """
    )
    cols = [d[0] for d in cur.description]
    return basis, [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

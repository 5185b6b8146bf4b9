"""Replayed against measured: the summaries every replay figure is given by (``summarize``: the ``latency_stats``
macro ``requests_summary`` uses, so the measured means equal ``analyze``'s) and the scores of one against the other
(``scores``: MAPE, or the absolute error under the 1 ms floor)."""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl

from lltrace.queries import install_views, thresholds

METRICS = ("queue_s", "ttft_s", "tpot_s", "e2e_s")
QUANTITIES = ("mean", "p50", "p90")


def summarize(frame: pl.DataFrame) -> dict[str, dict[str, float | None]]:
    """Mean, median and 90th percentile of each metric over a frame of requests (measured or replayed): the
    ``latency_stats`` macro of ``queries/``, the same figures ``requests_summary`` gives."""
    con = duckdb.connect()
    try:
        install_views(con, ["latency_stats"])
        con.register("_frame", frame.select(METRICS).to_arrow())
        stats = con.execute(f"SELECT {', '.join(f'latency_stats({m})' for m in METRICS)} FROM _frame").fetchone()
    finally:
        con.close()
    return {m: {q: s[q] for q in QUANTITIES} for m, s in zip(METRICS, stats, strict=True)}


def mape(pred: float | None, real: float | None) -> float | None:
    # a relative error against a measured value under the floor is noise, not accuracy
    if pred is None or real is None or abs(real) < thresholds()["mape_floor_s"]:
        return None
    return abs(pred - real) / abs(real)


def scores(real_s: dict[str, Any], pred_s: dict[str, Any]) -> dict[str, Any]:
    """Replayed against measured summaries: MAPE (None under the 1 ms floor), absolute errors, how each figure
    is scored, and the flat keys of docs/documents.md (``ttft_mean_mape``, ``queue_median_mape``, ...)."""
    floor = thresholds()["mape_floor_s"]
    out: dict[str, Any] = {
        "replayed": pred_s,
        "measured": real_s,
        "mape": {m: {q: mape(pred_s[m][q], real_s[m][q]) for q in QUANTITIES} for m in METRICS},
        "abs_error_s": {
            m: {
                q: None if pred_s[m][q] is None or real_s[m][q] is None else pred_s[m][q] - real_s[m][q]
                for q in QUANTITIES
            }
            for m in METRICS
        },
    }
    out["scored_by"] = {
        m: {q: "abs_error" if real_s[m][q] is not None and abs(real_s[m][q]) < floor else "mape" for q in QUANTITIES}
        for m in METRICS
    }
    out["abs_within_floor"] = {
        m: {
            q: abs(out["abs_error_s"][m][q]) <= floor
            for q in QUANTITIES
            if out["scored_by"][m][q] == "abs_error" and out["abs_error_s"][m][q] is not None
        }
        for m in METRICS
    }
    for m in METRICS:
        for q, word in (("mean", "mean"), ("p50", "median"), ("p90", "p90")):
            out[f"{m.removesuffix('_s')}_{word}_mape"] = out["mape"][m][q]
    return out

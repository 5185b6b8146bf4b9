"""The engine's own sections of the analysis document: KV-cache pressure and the prefix cache
(``engine_kv_summary``, ``engine_preemptions``, ``engine_prefix_cache``, ``requests_cached_count``), and its
figures window by window over the run (``engine_stats_span``, ``engine_windows``)."""

from __future__ import annotations

from typing import Any

import duckdb

from lltrace.analysis.engine_windows import engine_windows, timeline_width
from lltrace.analysis.sql import clean, rows


def view_row(con: duckdb.DuckDBPyConnection, view: str) -> dict[str, Any] | None:
    """The one row a per-run view gives the run (its run_id left out), or None where it gives none."""
    return (rows(con, f"SELECT * EXCLUDE (run_id) FROM {view}") or [None])[0]


def kv_section(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """KV-cache pressure and the prefix cache (``kv_wait_s`` is the attribution's queue split, filled in beside it);
    None where the run has neither engine samples nor prefix-cache figures."""
    peaks = view_row(con, "engine_kv_summary") or {}
    pre = (con.execute("SELECT preemptions FROM engine_preemptions").fetchone() or (None,))[0]
    cache = view_row(con, "engine_prefix_cache") or {}
    cached = view_row(con, "requests_cached_count") or {}
    if not peaks.get("samples") and not cache:
        return None
    return {
        "peak_usage": peaks.get("peak_usage"),
        "preemptions": clean(pre),
        "peak_waiting": peaks.get("peak_waiting"),
        "peak_waiting_capacity": peaks.get("peak_waiting_capacity"),
        "kv_wait_s": None,
        "prefix_cache_hit_rate": cache.get("hit_rate"),
        "prefix_cache_hit_basis": cache.get("hit_basis"),
        "prefix_cache_hit_tokens": cache.get("hit_tokens"),
        "prefix_cache_queried_tokens": cache.get("queried_tokens"),
        "prefix_cached_share": cache.get("cached_share"),
        "prefix_cached_basis": cache.get("cached_basis"),
        "prefix_cached_requests": cached.get("requests") or None,
        "prefix_cached_requests_basis": cached.get("bases"),
    }


def engine_timeline(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The engine's own figures window by window over the run (``engine_windows``: load, KV, requests and the
    histograms' p50/p90 per window), the width the smallest nice one giving at most 24 windows of two samples
    or more; None without two timed samples."""
    span = view_row(con, "engine_stats_span")
    if not span or not span["span_s"]:
        return None
    width = timeline_width(span["span_s"], span["step_s"])
    windows = engine_windows(con, width)
    return {"width_s": width, "windows": [windows[k] for k in sorted(windows)]}

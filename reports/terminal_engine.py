"""The engine's own figures on the terminal: its latency histograms and the API server's answers, its timeline
window by window (an engine-only run), its replicas side by side, and its histograms' quantile estimates. One
renderer per section, each taking that section's type. It formats; it computes nothing."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from rich.table import Table

from lltrace.documents.analysis import EngineTimeline
from lltrace.documents.rows import EngineHistogramQuantilesRow, EngineLatencyHistogramsRow, EngineReplicasRow
from lltrace.reports.analysis_lines import api_responses_line
from lltrace.reports.console import Text
from lltrace.reports.numbers import count_noun, pct, whole
from lltrace.reports.numbers import ms as _ms


def histogram_lines(hist: EngineLatencyHistogramsRow) -> list[Text]:
    """The engine's own latency histograms over the run, and what its API server answered."""
    out = []
    if hist.e2e_requests:
        out.append(
            Text(
                f"Engine's own latency histograms ({hist.basis}): {count_noun(hist.e2e_requests, 'request')} · mean "
                f"e2e {_ms(hist.e2e_mean_s)} ms · TTFT {_ms(hist.ttft_mean_s)} ms · queue {_ms(hist.queue_mean_s)} ms"
                + (f" · queue {pct(hist.queue_share)} of e2e" if hist.queue_share is not None else "")
            )
        )
    if hist.http_4xx is not None:  # what the API server answered, refusals and failures apart
        out.append(Text(api_responses_line(hist)))
    return out


def timeline_table(timeline: EngineTimeline) -> Table:
    """The engine window by window: load, KV, preemptions and the histograms' p90s with their buckets."""
    t = Table(
        title=f"The engine window by window ({timeline.width_s:g} s; p90s are histogram estimates, "
        "\\[bucket] their precision)"
    )
    relative = (timeline.windows[0].window_start_s or 0) <= 1e9  # a clock of its own: no date to say
    for col in (
        "window (from its start)" if relative else "window (UTC)",
        "requests",
        "running",
        "waiting",
        "peak KV",
        "preempted",
        "TTFT p90 s",
        "queue p90 s",
        "e2e p90 s",
    ):
        t.add_column(col, justify="left" if col.startswith("window") else "right")
    for w in timeline.windows:
        t.add_row(
            utc(w.window_start_s),
            whole(w.requests),
            "-" if w.mean_running is None else f"{w.mean_running:,.1f}",
            "-" if w.mean_waiting is None else f"{w.mean_waiting:,.1f}",
            pct(w.peak_kv_usage),
            whole(w.preemptions),
            p90_cell(w.ttft_p90, w.ttft_p90_bucket),
            p90_cell(w.queue_p90, w.queue_p90_bucket),
            p90_cell(w.e2e_p90, w.e2e_p90_bucket),
        )
    return t


def replicas_table(replicas: list[EngineReplicasRow]) -> Table:
    """Each replica of a fleet side by side, and their sums."""
    t = Table(title=f"Replicas: {len(replicas)} (the engine's own gauges and counters)")
    for col in (
        "replica",
        "samples",
        "peak running",
        "mean running",
        "peak waiting",
        "peak KV",
        "preempted",
        "requests",
        "mean e2e ms",
    ):
        t.add_column(col, justify="left" if col == "replica" else "right")
    for r in replicas:
        t.add_row(
            r.engine,
            whole(r.samples),
            whole(r.peak_running),
            "-" if r.mean_running is None else f"{r.mean_running:,.1f}",
            whole(r.peak_waiting),
            pct(r.peak_kv_usage),
            whole(r.preemptions),
            whole(r.requests),
            _ms(r.e2e_mean_s),
        )
    t.add_row(
        "all",
        whole(sum(r.samples or 0 for r in replicas)),
        "",
        f"{sum(r.mean_running or 0 for r in replicas):,.1f}",
        "",
        "",
        whole(sum(r.preemptions or 0 for r in replicas)),
        whole(sum(r.requests or 0 for r in replicas)),
        "",
    )
    return t


def _fig(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _estimate(value: float | None, lo: float | None, hi: float | None, scale: float) -> str:
    if hi is not None and value == hi:  # the estimate is its bucket's upper edge, or the mean's bound on it
        return f"≤ {_fig(hi * scale)}"
    return f"{_fig((value or 0) * scale)} [{_fig((lo or 0) * scale)}-{'inf' if hi is None else _fig(hi * scale)}]"


def quantiles_table(quantiles: list[EngineHistogramQuantilesRow]) -> Table:
    """The engine's histograms' quantile estimates, each with the bucket holding it (its precision)."""
    t = Table(
        title="Engine's own histograms: quantile estimates (the bucket holding each is its precision; "
        "≤: at most this: the bucket's upper edge, or the bound its mean sets)"
    )
    for col in ("metric", "observations", "p50", "p90", "p99", "unit"):
        t.add_column(col, justify="left" if col in ("metric", "unit") else "right")
    for q in quantiles:
        tokens = str(q.metric).endswith("_tokens")
        scale = 1.0 if tokens else 1e3
        t.add_row(
            q.metric,
            whole(q.observations),
            _estimate(q.p50, q.p50_lo, q.p50_hi, scale),
            _estimate(q.p90, q.p90_lo, q.p90_hi, scale),
            _estimate(q.p99, q.p99_lo, q.p99_hi, scale),
            "tokens" if tokens else "ms",
        )
    return t


def utc(t: float | None) -> str:
    """A window's start as a UTC time (an offset for a relative clock)."""
    t = t or 0.0
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%m-%d %H:%M:%S") if t > 1e9 else f"+{t:,.0f} s"


def p90_cell(v: float | None, bucket: list[Any] | None) -> Text:
    """A window's histogram p90 with the bucket it fell in (plain text: brackets are not markup)."""
    if v is None:
        return Text("-")
    if bucket is not None and bucket[1] is not None and v == bucket[1]:  # the bucket's upper edge, or the mean's
        return Text(f"≤ {v:.3g}")
    hi = "inf" if bucket is None or bucket[1] is None else f"{bucket[1]:g}"
    return Text(f"{v:,.2f} [{'' if bucket is None else f'{bucket[0]:g}'}-{hi}]")

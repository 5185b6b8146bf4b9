"""Incidents: when a run went wrong, to whom, and why (docs/incidents.md).

1. **When.** The run's counted requests are cut into windows by arrival, each wide enough to hold about
   ``incident_window_requests`` requests at the run's mean arrival rate (rounded up to a round width). Per metric
   (TTFT, TPOT, e2e, queue) the typical level is the median over the judged windows (those holding at least a
   quarter of that count) of the window's p90, its spread their median absolute deviation. A window is degraded
   for a metric when its p90 exceeds the threshold: ``incident_factor`` times the typical level and the typical
   level plus ``incident_robust_z`` robust standard deviations (1.4826 x the deviation), both; or the objective the
   user set (``--slo``), or ``incident_factor`` times a baseline run's level (``--baseline``). Consecutive degraded
   judged windows are one incident, unless they start with the run's first judged window (its warm-up: no level
   before it to depart from). A run with more than ``incident_throughout_share`` of its judged windows
   degraded was degraded throughout: it gets the whole-run verdict and no incident.
2. **To whom.** The incident's requests over the threshold, by client and size class.
3. **What the engine was doing.** Its steps, scheduling state and samples inside the incident against outside it
   (``incident_engine``), and the decode-only step time at the same batch size inside over outside: the engine's
   own speed, whatever the load.
4. **Why.** The trigger is what changed at the start: a client (or a size class) with no requests before it, else
   the larger of the arrival-rate change and the engine's slowdown at equal composition, with its figure. The
   mechanism is the queue split, interference and preemption of the incident's requests; the causes are the
   triggering client's requests there (prompt tokens, the step time their prefills added, the slot-seconds held).
5. **What to change**: ``incident_advice``.
"""

from __future__ import annotations

import math
import re
from statistics import median
from typing import Any

import duckdb

from lltrace.analysis.incident_explain import METRICS, affected, explain, screen, screen_many, verdict
from lltrace.analysis.sql import rows
from lltrace.errors import AnalysisError
from lltrace.queries import thresholds

JUDGED = ("ttft", "tpot", "e2e")
"""The metrics a window is judged by: what the users saw. The engine's queue time is part of TTFT; it is judged only
where a run has no TTFT (its typical level is often a fraction of one step, which a single step's wait doubles)."""
ROUND_WIDTHS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
"""The widths a window may have, seconds: the first at or above what the arrival rate asks for."""
ENGINE_KEYS = ("step_time_mean_s", "prompt_tokens_per_step", "running_mean", "waiting_mean", "kv_peak")
MAD_SIGMA = 1.4826
"""A normal distribution's standard deviation over its median absolute deviation."""


SLO_UNITS = {"ms": 1e-3, "s": 1.0, "us": 1e-6}


def parse_slo(text: str) -> dict[str, float]:
    """``--slo ttft_p90=500ms,e2e_p90=10s`` as seconds by metric (a number without a unit is seconds); a key or value
    it cannot read is an ``AnalysisError`` naming it."""
    out: dict[str, float] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        key, _, value = item.partition("=")
        metric, _, stat = key.strip().partition("_")
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*(ms|s|us)?\s*", value)
        if metric not in METRICS or stat != "p90" or m is None:
            raise AnalysisError(
                f"--slo {item!r}: expected METRIC_p90=VALUE[ms|s] with METRIC one of {', '.join(METRICS)} "
                "(the window statistic judged is the p90), e.g. ttft_p90=500ms"
            )
        out[metric] = float(m.group(1)) * SLO_UNITS[m.group(2) or "s"]
    return out


def typical_levels(con: duckdb.DuckDBPyConnection) -> dict[str, float]:
    """A run's typical level of each metric (the median of its judged windows' p90): what ``--baseline`` compares
    another run's windows with."""
    tl = timeline(con)
    if tl is None:
        return {}
    return {x["metric"]: x["typical"] for x in tl["levels"] if x["typical"] is not None}


def window_width(con: duckdb.DuckDBPyConnection) -> float | None:
    """The window width for this run: the round width holding ``incident_window_requests`` arrivals at its mean
    rate (None: fewer than two arrivals or no span)."""
    n, span = con.execute("SELECT count(*), max(t_s) - min(t_s) FROM incident_arrivals").fetchone()
    if not n or n < 2 or not span:
        return None
    want = thresholds()["incident_window_requests"] * span / n
    return float(next((w for w in ROUND_WIDTHS if w >= want), ROUND_WIDTHS[-1]))


def levels(
    windows: list[dict[str, Any]], judged_min: int, slo: dict[str, float] | None, baseline: dict[str, float] | None
) -> list[dict[str, Any]]:
    """Each metric's typical level (median of the judged windows' p90), spread and threshold."""
    t = thresholds()
    out = []
    has_ttft = any(w["ttft_p90_s"] is not None for w in windows)
    for m in METRICS:
        if m not in JUDGED and has_ttft:
            out.append(
                {
                    "metric": m,
                    "statistic": "p90",
                    "typical": None,
                    "spread": None,
                    "threshold": None,
                    "threshold_from": "run",
                    "rule": "not judged: part of TTFT, which the run has",
                }
            )
            continue
        values = [w[f"{m}_p90_s"] for w in windows if w["requests"] >= judged_min and w[f"{m}_p90_s"] is not None]
        typical = median(values) if values else None
        spread = median(abs(v - typical) for v in values) if typical is not None else None
        if slo and m in slo:
            threshold, src, rule = slo[m], "slo", f"the objective {m}_p90 = {slo[m]:g} s"
        elif baseline and baseline.get(m) is not None:
            threshold, src = t["incident_factor"] * baseline[m], "baseline"
            rule = f"{t['incident_factor']:g} x the baseline run's typical {m} p90 ({baseline[m]:.4g} s)"
        elif typical is not None and len(values) >= 3:
            threshold = max(t["incident_factor"] * typical, typical + t["incident_robust_z"] * MAD_SIGMA * spread)
            src = "run"
            rule = (
                f"the larger of {t['incident_factor']:g} x the typical level and the typical level + "
                f"{t['incident_robust_z']:g} robust standard deviations (1.4826 x the median absolute deviation)"
            )
        else:
            threshold, src, rule = None, "run", "fewer than three judged windows: no threshold"
        out.append(
            {
                "metric": m,
                "statistic": "p90",
                "typical": typical,
                "spread": spread,
                "threshold": threshold,
                "threshold_from": src,
                "rule": rule,
            }
        )
    return out


def timeline(
    con: duckdb.DuckDBPyConnection, slo: dict[str, float] | None = None, baseline: dict[str, float] | None = None
) -> dict[str, Any] | None:
    """The run's windows of arrival, each metric's level and threshold, and which windows were degraded (None: a
    run without two timed arrivals)."""
    width = window_width(con)
    if width is None:
        return None
    windows = rows(
        con, f"SELECT * EXCLUDE (run_id, window_index) FROM incident_windows({width!r}) ORDER BY window_index"
    )
    origin = con.execute("SELECT min(arrival_s) FROM incident_arrivals").fetchone()[0]
    engine = {
        r.pop("window_index"): r
        for r in rows(con, f"SELECT * EXCLUDE (run_id) FROM incident_engine_windows({width!r}, {origin!r})")
    }
    for w in windows:
        extra = engine.get(round(w["start_s"] / width)) or {}
        w.update({k: extra.get(k) for k in ENGINE_KEYS})
        w["arrivals"] = dict(extra.get("arrivals") or {})
    return judge(windows, width, slo, baseline)


def judge(
    windows: list[dict[str, Any]],
    width: float,
    slo: dict[str, float] | None = None,
    baseline: dict[str, float] | None = None,
) -> dict[str, Any]:
    """A run's timeline from its windows (in time order, each with its requests and metrics' p90): each metric's
    level and threshold, each window's degraded metrics, and whether the run was degraded throughout."""
    judged_min = math.ceil(thresholds()["incident_window_requests"] / 4)
    lv = levels(windows, judged_min, slo, baseline)
    for w in windows:
        w["degraded"] = [
            x["metric"]
            for x in lv
            if w["requests"] >= judged_min
            and x["threshold"] is not None
            and (v := w[f"{x['metric']}_p90_s"]) is not None
            and v > x["threshold"]
        ]
    judged = [w for w in windows if w["requests"] >= judged_min]
    bad = sum(1 for w in judged if w["degraded"])
    throughout = bool(judged) and bad > thresholds()["incident_throughout_share"] * len(judged)
    return {
        "width_s": width,
        "judged_min_requests": judged_min,
        "levels": lv,
        "windows": windows,
        "degraded_throughout": throughout,
        "set_aside": [],
        "by": "arrival",
    }


def candidates(tl: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The degraded stretches of a judged timeline that may be incidents: none for a run degraded throughout; the
    others but one from the run's first judged window (its warm-up)."""
    if tl["degraded_throughout"]:
        return []
    judged = [w for w in tl["windows"] if w["requests"] >= tl["judged_min_requests"]]
    return [g for g in spans(tl) if g[0] is not judged[0]]


def store_incidents(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """The incidents of every run of ``con`` (any number of runs), screened as ``incidents_section`` screens them
    (the same windows, levels, set-aside rules and trigger), without their attribution: the weekly report's list.
    Each: run, start and end on the run clock, metric, typical and worst p90, requests over, trigger, and the
    sentence without the mechanism (``lltrace analyze`` of the run adds it)."""
    by_run: dict[str, list[dict[str, Any]]] = {}
    for r in rows(con, "SELECT * FROM incident_windows_runs($1)", [list(map(float, ROUND_WIDTHS))]):
        by_run.setdefault(r["run_id"], []).append(r)
    stretches = []
    for run, ws in by_run.items():
        tl = judge(ws, ws[0]["width_s"])
        stretches += [(run, tl, group) for group in candidates(tl)]
    out = []
    for s in screen_many(con, stretches):
        if s["trigger"]["kind"] == "other" or not s["over_before"]:
            continue
        entry = {
            "start_s": s["start"],
            "end_s": s["end"],
            "metric": s["metric"],
            "typical": s["level"]["typical"],
            "threshold": s["level"]["threshold"],
            "worst": s["worst"],
            "requests": len(s["inside"]),
            "requests_over": len(s["over"]),
            "affected": affected(s["inside"], s["over"]),
            "trigger": s["trigger"],
        }
        origin = s["ctx"]["origin"]
        out.append(
            {
                "run": s["run"],
                "start_s": origin + s["start"],
                "end_s": origin + s["end"],
                "metric": s["metric"],
                "typical": entry["typical"],
                "worst": s["worst"],
                "requests_over": entry["requests_over"],
                "trigger": s["trigger"]["kind"],
                "verdict": verdict(entry),
            }
        )
    return out


def spans(tl: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Consecutive degraded judged windows, grouped (windows too small to judge between two degraded ones join
    them; they do not start or end one)."""
    groups: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for w in tl["windows"]:
        if w["requests"] < tl["judged_min_requests"]:
            pending.append(w)
            continue
        if w["degraded"]:
            current += pending + [w] if current else [w]
        elif current:
            groups.append(current)
            current = []
        pending = []
    if current:
        groups.append(current)
    return groups


def incidents_section(
    con: duckdb.DuckDBPyConnection,
    engine: str | None,
    slo: dict[str, float] | None = None,
    baseline: dict[str, float] | None = None,
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The run's timeline of arrival windows and its incidents, worst first (none for a run degraded throughout or
    a steady one)."""
    tl = timeline(con, slo, baseline)
    if tl is None:
        return None, []
    if tl["degraded_throughout"]:
        return tl, []
    judged = [w for w in tl["windows"] if w["requests"] >= tl["judged_min_requests"]]
    found, aside = [], []
    for group in spans(tl):
        if group[0] is judged[0]:
            # a departure needs a level to depart from: a stretch degraded from the run's first judged window on
            # holds the server's warm-up (compilation, cold caches) as much as any incident, and has no "before"
            aside.append(set_aside_entry(tl, group, "the run's first window: its warm-up, with no level before it"))
            continue
        first = screen(con, tl, group)
        if first["trigger"]["kind"] == "other":
            why = f"no change at its start: {first['trigger']['why']} (the load's own variance, which the whole-run "
            aside.append(set_aside_entry(tl, group, why + "verdict answers)"))
        elif not first["over_before"]:
            why = "only requests of traffic new to the run went over: a new workload, slow on its own (its figures "
            aside.append(set_aside_entry(tl, group, why + "are in the by-client table)"))
        else:
            found.append(explain(con, tl, group, first, engine))
    tl["set_aside"] = aside
    found.sort(key=lambda i: -(i["worst"] / i["threshold"]))
    return tl, found


def set_aside_entry(tl: dict[str, Any], group: list[dict[str, Any]], why: str) -> dict[str, Any]:
    """A degraded stretch that is not an incident, and why."""
    metrics = [m for m in METRICS if any(m in w["degraded"] for w in group)]
    return {
        "start_s": group[0]["start_s"],
        "end_s": group[-1]["start_s"] + tl["width_s"],
        "metrics": metrics,
        "why": why,
    }

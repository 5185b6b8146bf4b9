"""Incidents from the engine's metrics alone (a Prometheus export, scrapes): the same rules as
``lltrace.analysis.incidents`` on the engine's own histograms, window by window at the scrape's resolution
(docs/incidents.md).

A histogram counts a request when it finishes, so these windows are by finish, not arrival, and their p90s are
estimates inside the bucket that holds them (``engine_histogram_windows``). The window is the round width holding
``incident_window_requests`` requests at the run's mean rate, and at least the scrapes' interval. No request is
seen alone: an incident says how many requests finished in it, not how many went over, and names no client. The
trigger is a rise of prompt tokens per request (the counters) by ``incident_factor``, else a jump in requests
finished per second beyond its Poisson noise, else the median TPOT up by ``incident_factor`` with neither (the engine
slower at the same load); the mechanism is the queue's share of the summed e2e (the
histograms' sums) and the preemptions; the engine figures are its gauges'.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb

from lltrace.analysis.incident_explain import incident_entry, stretch, verdict
from lltrace.analysis.incidents import ROUND_WIDTHS, candidates, judge, set_aside_entry
from lltrace.analysis.sql import rows
from lltrace.queries import thresholds

METRIC_OF = {"ttft": "ttft", "tpot": "tpot", "e2e": "e2e", "queue_time": "queue"}


def metrics_timeline(
    con: duckdb.DuckDBPyConnection, slo: dict[str, float] | None, baseline: dict[str, float] | None
) -> tuple[dict[str, Any], float] | None:
    """The timeline of a run known from its engine's histograms (and its clock origin, the first window's start);
    None where they count fewer than two requests or the samples span no time."""
    n, t0, t1, step = con.execute(
        """SELECT (SELECT sum(observations) FROM engine_histogram_windows(NULL, true, NULL, NULL) WHERE metric = 'e2e'),
                  min(ts_s), max(ts_s),
                  (SELECT median(d) FROM (SELECT ts_s - lag(ts_s) OVER (ORDER BY ts_s) AS d
                                          FROM (SELECT DISTINCT ts_s FROM engine_stats WHERE ts_s IS NOT NULL)))
           FROM engine_stats WHERE ts_s IS NOT NULL"""
    ).fetchone()
    if not n or n < 2 or t0 is None or t1 <= t0:
        return None
    want = max(thresholds()["incident_window_requests"] * (t1 - t0) / n, step or 0.0)
    width = float(next((w for w in ROUND_WIDTHS if w >= want), ROUND_WIDTHS[-1]))
    found = rows(
        con,
        "SELECT window_start_s, metric, observations, p50, p90 FROM engine_histogram_windows($1, true, NULL, NULL) "
        "WHERE metric IN ('ttft', 'tpot', 'e2e', 'queue_time') ORDER BY window_start_s",
        [width],
    )
    if not found:
        return None
    origin = found[0]["window_start_s"]
    engine = {
        r["window_start_s"]: r
        for r in rows(con, "SELECT * FROM engine_windows_summed($1::DOUBLE, NULL, NULL, NULL)", [width])
    }
    windows: dict[float, dict[str, Any]] = {}
    for r in found:
        w = windows.setdefault(
            r["window_start_s"], _window(r["window_start_s"] - origin, engine.get(r["window_start_s"]))
        )
        m = METRIC_OF[r["metric"]]
        w[f"{m}_p50_s"], w[f"{m}_p90_s"] = r["p50"], r["p90"]
        if m == "e2e":
            w["requests"] = int(r["observations"] or 0)
    tl = judge(list(windows.values()), width, slo, baseline)
    tl["by"] = "finish"
    return tl, origin


def _window(start: float, eng: dict[str, Any] | None) -> dict[str, Any]:
    e = eng or {}
    return {
        "start_s": start,
        "requests": 0,
        **{f"{m}_{q}_s": None for m in ("ttft", "tpot", "e2e", "queue") for q in ("p50", "p90")},
        "step_time_mean_s": None,
        "prompt_tokens_per_step": None,
        "running_mean": e.get("mean_running"),
        "waiting_mean": e.get("mean_waiting"),
        "kv_peak": e.get("peak_kv_usage"),
        "arrivals": {},
        "_prompt_tokens": e.get("prompt_tokens"),
        "_queue_sum_s": e.get("queue_sum_s"),
        "_e2e_sum_s": e.get("e2e_sum_s"),
        "_preemptions": e.get("preemptions"),
    }


def metrics_incidents(
    con: duckdb.DuckDBPyConnection,
    slo: dict[str, float] | None = None,
    baseline: dict[str, float] | None = None,
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The timeline and incidents of a run known only from its engine's metrics (see the module's docstring)."""
    got = metrics_timeline(con, slo, baseline)
    if got is None:
        return None, []
    tl, origin = got
    found, aside = [], []
    for group in candidates(tl):
        inc = _incident(tl, group, origin)
        if inc["trigger"]["kind"] == "other":
            aside.append(set_aside_entry(tl, group, f"no change at its start: {inc['trigger']['why']}"))
        else:
            found.append(inc)
    for w in tl["windows"]:
        for k in [k for k in w if k.startswith("_")]:
            del w[k]
    tl["set_aside"] = aside
    found.sort(key=lambda i: -(i["worst"] / i["threshold"]))
    return tl, found


def _sum(ws: list[dict[str, Any]], key: str) -> float | None:
    values = [w[key] for w in ws if w.get(key) is not None]
    return float(sum(values)) if values else None


def _incident(tl: dict[str, Any], group: list[dict[str, Any]], origin: float) -> dict[str, Any]:
    st = stretch(tl, group)
    start, end, width = st["start"], st["end"], st["width"]
    inside = [w for w in tl["windows"] if start <= w["start_s"] < end]
    outside = [w for w in tl["windows"] if not start <= w["start_s"] < end]
    e2e, queue = _sum(inside, "_e2e_sum_s"), _sum(inside, "_queue_sum_s")
    mechanism = {
        "requests": sum(w["requests"] for w in inside),
        "e2e_s": e2e or 0.0,
        "queue_s": queue,
        **dict.fromkeys(("slot_wait_s", "budget_wait_s", "kv_wait_s", "load_s", "interference_s", "preempted_s")),
        "preemptions": int(p) if (p := _sum(inside, "_preemptions")) is not None else None,
        "shares": {"queue": queue / e2e if queue is not None and e2e else None},
        "dominant": "queue" if queue and e2e and queue / e2e >= thresholds()["queue_part_share_for_advice"] else None,
    }
    doc = incident_entry(
        st,
        origin,
        len(group),
        requests=mechanism["requests"],
        requests_over=None,
        requests_over_before=None,
        affected=[],
        engine=None,
        trigger=_trigger(inside, outside, start, end, width),
        mechanism=mechanism,
        caused_by=[],
    )
    doc["advice"] = _advice(doc)
    doc["verdict"] = verdict(doc)
    return doc


# what to change by trigger, with the engine setting: the same items as a request-level incident's whole-run ones
_ACTIONS = {
    "new_requests": (
        "interference",
        "long_prefill_token_threshold",
        "Keep the long prompts from the rest: a pool of their own, or a per-request prompt-chunk cap "
        "(long_prefill_token_threshold) so that they stop filling the steps; the engine's metrics name no client",
    ),
    "arrival_rate": (
        "queue",
        None,
        "Admission control or more replicas: more requests arrived than the engine serves at its level",
    ),
    "engine_slowdown": (
        "host",
        None,
        "Find what slowed the engine at the same load: other work on the host, CPU or GPU throttling, a noisy "
        "neighbour",
    ),
}


def _advice(i: dict[str, Any]) -> list[dict[str, Any]]:
    """One item against the trigger, its gain the incident's metric back to its typical level (an estimate from
    the histograms: the windows' p90s, each within its bucket)."""
    if i["trigger"]["kind"] not in _ACTIONS or i["typical"] is None or i["typical"] >= i["worst"]:
        return []
    bottleneck, setting, action = _ACTIONS[i["trigger"]["kind"]]
    return [
        {
            "bottleneck": bottleneck,
            "setting": setting,
            "engine_setting": setting,
            "action": action,
            "expected_gain": {
                "metric": f"{i['metric']} p90 per window",
                "from": i["worst"],
                "to": i["typical"],
                "unit": "s",
            },
            "formula": "the incident's worst window p90 -> the run's typical p90 (the engine's histograms)",
            "basis": "estimated",
        }
    ]


def _ratio(inside: list[dict[str, Any]], outside: list[dict[str, Any]], key: str) -> float | None:
    """The median over the inside windows of ``key`` over the median over the outside ones."""
    a = sorted(w[key] for w in inside if w.get(key) is not None)
    b = sorted(w[key] for w in outside if w.get(key) is not None)
    if not a or not b or not b[len(b) // 2]:
        return None
    return a[len(a) // 2] / b[len(b) // 2]


def _trigger(
    inside: list[dict[str, Any]], outside: list[dict[str, Any]], start: float, end: float, width: float
) -> dict[str, Any]:
    """Longer prompts (prompt tokens per request up by ``incident_factor``), else a jump in requests finished per
    second beyond its Poisson noise, else the engine slower at the same load (the median TPOT up by
    ``incident_factor``); else ``other``."""
    t = thresholds()
    n_in, n_out = sum(w["requests"] for w in inside), sum(w["requests"] for w in outside)
    rate_in = n_in / (end - start)
    rate_out = n_out / (len(outside) * width) if outside else None
    tokens_in, tokens_out = _sum(inside, "_prompt_tokens"), _sum(outside, "_prompt_tokens")
    per_in = tokens_in / n_in if tokens_in is not None and n_in else None
    per_out = tokens_out / n_out if tokens_out is not None and n_out else None
    base = dict.fromkeys(("client", "requests", "first_arrival_s", "size_class", "prompt_tokens_p50")) | {
        "prompt_tokens_p50_before": None,
        "arrival_rate": rate_in,
        "arrival_rate_before": rate_out,
        "step_time_ratio": None,
    }
    if per_in and per_out and per_in / per_out >= t["incident_factor"]:
        why = (
            f"prompt tokens per request rose to {per_in:,.0f} from {per_out:,.0f} outside it (engine counters): "
            "longer prompts than the run had"
        )
        return base | {"kind": "new_requests", "why": why}
    expected = rate_out * (end - start) if rate_out else None
    if expected and (n_in - expected) / math.sqrt(expected) >= t["incident_rate_z"]:
        why = f"requests finished per second rose to {rate_in:.3g} from {rate_out:.3g} outside it (engine counters)"
        return base | {"kind": "arrival_rate", "why": why}
    # the engine slower at the same load: with neither the rate nor the prompts changed (above), the median TPOT up by
    # incident_factor (requests running rise with it: each is held longer, Little's law, so they are no measure)
    tpot = _ratio(inside, outside, "tpot_p50_s")
    if tpot and tpot >= t["incident_factor"]:
        why = (
            f"the engine slowed: median TPOT {tpot:.2g}x outside it at the same rate of requests and prompt lengths "
            "(the engine's histograms and counters)"
        )
        return base | {"kind": "engine_slowdown", "step_time_ratio": None, "why": why}
    said = f"{rate_in:.3g} requests finished per second against {rate_out or 0:.3g} outside"
    if per_in and per_out:
        said += f", prompt tokens per request {per_in:,.0f} against {per_out:,.0f}"
    return base | {"kind": "other", "why": f"no rate jump or longer prompts in the engine's counters ({said})"}

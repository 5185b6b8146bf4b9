"""One incident explained (docs/incidents.md): who it reached, what the engine did inside it against outside, what
changed at its start (the trigger), where its requests' time went (the mechanism), who caused it, what to change,
and the sentence that says it. ``lltrace.analysis.incidents`` finds the stretches; this reads each of them.

What the rules read of the rest of the run is aggregated in SQL (``_context``): a million requests stay in DuckDB;
only the incident's own requests and the window before it come to Python.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from statistics import median
from typing import Any, get_args

import duckdb

from lltrace.analysis.incident_advice import incident_advice
from lltrace.analysis.sql import rows
from lltrace.documents.incidents import Metric
from lltrace.queries import thresholds

METRICS: tuple[str, ...] = get_args(Metric)
"""The metrics a window's p90 is read for, in the order the document lists them."""
UNIX_2000 = 946_684_800.0
"""A run clock reading past 2000-01-01 in Unix seconds is an absolute (UTC) clock."""


def utc(origin: float | None, t: float) -> str | None:
    if origin is None or origin < UNIX_2000:
        return None
    return datetime.fromtimestamp(origin + t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


SCREENED = "t_s, client_id, size_class, input_tokens, ttft_s, tpot_s, e2e_s, queue_s"
"""The columns of ``incident_arrivals`` a screen reads of the requests around a stretch (a weekly report fetches
them for every stretch of every run)."""


def stretch(tl: dict[str, Any], group: list[dict[str, Any]]) -> dict[str, Any]:
    """A degraded stretch's bounds, its degraded metrics, and the one that went furthest over its threshold."""
    width = tl["width_s"]
    by_metric = {x["metric"]: x for x in tl["levels"]}
    degraded = [m for m in METRICS if any(m in w["degraded"] for w in group)]

    def excess(m: str) -> float:
        return max(w[f"{m}_p90_s"] or 0.0 for w in group) / by_metric[m]["threshold"]

    metric = max(degraded, key=excess)
    return {
        "worst": max(w[f"{metric}_p90_s"] or 0.0 for w in group),
        "start": group[0]["start_s"],
        "end": group[-1]["start_s"] + width,
        "width": width,
        "metric": metric,
        "level": by_metric[metric],
        "degraded": degraded,
    }


def incident_entry(st: dict[str, Any], origin: float | None, windows: int, **parts: Any) -> dict[str, Any]:
    """An incident's document entry from its stretch (``stretch``): when, the metric and its levels, then ``parts``
    (requests, requests_over, requests_over_before, affected, engine, trigger, mechanism, caused_by) as the
    source of the windows gives them; the callers add the advice and the sentence."""
    level = st["level"]
    return {
        "start_s": st["start"],
        "end_s": st["end"],
        "start_utc": utc(origin, st["start"]),
        "end_utc": utc(origin, st["end"]),
        "windows": windows,
        "metric": st["metric"],
        "statistic": "p90",
        "typical": level["typical"],
        "worst": st["worst"],
        "threshold": level["threshold"],
        "threshold_from": level["threshold_from"],
        "metrics": st["degraded"],
    } | parts


def _decide(st: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
    """The screen's verdict on a stretch from its context: its requests and those over, the trigger, and how many of
    those over belong to traffic the run had before it."""
    inside = [r for r in ctx["fresh"] if r["t_s"] >= st["start"]]
    over = [r for r in inside if (r[f"{st['metric']}_s"] or 0.0) > st["level"]["threshold"]]
    return st | {
        "ctx": ctx,
        "inside": inside,
        "over": over,
        "over_before": sum(1 for r in over if _key(r["client_id"]) in ctx["early_clients"]),
        "trigger": _trigger(ctx, inside, st["start"], st["end"]),
    }


def screen(con: duckdb.DuckDBPyConnection, tl: dict[str, Any], group: list[dict[str, Any]]) -> dict[str, Any]:
    """What decides whether a degraded stretch of the connection's one run is an incident, from the requests'
    arrivals and latencies alone (no attribution): its metric and threshold, its requests and those over, what
    changed at its start (the trigger), and how many of those over belong to traffic the run had before it."""
    st = stretch(tl, group)
    ctx = _context(con, st["start"], st["end"], st["width"])
    origin = ctx["origin"]
    ratio = con.execute(
        "SELECT step_time_ratio FROM incident_step_speed($1, $2)", [origin + st["start"], origin + st["end"]]
    ).fetchone()
    ctx["step_time_ratio"] = ratio[0] if ratio else None
    return _decide(st, ctx)


def screen_many(
    con: duckdb.DuckDBPyConnection, stretches: list[tuple[str, dict[str, Any], list[dict[str, Any]]]]
) -> list[dict[str, Any]]:
    """``screen`` of many runs' stretches (``(run_id, timeline, group)``) over one connection holding them all, in
    three queries whatever their number (the weekly report's): each one's context aggregated in one pass, the
    requests around all of them in one fetch, and the step speed only where a run has engine steps."""
    if not stretches:
        return []
    sts = [stretch(tl, group) | {"run": run} for run, tl, group in stretches]
    cand = [(k, s["run"], s["start"], s["end"], s["width"]) for k, s in enumerate(sts)]
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _incident_cand (cid INTEGER, run_id VARCHAR, start_s DOUBLE, "
        "end_s DOUBLE, width_s DOUBLE)"
    )
    con.executemany("INSERT INTO _incident_cand VALUES (?, ?, ?, ?, ?)", cand)
    agg = {
        r[0]: r[1:]
        for r in con.execute(
            f"""SELECT c.cid, count(*) FILTER (WHERE a.t_s < c.start_s), count(*) FILTER (WHERE a.t_s >= c.end_s),
                       max(a.t_s), count(*), median(a.input_tokens) FILTER (WHERE a.t_s < c.start_s),
                       list(DISTINCT coalesce(a.client_id, '{NO_CLIENT}')) FILTER (WHERE a.t_s < c.start_s - c.width_s),
                       list(DISTINCT a.size_class) FILTER (WHERE a.t_s < c.start_s - c.width_s
                                                           AND a.size_class IS NOT NULL),
                       min(a.arrival_s)
                FROM _incident_cand c JOIN incident_arrivals a USING (run_id) GROUP BY c.cid"""
        ).fetchall()
    }
    fresh: dict[int, list[dict[str, Any]]] = {}
    for r in rows(
        con,
        f"SELECT c.cid AS _cid, {SCREENED.replace('t_s', 'a.t_s', 1)} FROM _incident_cand c "
        "JOIN incident_arrivals a ON a.run_id = c.run_id "
        "AND a.t_s >= c.start_s - c.width_s AND a.t_s < c.end_s ORDER BY c.cid, a.t_s",
    ):
        fresh.setdefault(r.pop("_cid"), []).append(r)
    stepped = {r[0] for r in con.execute("SELECT DISTINCT run_id FROM engine_steps").fetchall()}
    out = []
    for k, st in enumerate(sts):
        ctx = _ctx(fresh.get(k, []), agg[k], st["start"], st["end"], st["width"])
        ctx["step_time_ratio"] = None
        if st["run"] in stepped:
            ratio = con.execute(
                "SELECT step_time_ratio FROM incident_step_speed($1, $2) WHERE run_id = $3",
                [ctx["origin"] + st["start"], ctx["origin"] + st["end"], st["run"]],
            ).fetchone()
            ctx["step_time_ratio"] = ratio[0] if ratio else None
        out.append(_decide(st, ctx))
    con.execute("DROP TABLE _incident_cand")
    return out


def explain(
    con: duckdb.DuckDBPyConnection,
    tl: dict[str, Any],
    group: list[dict[str, Any]],
    s: dict[str, Any],
    engine: str | None,
) -> dict[str, Any]:
    """The incident's entry of the document, from its ``screen``: the requests with their attribution, the engine
    inside against outside, the mechanism, the causes, the advice and the sentence."""
    start, end, metric, ctx, over = s["start"], s["end"], s["metric"], s["ctx"], s["over"]
    origin = ctx["origin"]
    inside = rows(con, "SELECT * FROM incident_requests WHERE t_s >= $1 AND t_s < $2 ORDER BY t_s", [start, end])
    caused = _causes(inside, s["trigger"])
    doc = incident_entry(
        s,
        origin,
        len(group),
        requests=len(inside),
        requests_over=len(over),
        requests_over_before=s["over_before"],
        affected=affected(s["inside"], over),
        engine=_engine(con, origin + start, origin + end, ctx, len(inside), end - start),
        trigger=s["trigger"],
        mechanism=_mechanism(inside),
        caused_by=caused,
    )
    cause = caused[0]["client"] if caused else None
    doc["advice"] = incident_advice(doc, inside, _outside_p90(con, metric, start, end, cause), engine)
    doc["verdict"] = verdict(doc)
    return doc


NO_CLIENT = "\x00"
"""The key of requests no client is named for, among client ids (a NULL id is a client of its own)."""


def _key(client: str | None) -> str:
    return NO_CLIENT if client is None else client


def _context(con: duckdb.DuckDBPyConnection, start: float, end: float, width: float) -> dict[str, Any]:
    """What the rules read of the rest of the run, aggregated in SQL (a million requests stay in DuckDB): the
    requests from the window before the incident to its end (``fresh``), the clients and size classes seen before
    that window, counts and the run's span, and the median prompt before the incident."""
    fresh = rows(
        con, f"SELECT {SCREENED} FROM incident_arrivals WHERE t_s >= $1 AND t_s < $2 ORDER BY t_s", [start - width, end]
    )
    row = con.execute(
        f"""SELECT count(*) FILTER (WHERE t_s < $1), count(*) FILTER (WHERE t_s >= $2), max(t_s), count(*),
                   median(input_tokens) FILTER (WHERE t_s < $1),
                   list(DISTINCT coalesce(client_id, '{NO_CLIENT}')) FILTER (WHERE t_s < $1 - $3),
                   list(DISTINCT size_class) FILTER (WHERE t_s < $1 - $3 AND size_class IS NOT NULL),
                   min(arrival_s)
            FROM incident_arrivals""",
        [start, end, width],
    ).fetchone()
    return _ctx(fresh, row, start, end, width)


def _ctx(fresh: list[dict[str, Any]], row: tuple, start: float, end: float, width: float) -> dict[str, Any]:
    n_before, n_after, span, n_all, p50_before, early_clients, early_sizes, origin = row
    return {
        "fresh": fresh,
        "n_before": n_before,
        "n_after": n_after,
        "n_all": n_all,
        "span": span or 0.0,
        "prompt_p50_before": p50_before,
        "early_clients": set(early_clients or []),
        "early_sizes": set(early_sizes or []),
        "origin": origin,
        "start": start,
        "end": end,
        "width": width,
    }


def _outside_p90(
    con: duckdb.DuckDBPyConnection, metric: str, start: float, end: float, cause: str | None
) -> float | None:
    """The p90 of ``metric`` outside the incident over the requests not of the causing client: the level the
    suffering requests have without it."""
    found = con.execute(
        f"SELECT quantile_cont({metric}_s, 0.9) FROM incident_arrivals WHERE (t_s < $1 OR t_s >= $2) "
        "AND ($3 IS NULL OR client_id IS DISTINCT FROM $3)",
        [start, end, cause],
    ).fetchone()
    return found[0] if found else None


def affected(inside: list[dict[str, Any]], over: list[dict[str, Any]]) -> list[dict[str, Any]]:
    clients = sorted({r["client_id"] for r in inside}, key=str)
    out = []
    for c in clients:
        mine_over = [r for r in over if r["client_id"] == c]
        out.append(
            {
                "client": c,
                "requests": sum(1 for r in inside if r["client_id"] == c),
                "over": len(mine_over),
                "size_classes": sorted({r["size_class"] for r in mine_over if r["size_class"] is not None}),
            }
        )
    return sorted(out, key=lambda a: (-a["over"], -a["requests"], str(a["client"])))


def _rate(n: int, seconds: float) -> float | None:
    return n / seconds if seconds > 0 and n else None


def _engine(
    con: duckdb.DuckDBPyConnection, t0: float, t1: float, ctx: dict[str, Any], n_inside: int, seconds: float
) -> dict[str, Any] | None:
    sides = {r["side"]: r for r in rows(con, "SELECT * EXCLUDE (run_id) FROM incident_engine($1, $2)", [t0, t1])}
    rates = {"inside": _rate(n_inside, seconds), "outside": _rate(ctx["n_all"] - n_inside, ctx["span"] - seconds)}
    if not sides:
        return None
    empty = dict.fromkeys(
        (
            "steps",
            "step_time_mean_s",
            "prompt_tokens_per_step",
            "steps_with_prompts",
            "decode_reqs_per_step",
            "at_slot_cap",
            "at_budget",
            "kv_out",
            "kv_peak",
            "preemptions",
            "running_mean",
            "waiting_mean",
        )
    )
    out = {}
    for side in ("inside", "outside"):
        row = {k: v for k, v in (sides.get(side) or empty).items() if k != "side"}
        out[side] = row | {"arrival_rate": rates[side]}
    return {**out, "step_time_ratio": ctx["step_time_ratio"]}


def _p50(values: list[float]) -> float | None:
    return median(values) if values else None


def _common(values: list[Any]) -> Any:
    seen = [v for v in values if v is not None]
    return max(set(seen), key=seen.count) if seen else None


def _new_group(ctx: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The largest group of requests, arriving from the window before the incident to its end, of a client (else a
    size class) the run had no request of before that: None where there is none of the judged windows' size."""
    if not ctx["n_before"] or not ctx["early_clients"]:
        return None
    new_clients: dict[Any, list[dict[str, Any]]] = {}
    new_sizes: dict[Any, list[dict[str, Any]]] = {}
    for r in ctx["fresh"]:
        if _key(r["client_id"]) not in ctx["early_clients"]:
            new_clients.setdefault(r["client_id"], []).append(r)
        if r["size_class"] is not None and r["size_class"] not in ctx["early_sizes"]:
            new_sizes.setdefault(r["size_class"], []).append(r)
    group = max(new_clients.values(), key=len) if new_clients else None
    if group is None and new_sizes:
        group = max(new_sizes.values(), key=len)
    least = math.ceil(thresholds()["incident_window_requests"] / 4)
    return group if group is not None and len(group) >= least else None


def _trigger(ctx: dict[str, Any], inside: list[dict[str, Any]], start: float, end: float) -> dict[str, Any]:
    """What changed at the start: a client or size class absent before it (``_new_group``), else an arrival-rate
    jump beyond its Poisson noise or the engine's slowdown at the same batch size, whichever is the larger change;
    ``other`` where none of them is found."""
    t_ = thresholds()
    before_n, after_n = ctx["n_before"], ctx["n_after"]
    outside_n, outside_s = (before_n, start) if before_n > 1 else (after_n, ctx["span"] - end)
    rate_in, rate_out = _rate(len(inside), end - start), _rate(outside_n, outside_s)
    slow = ctx["step_time_ratio"]
    base = dict.fromkeys(("client", "requests", "first_arrival_s", "size_class", "prompt_tokens_p50")) | {
        "prompt_tokens_p50_before": ctx["prompt_p50_before"],
        "arrival_rate": rate_in,
        "arrival_rate_before": rate_out,
        "step_time_ratio": slow,
    }
    group = _new_group(ctx)
    if group is not None:
        client = _common([r["client_id"] for r in group])
        theirs = [r for r in inside if r["client_id"] == client] or group
        t = base | {
            "kind": "new_requests",
            "client": client,
            "requests": len(theirs),
            "first_arrival_s": min(r["t_s"] for r in group),
            "size_class": _common([r["size_class"] for r in theirs]),
            "prompt_tokens_p50": _p50([r["input_tokens"] for r in theirs if r["input_tokens"] is not None]),
        }
        return t | {"why": _new_requests_words(t)}
    # a rate jump counts beyond the Poisson noise of the count the outside rate predicts over the incident; a
    # slowdown from a doubling of the same-batch step time (incident_factor, the latency's own rule)
    expected = rate_out * (end - start) if rate_out else None
    jumped = bool(expected) and (len(inside) - expected) / math.sqrt(expected) >= t_["incident_rate_z"]
    slowed = slow is not None and slow >= t_["incident_factor"]
    ratio = rate_in / rate_out if rate_in and rate_out else 0.0
    if jumped and (not slowed or ratio >= slow):
        why = f"arrivals rose to {rate_in:.3g}/s from {rate_out:.3g}/s outside it ({ratio:.2g}x)"
        return base | {"kind": "arrival_rate", "client": _common([r["client_id"] for r in inside]), "why": why}
    if slowed:
        why = (
            f"the engine slowed: decode-only steps took {slow:.2g}x as long as outside at the same batch size, "
            f"at an arrival rate of {_fmt_rate(rate_in)} against {_fmt_rate(rate_out)}"
        )
        return base | {"kind": "engine_slowdown", "why": why}
    said = f"arrivals {_fmt_rate(rate_in)} against {_fmt_rate(rate_out)} outside"
    if slow is not None:
        said += f", same-batch decode steps {slow:.2g}x"
    return base | {"kind": "other", "why": f"no new client or size class, no rate jump or engine slowdown ({said})"}


def _fmt_rate(rate: float | None) -> str:
    return "unknown" if rate is None else f"{rate:.3g}/s"


def _new_requests_words(t: dict[str, Any]) -> str:
    size = f", prompts p50 {t['prompt_tokens_p50']:,.0f} tokens" if t["prompt_tokens_p50"] is not None else ""
    p50_before = t["prompt_tokens_p50_before"]
    before = f" (the run's before: {p50_before:,.0f})" if p50_before is not None else ""
    rate = ""
    if t["arrival_rate"] and t["arrival_rate_before"]:
        rate = f"; arrivals {t['arrival_rate']:.3g}/s against {t['arrival_rate_before']:.3g}/s outside"
    first = t["first_arrival_s"]
    return f"{t['requests']} requests of client {t['client']} first seen at {first:.1f} s{size}{before}{rate}"


PARTS = ("slot_wait", "budget_wait", "kv_wait", "load", "interference", "preempted")


def _sum(inside: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in inside if r[key] is not None]
    return float(sum(values)) if values else None


def _mechanism(inside: list[dict[str, Any]]) -> dict[str, Any]:
    e2e = _sum(inside, "e2e_s") or 0.0
    queue = _sum(inside, "queue_s")
    parts = {k: _sum(inside, f"{k}_s") for k in ("slot_wait", "budget_wait", "kv_wait")}
    known = [v for v in parts.values() if v is not None]
    load = max(queue - sum(known), 0.0) if queue is not None and known else None
    m = {
        "requests": len(inside),
        "e2e_s": e2e,
        "queue_s": queue,
        "slot_wait_s": parts["slot_wait"],
        "budget_wait_s": parts["budget_wait"],
        "kv_wait_s": parts["kv_wait"],
        "load_s": load,
        "interference_s": _sum(inside, "suffered_s"),
        "preempted_s": _sum(inside, "preempted_s"),
        "preemptions": int(_sum(inside, "num_preemptions") or 0)
        if any(r["num_preemptions"] is not None for r in inside)
        else None,
    }
    m["shares"] = {k: (m[f"{k}_s"] / e2e if e2e and m[f"{k}_s"] is not None else None) for k in PARTS}
    # the largest part names the mechanism where it is a notable share of the requests' time (the share from which
    # a part of the latency gets its advice); else the time went into the steps themselves
    ranked = [(v, k) for k, v in m["shares"].items() if v and v >= thresholds()["queue_part_share_for_advice"]]
    m["dominant"] = max(ranked)[1] if ranked else None
    return m


def _causes(inside: list[dict[str, Any]], trigger: dict[str, Any]) -> list[dict[str, Any]]:
    if (
        trigger["kind"] not in ("new_requests", "arrival_rate")
        or trigger["kind"] == "arrival_rate"
        and (len({r["client_id"] for r in inside}) < 2)
    ):
        return []
    theirs = [r for r in inside if r["client_id"] == trigger["client"]]
    tokens = [r["input_tokens"] for r in theirs if r["input_tokens"] is not None]
    return [
        {
            "client": trigger["client"],
            "requests": len(theirs),
            "prompt_tokens": int(sum(tokens)) if tokens else None,
            "step_time_s": _sum(theirs, "caused_s"),
            "slot_s": _sum(theirs, "slot_s"),
        }
    ]


def verdict(i: dict[str, Any]) -> str:
    """The incident in one sentence with its numbers: when, how far, whom, what changed, and the mechanism (where
    ``i`` has one: a screened stretch, the weekly report's, has none)."""
    label = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "e2e latency", "queue": "queue time"}[i["metric"]]
    typical = f"{_s(i['typical'])} typical" if i["typical"] is not None else "no typical level"
    if i["requests_over"] is None:
        over = f"{i['requests']} requests finished in it (the engine's histograms: no request seen alone)"
    else:
        who = ", ".join(f"{a['over']} of client {a['client']}" for a in i["affected"] if a["over"])
        over = f"{i['requests_over']} of {i['requests']} requests over" + (f" ({who})" if who else "")
    m = i.get("mechanism") or {"dominant": None, "e2e_s": None}
    mech = ""
    if m["dominant"]:
        words = {
            "slot_wait": "waiting for a sequence slot",
            "budget_wait": "waiting for the token budget",
            "kv_wait": "waiting for KV room",
            "load": "queued behind other work",
            "interference": "decode steps slowed by other requests' prefills",
            "preempted": "preempted",
            "queue": "queued (the engine's histograms do not say for what)",
        }
        mech = f"; mostly {words[m['dominant']]} ({m['shares'][m['dominant']]:.0%} of their e2e)"
    elif m["e2e_s"]:
        mech = "; no queue limit, interference or preemption took a notable share: the steps themselves were slower"
    return (
        f"Incident from {i['start_s']:.0f} s to {i['end_s']:.0f} s: {label} p90 reached {_s(i['worst'])} "
        f"({typical}, threshold {_s(i['threshold'])}); {over}; trigger: {i['trigger']['why']}{mech}."
    )


def _s(x: float | None) -> str:
    if x is None:
        return "unknown"
    return f"{x * 1000:.3g} ms" if abs(x) < 1 else f"{x:.3g} s"

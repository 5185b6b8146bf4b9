"""``diff``: what changed between two runs, with the request mix normalised.

Requests fall into buckets of prompt and output length (powers of two). Where the two runs share most of
their traffic's buckets, each component's mean per request is compared on the baseline's mix (the
incident's bucket means re-weighted by the baseline's bucket shares), so "the traffic got longer" is
separated from "the system got slower". Where the mixes overlap too little, the diff says so and compares
plain means. Two runs known only from the engine's metrics compare their histograms' means; two known only from
profiler traces compare their engine steps kind by kind (step time, tokens per step, GPU time by kernel class).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any

from lltrace.analysis.diff_requests import request_differences, verdict_lead
from lltrace.analysis.engine_windows import engine_windows
from lltrace.analysis.sql import rows
from lltrace.analysis.tail import E2E_PARTS
from lltrace.documents import plain
from lltrace.errors import LltraceError
from lltrace.ingest.engine import engine_name
from lltrace.ingest.targets import Target, as_store, open_run
from lltrace.queries import thresholds
from lltrace.store import Store
from lltrace.tables import ENGINE_SETTINGS

COMPONENTS = ("overhead", "queue", "kv_wait", "slot_wait", "budget_wait", "prefill", "decode", "preempted")
ADDITIVE = E2E_PARTS

_BUCKETS = """
SELECT CAST(floor(log2(greatest(a.input_tokens, 1))) AS INTEGER) AS ib,
       CAST(floor(log2(greatest(a.output_tokens, 1))) AS INTEGER) AS ob,
       count(*) AS n,
       avg(a.overhead_s) AS overhead, avg(a.queue_s) AS queue, avg(coalesce(k.kv_wait_s, 0)) AS kv_wait,
       avg(coalesce(k.slot_wait_s, 0)) AS slot_wait, avg(coalesce(k.budget_wait_s, 0)) AS budget_wait,
       avg(a.prefill_s) AS prefill, avg(a.decode_s) AS decode, avg(a.preempted_s) AS preempted
FROM attribution_request a
LEFT JOIN attribution_queue_causes k ON k.run_id = a.run_id AND k.request_id = a.request_id
WHERE a.e2e_s IS NOT NULL AND a.queue_s IS NOT NULL AND a.prefill_s IS NOT NULL AND a.decode_s IS NOT NULL
  AND a.input_tokens IS NOT NULL AND a.output_tokens IS NOT NULL
  AND a.run_id = $run AND ($lo IS NULL OR a.arrival_s >= $lo) AND ($hi IS NULL OR a.arrival_s < $hi)
GROUP BY ALL
"""

Window = tuple[float | None, float | None]
"""[from, to) on the run clock, seconds; None: unbounded."""


def parse_window(text: str) -> Window:
    """``FROM/TO`` (ISO-8601 times, a zone or UTC, or seconds on the run clock; either side may be empty) as a
    window; a one-line ``LltraceError`` for anything else."""
    if text.count("/") != 1:
        raise LltraceError(f"window {text!r}: expected FROM/TO (ISO-8601 times or seconds; either may be empty)")
    return tuple(_instant(part.strip(), text) for part in text.split("/"))  # type: ignore[return-value]


def _instant(part: str, text: str) -> float | None:
    if not part:
        return None
    try:
        return float(part)
    except ValueError:
        pass
    try:
        t = datetime.fromisoformat(part)
    except ValueError:
        raise LltraceError(f"window {text!r}: {part!r} is not an ISO-8601 time or a number of seconds") from None
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


def diff(
    baseline: Target,
    incident: Target,
    *,
    store: Store | str | os.PathLike[str] | None = None,
    baseline_window: Window | None = None,
    incident_window: Window | None = None,
) -> dict[str, Any]:
    """The diff document (``lltrace.documents.DiffDocument``, ``lltrace diff --json``): each run a ``Run``, a stored
    run's id, or the file or folder of one run; each side optionally narrowed to a window (its requests by arrival,
    its engine samples by time), so two windows of one run compare too. ``settings_changed`` lists the engine
    settings the two runs' ``engine_config`` give different values (the verdict names them)."""
    st = as_store(store)
    doc = _diff(st, baseline, incident, baseline_window, incident_window)
    ids = (doc["baseline"]["run"], doc["incident"]["run"])
    con = st.connect(sorted(set(ids)))
    try:
        config = con.execute("SELECT run_id, setting, value, basis FROM engine_config").fetchall()
        failures = {side: _failures(con, doc[side]["run"], doc[side]["window"]) for side in ("baseline", "incident")}
    finally:
        con.close()
    doc["failures"] = failures
    b, i = failures["baseline"], failures["incident"]
    if b and i and (b["failed"] or i["failed"]):
        doc["verdict"] = (
            doc["verdict"].removesuffix(".") + f". Failed requests: {b['failed']:,.0f} of {b['requests']:,.0f} -> "
            f"{i['failed']:,.0f} of {i['requests']:,.0f}"
            + (f" ({i['basis']})" if i["basis"] != "requests" else "")
            + "."
        )
    sides = [{s: (v, b) for r, s, v, b in config if r == run} for run in ids]
    changed = [
        {"setting": s, "baseline": sides[0].get(s, (None,))[0], "incident": sides[1].get(s, (None,))[0]}
        | {"basis": " -> ".join(side[s][1] if s in side else "not known" for side in sides)}
        for s in ENGINE_SETTINGS
        if (s in sides[0] or s in sides[1]) and sides[0].get(s, (None,))[0] != sides[1].get(s, (None,))[0]
    ]
    doc["settings_changed"] = changed
    diffs = request_differences(
        st, {side: doc[side] for side in ("baseline", "incident")}, engine_name(st.metadata(ids[1])["sources"])
    )
    doc.update(diffs)
    doc["verdict"] = verdict_lead(diffs) + doc["verdict"]
    if changed:
        said = ", ".join(
            f"{c['setting']} {_value(c['setting'], c['baseline'])} -> {_value(c['setting'], c['incident'])}"
            for c in changed
        )
        doc["verdict"] = doc["verdict"].removesuffix(".") + f". The engines' settings differ: {said}."
    return plain(doc, "diff")


def _failures(con: Any, run_id: str, window: list[float | None] | None) -> dict[str, Any] | None:
    """A side's failed requests (``requests_latency.outcome`` failed, by arrival in the window) among all it holds;
    without requests, what its API server refused or failed (4xx and 5xx responses); None where neither is known."""
    lo, hi = window or (None, None)
    n, failed = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE outcome = 'failed') FROM requests_latency WHERE run_id = $run "
        "AND ($lo IS NULL OR arrival_s >= $lo) AND ($hi IS NULL OR arrival_s < $hi)",
        {"run": run_id, "lo": lo, "hi": hi},
    ).fetchone()
    if n:
        return {"requests": n, "failed": failed, "basis": "requests"}
    w = next(iter(engine_windows(con, None, lo, hi, run_id).values()), {})
    if w.get("http_failed") is None:
        return None
    return {"requests": w["http_responses"], "failed": w["http_failed"], "basis": "the API server's responses"}


def _value(setting: str, v: float | None) -> str:
    if v is None:
        return "not known"
    return ("on" if v else "off") if setting in ("chunked_prefill", "prefix_caching") else f"{v:,.0f}"


def _diff(
    st: Store,
    baseline: Target,
    incident: Target,
    baseline_window: Window | None,
    incident_window: Window | None,
) -> dict[str, Any]:
    base, inc = open_run(baseline, st), open_run(incident, st)
    sides = {"baseline": (base.id, baseline_window), "incident": (inc.id, incident_window)}
    buckets, engine, preemptions = _gather(st, sides)
    ids = {
        side: {"run": run_id, "window": list(window) if window else None} for side, (run_id, window) in sides.items()
    }
    b, i = buckets["baseline"], buckets["incident"]
    nb, ni = sum(r["n"] for r in b.values()), sum(r["n"] for r in i.values())
    if not (nb and ni) and engine["baseline"].get("requests") and engine["incident"].get("requests"):
        return _engine_diff(ids, engine, preemptions)
    if not (nb or ni or engine["baseline"].get("requests") or engine["incident"].get("requests")):
        if any(w for _, w in sides.values()):
            raise LltraceError(
                "neither run has requests or engine samples to narrow to a window: their profiler steps compare whole "
                "(drop --baseline-window / --incident-window)"
            )
        profiled = _profiler_diff(st, ids)
        if profiled is not None:
            return profiled
    if not (nb and ni):
        empty = "baseline" if not nb else "incident"
        raise LltraceError(
            f"{ids[empty]['run']}: no attributed request (nor engine histogram)"
            + (" in the window asked for" if sides[empty][1] else "")
            + ": nothing to compare"
        )
    return _request_diff(ids, b, i, preemptions)


def _gather(
    st: Store, sides: dict[str, tuple[str, Window | None]]
) -> tuple[dict[str, dict[Any, dict[str, Any]]], dict[str, dict[str, Any]], dict[str, Any]]:
    """Each side's requests by size bucket (``_BUCKETS``), its engine's figures over its window, its preemptions."""
    con = st.connect(sorted({run_id for run_id, _ in sides.values()}))
    try:
        preempt = dict(con.execute("SELECT run_id, preemptions FROM engine_preemptions").fetchall())
        buckets, engine, preemptions = {}, {}, {}
        for side, (run_id, window) in sides.items():
            lo, hi = window or (None, None)
            cur = con.execute(_BUCKETS, {"run": run_id, "lo": lo, "hi": hi})
            cols = [d[0] for d in cur.description]
            buckets[side] = {(r[0], r[1]): dict(zip(cols, r, strict=True)) for r in cur.fetchall()}
            engine[side] = next(iter(engine_windows(con, None, lo, hi, run_id).values()), {})
            preemptions[side] = engine[side].get("preemptions") if window else preempt.get(run_id)
    finally:
        con.close()
    return buckets, engine, preemptions


def _request_diff(
    ids: dict[str, dict[str, Any]],
    b: dict[Any, dict[str, Any]],
    i: dict[Any, dict[str, Any]],
    preemptions: dict[str, Any],
) -> dict[str, Any]:
    """The diff of two sides' requests: each component's mean per request, on the baseline's mix where the two mixes
    overlap enough (re-weighted by size bucket), else on each side's own."""
    min_overlap = thresholds()["diff_min_overlap"]
    nb, ni = sum(r["n"] for r in b.values()), sum(r["n"] for r in i.values())
    shared = set(b) & set(i)
    overlap = (sum(b[k]["n"] for k in shared) + sum(i[k]["n"] for k in shared)) / (nb + ni) if nb + ni else 0.0
    normalised = bool(shared) and overlap >= min_overlap
    comps: dict[str, dict[str, float]] = {}
    for c in COMPONENTS:
        if normalised:
            w = {k: b[k]["n"] for k in shared}
            tot = sum(w.values())
            bv = sum(w[k] * b[k][c] for k in shared) / tot
            iv = sum(w[k] * i[k][c] for k in shared) / tot
        else:
            bv = sum(r["n"] * r[c] for r in b.values()) / nb if nb else float("nan")
            iv = sum(r["n"] * r[c] for r in i.values()) / ni if ni else float("nan")
        comps[c] = {"baseline_s": bv, "incident_s": iv, "delta_s": iv - bv}
    if any(preemptions.values()) and not comps["preempted"]["baseline_s"] and not comps["preempted"]["incident_s"]:
        # a timed preemption lasts: none on either side beside preemptions means no source timed them
        comps["preempted"]["note"] = "no source timed preemptions: preempted time stays inside prefill/decode"
    total = sum(comps[c]["delta_s"] for c in ADDITIVE)
    for c in COMPONENTS:
        comps[c]["share_of_change"] = comps[c]["delta_s"] / total if total else None
    return {
        "baseline": ids["baseline"] | {"requests": nb, "preemptions": preemptions["baseline"]},
        "incident": ids["incident"] | {"requests": ni, "preemptions": preemptions["incident"]},
        "mix": {
            "overlap": overlap,
            "normalised": normalised,
            "buckets_shared": len(shared),
            "bucketing": "log2 of prompt and output tokens",
            "min_overlap": min_overlap,
        },
        "components": comps,
        "verdict": _request_verdict(comps, total, normalised, overlap),
    }


def _request_verdict(comps: dict[str, dict[str, Any]], total: float, normalised: bool, overlap: float) -> str:
    """What changed, in one sentence: the change in mean e2e, its largest component (and, for the queue, what the
    engine was out of), and whether the mixes were normalised."""
    lead = max(ADDITIVE, key=lambda c: abs(comps[c]["delta_s"]))
    direction = "faster" if total < 0 else "slower"
    verdict = (
        f"The incident is {abs(total):.3f} s per request {direction} on "
        f"{'the baseline' if normalised else 'its own'} request mix; most of the change is {lead} "
        f"({comps[lead]['delta_s']:+.3f} s, {abs(comps[lead]['share_of_change'] or 0):.0%} of it)"
    )
    if lead == "queue" and comps["queue"]["delta_s"]:
        waits = {"kv_wait": "KV-cache room", "slot_wait": "a sequence slot", "budget_wait": "the token budget"}
        main = max(waits, key=lambda w: comps[w]["delta_s"] / comps["queue"]["delta_s"])
        part = comps[main]["delta_s"] / comps["queue"]["delta_s"]
        verdict += f", of which {part:.0%} is waiting for {waits[main]}"
    if not normalised:
        verdict += f". The two runs' mixes overlap only {overlap:.0%}, so they were not normalised"
    return verdict + "."


# the engine's histograms: component <- (sum, count) of engine_windows' figures
_ENGINE_COMPONENTS = {
    "queue": ("queue_sum_s", "queue_n"),
    "prefill": ("prefill_sum_s", "requests"),
    "decode": ("decode_sum_s", "requests"),
    "e2e": ("e2e_sum_s", "requests"),
}


def _engine_diff(
    ids: dict[str, dict[str, Any]], engine: dict[str, dict[str, Any]], preemptions: dict[str, Any]
) -> dict[str, Any]:
    """The diff of two runs (or windows) known only from the engine's own metrics: mean queue, prefill and
    decode time per request from the histogram sums, what is left of e2e as overhead, the p90s' change
    (estimates, with their buckets), and the mix as tokens per request (no per-request lengths to normalise
    by)."""
    b, i = engine["baseline"], engine["incident"]
    comps: dict[str, dict[str, Any]] = {}
    for c, (total, n) in _ENGINE_COMPONENTS.items():
        bv, iv = ((f[total] / f[n]) if f.get(total) is not None and f.get(n) else None for f in (b, i))
        comps[c] = {"baseline_s": bv, "incident_s": iv, "delta_s": None if None in (bv, iv) else iv - bv}
    e2e = comps.pop("e2e")
    parts = [comps[c] for c in ("queue", "prefill", "decode")]
    if e2e["delta_s"] is not None and all(p["delta_s"] is not None for p in parts):
        over = {side: e2e[side] - sum(p[side] for p in parts) for side in ("baseline_s", "incident_s")}
        comps = {"overhead": over | {"delta_s": over["incident_s"] - over["baseline_s"]}} | comps
    total = e2e["delta_s"]
    for v in comps.values():
        v["share_of_change"] = v["delta_s"] / total if total and v["delta_s"] is not None else None
    mix = {
        side: {
            "input_tokens_per_request": _per(engine[side], "prompt_tokens"),
            "output_tokens_per_request": _per(engine[side], "generation_tokens"),
        }
        for side in ("baseline", "incident")
    }
    changes = {
        m: {
            "baseline_p90": b[f"{m}_p90"],
            "incident_p90": i[f"{m}_p90"],
            "baseline_p90_bucket": b[f"{m}_p90_bucket"],
            "incident_p90_bucket": i[f"{m}_p90_bucket"],
        }
        for m in ("queue", "ttft", "e2e", "tpot")
        if b.get(f"{m}_p90") is not None and i.get(f"{m}_p90") is not None
    }
    known = {c: v for c, v in comps.items() if v["delta_s"] is not None}
    if total is None or not known:
        verdict = "The two sides' engine histograms do not give the same latencies: no change can be read."
    else:
        lead = max(known, key=lambda c: abs(known[c]["delta_s"]))
        verdict = (
            f"The incident is {abs(total):.3f} s per request {'faster' if total < 0 else 'slower'} (mean e2e by the "
            f"engine's histograms); most of the change is {lead} ({known[lead]['delta_s']:+.3f} s"
            + (f", {abs(known[lead]['share_of_change']):.0%} of it" if known[lead]["share_of_change"] else "")
            + ")"
        )
        b_in, i_in = mix["baseline"]["input_tokens_per_request"], mix["incident"]["input_tokens_per_request"]
        b_out, i_out = mix["baseline"]["output_tokens_per_request"], mix["incident"]["output_tokens_per_request"]
        if b_in and i_in and b_out and i_out:
            verdict += (
                f". Traffic: {b_in:,.0f} -> {i_in:,.0f} prompt and {b_out:,.0f} -> {i_out:,.0f} output tokens per "
                "request (not normalised: the histograms hold no per-request lengths)"
            )
        verdict += "."
    return {
        "basis": "engine histograms",
        "baseline": ids["baseline"] | {"requests": b["requests"], "preemptions": preemptions["baseline"]},
        "incident": ids["incident"] | {"requests": i["requests"], "preemptions": preemptions["incident"]},
        "mix": {"normalised": False, "overlap": None, **mix},
        "components": comps,
        "quantiles": changes,
        "verdict": verdict,
    }


def _per(figures: dict[str, Any], tokens: str) -> float | None:
    n = figures.get("requests")
    return figures[tokens] / n if figures.get(tokens) is not None and n else None


def _profiler_diff(st: Store, ids: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """Two runs known only from their engine's steps (profiler traces, or server logs with every step): the steps
    kind by kind (``profiler_steps_by_kind``, the profiler's where a side has them, else its log's): mean step
    time, tokens per step and time per token, GPU busy time per step; GPU time per traced step by kernel class
    (``profiler_kernel_time``); and where both logs tell it, the engine's own record of its queue
    (``engine_queue_causes``: the waiting requests' time and what it waited for). Steps of different sizes are
    shown with their sizes, not normalised. None when a side has no step."""
    runs = {side: v["run"] for side, v in ids.items()}
    have, kinds, queue, classes = _gather_steps(st, runs)
    if not (kinds["baseline"] and kinds["incident"]):
        return None
    steps = {side: sum(k["steps"] for k in kinds[side].values()) for side in runs}
    comps: dict[str, dict[str, Any]] = {}
    for kind in sorted(set(kinds["baseline"]) & set(kinds["incident"])):
        b, i = kinds["baseline"][kind], kinds["incident"][kind]
        row: dict[str, Any] = {
            "baseline_s": b["wall_s_mean"],
            "incident_s": i["wall_s_mean"],
            "delta_s": i["wall_s_mean"] - b["wall_s_mean"],
            "share_of_change": None,
        }
        for side, k in (("baseline", b), ("incident", i)):
            row[f"{side}_steps"] = k["steps"]
            # tokens per step over the steps that give them (a kind read from kernels gives none); time per token only
            # where every step does: the steps that give them need not be typical (a graph's re-recording decode)
            every = k["tokens"] and k["token_steps"] == k["steps"]
            row[f"{side}_tokens_per_step"] = k["tokens"] / k["token_steps"] if k["tokens"] else None
            row[f"{side}_s_per_token"] = k["wall_s_total"] / k["tokens"] if every else None
            row[f"{side}_token_steps"] = k["token_steps"]
            row[f"{side}_gpu_busy_s"] = k["gpu_busy_s"] / k["steps"] if k["gpu_busy_s"] is not None else None
        comps[kind] = row
    if not comps:
        return None
    gpu = {
        c: {
            "baseline_s_per_step": classes["baseline"].get(c, 0.0) / steps["baseline"],
            "incident_s_per_step": classes["incident"].get(c, 0.0) / steps["incident"],
        }
        for c in sorted(set(classes["baseline"]) | set(classes["incident"]))
        if classes["baseline"] and classes["incident"]
    }
    for v in gpu.values():
        v["delta_s"] = v["incident_s_per_step"] - v["baseline_s_per_step"]
    logged = {have.get(r) for r in runs.values()} == {"log"}
    verdict = _steps_verdict(comps, gpu, kinds, queue, logged)
    return {
        "basis": "engine log steps" if logged else "profiler steps",
        "queue": {"baseline": queue["baseline"], "incident": queue["incident"]},
        "baseline": ids["baseline"] | {"requests": None, "preemptions": None, "steps": steps["baseline"]},
        "incident": ids["incident"] | {"requests": None, "preemptions": None, "steps": steps["incident"]},
        "mix": {
            "normalised": False,
            "overlap": None,
            "note": "steps compared kind by kind, with their tokens per step (not normalised by size)",
        },
        "components": comps,
        "kernel_classes": gpu,
        "verdict": verdict,
    }


def _gather_steps(
    st: Store, runs: dict[str, str]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Each side's step source (its profiler's where it has both), its steps by kind, its engine's queue record
    and its GPU time by kernel class."""
    con = st.connect(sorted(set(runs.values())))
    try:
        have: dict[str, str | None] = {}  # each side's step source: its profiler's where it has both
        for run in runs.values():
            found = {
                r[0]
                for r in con.execute(
                    "SELECT DISTINCT source FROM profiler_steps_by_kind WHERE run_id = ?", [run]
                ).fetchall()
            }
            have[run] = "profiler" if "profiler" in found else "log" if "log" in found else None
        kinds = {
            side: {
                r[0]: dict(
                    zip(
                        ("steps", "wall_s_mean", "wall_s_total", "gpu_busy_s", "tokens", "token_steps"),
                        r[1:],
                        strict=True,
                    )
                )
                for r in con.execute(
                    "SELECT coalesce(kind, 'unknown'), steps, wall_s_mean, wall_s_total, gpu_busy_s, "
                    "prefill_tokens + decode_tokens, token_steps FROM profiler_steps_by_kind "
                    "WHERE run_id = ? AND source = ?",
                    [run, have.get(run)],
                ).fetchall()
            }
            for side, run in runs.items()
        }
        queue = {
            side: (rows(con, "SELECT * EXCLUDE (run_id) FROM engine_queue_causes WHERE run_id = ?", [run]) or [None])[0]
            for side, run in runs.items()
        }
        classes = {
            side: dict(
                con.execute(
                    "SELECT kernel_class, total_s FROM profiler_kernel_time "
                    "WHERE run_id = ? AND kernel_class <> 'sync'",
                    [run],
                ).fetchall()
            )
            for side, run in runs.items()
        }
    finally:
        con.close()
    return have, kinds, queue, classes


def _steps_verdict(
    comps: dict[str, dict[str, Any]],
    gpu: dict[str, dict[str, Any]],
    kinds: dict[str, Any],
    queue: dict[str, Any],
    logged: bool,
) -> str:
    """What changed between the two sides' steps, in one sentence per finding."""
    parts = []
    for kind, v in comps.items():
        change = f"{v['delta_s'] / v['baseline_s']:+.0%}" if v["baseline_s"] else "from 0"
        text = f"{kind} steps {v['baseline_s'] * 1e3:,.2f} -> {v['incident_s'] * 1e3:,.2f} ms ({change})"
        if v["baseline_tokens_per_step"] and v["incident_tokens_per_step"]:
            text += f" at {v['baseline_tokens_per_step']:,.1f} -> {v['incident_tokens_per_step']:,.1f} tokens per step"
            if v["baseline_s_per_token"] and v["incident_s_per_token"]:
                text += (
                    f" ({v['baseline_s_per_token'] * 1e3:,.3f} -> {v['incident_s_per_token'] * 1e3:,.3f} ms per token)"
                )
        parts.append(text)
    verdict = f"From the {'engine logs' if logged else 'profiler traces'}' steps, kind by kind: " + "; ".join(parts)
    if gpu:
        lead = max(gpu, key=lambda c: abs(gpu[c]["delta_s"]))
        verdict += (
            f". GPU time per step changed most in {lead} kernels ({gpu[lead]['delta_s'] * 1e3:+,.3f} ms per step)"
        )
    only = sorted(set(kinds["baseline"]) ^ set(kinds["incident"]))
    if only:
        verdict += f". Only one side has {', '.join(only)} steps"
    b_q, i_q = queue["baseline"], queue["incident"]
    if b_q and i_q and b_q.get("waiting_request_s") is not None and i_q.get("waiting_request_s") is not None:
        verdict += (
            f". The engine's own record of its queue: {b_q['waiting_request_s']:,.1f} -> "
            f"{i_q['waiting_request_s']:,.1f} request-seconds waiting"
        )
        if b_q.get("queue_share") is not None and i_q.get("queue_share") is not None:
            verdict += f", {b_q['queue_share']:.0%} -> {i_q['queue_share']:.0%} of the requests' time in the engine"
        if b_q.get("kv_share") is not None and i_q.get("kv_share") is not None:
            verdict += f", KV room {b_q['kv_share']:.0%} -> {i_q['kv_share']:.0%} of it (estimated)"
    verdict += "."
    return verdict

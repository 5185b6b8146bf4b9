"""``analyze``: the analysis document (``lltrace.documents.AnalysisDocument``) from a run's
query views.

Sections: the run and its sources, request latencies (``requests_summary``), attribution and its parts
(``attribution_run``, ``attribution_queue_causes``, ``interference_*``), classification and advice (``classify``,
``advice``), engine steps with their roofline bound (``profiler_*``, ``lltrace.physics.roofline``), the
profile, KV-cache pressure and the workload mix. A section whose tables the run does not have is null.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import duckdb

from lltrace.analysis.advice import advise, advise_steps, fp8_decode_ratio
from lltrace.analysis.classify import (
    classify,
    classify_histograms,
    classify_queue,
    classify_steps,
    classify_token_mix,
    has_phases,
)
from lltrace.analysis.client_summary import client_summary
from lltrace.analysis.engine_windows import engine_windows, timeline_width
from lltrace.analysis.queue import PARTS, queue_split
from lltrace.analysis.sql import clean, rows
from lltrace.analysis.tail import E2E_PARTS, tail_section
from lltrace.documents import checked
from lltrace.documents.analysis import AnalysisDocument
from lltrace.ingest.engine import engine_name
from lltrace.ingest.pipeline import ProgressFn
from lltrace.ingest.targets import Target, open_run
from lltrace.physics.catalog import GPU, Model, gpu_of_run, model_or_error
from lltrace.physics.roofline import step_roofline
from lltrace.queries import thresholds
from lltrace.store import Run, Store
from lltrace.tables import STEP_KINDS


def _ranks(items: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Whether every rank's (trace file's) steps line up: the same count and the same kinds in order."""
    by_part: dict[int, list[str | None]] = {}
    for it in items:
        by_part.setdefault(it["part"], []).append(it["kind"])
    if len(by_part) < 2:
        return None
    first = min(by_part)
    disagree = [part for part, kinds in by_part.items() if kinds != by_part[first]]
    return {
        "ranks": len(by_part),
        "agree": not disagree,
        "disagree_parts": disagree,
        "steps_per_rank": {str(part): len(kinds) for part, kinds in sorted(by_part.items())},
    }


def _join(join: dict[str, Any] | None) -> dict[str, Any] | None:
    """How the client's records were joined to the engine's: per client the method and counts, the feature
    join's residuals and ties, and the engine records no client record took."""
    if not join or not join.get("clients"):
        return None
    keep = (
        "client_id",
        "method",
        "requests",
        "matched",
        "unmatched",
        "unmatched_why",
        "ties",
        "prefix_from",
        "output_token_mismatches",
        "systematic",
        "not_counted",
    )
    features = join.get("features") or {}
    return {
        "clients": [{k: c.get(k) for k in keep if k in c} for c in join["clients"]],
        "unmatched_spans": join.get("unmatched_spans"),
        "features": {k: features[k] for k in ("method", "residuals", "ties", "exact_token_counts") if k in features}
        or None,
    }


def _prefix_caching(con: duckdb.DuckDBPyConnection) -> bool | None:
    """Whether the engine ran with prefix caching, as engine_config resolves it (None: not known)."""
    found = con.execute("SELECT any_value(value) FROM engine_config WHERE setting = 'prefix_caching'").fetchone()
    return None if found is None or found[0] is None else bool(found[0])


def _gpu_not_in_catalog(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The GPU a source names (a trace's ``deviceProperties``) when lltrace's catalog does not know it: said by name,
    so that "unknown" is kept for runs that name none."""
    det = (meta.get("detected") or {}).get("gpu") or {}
    return {"name": det["name"], "origin": det.get("origin")} if det.get("name") else None


@dataclass
class Analysis:
    """The result of ``analyze``: the run and its analysis document (``lltrace.documents.AnalysisDocument``)."""

    run: Run
    document: AnalysisDocument

    def to_dict(self) -> dict[str, Any]:
        """The analysis document as plain JSON values (what ``lltrace analyze --json`` prints)."""
        return self.document.to_builtins()


def analyze(
    paths_or_run: Target,
    *,
    store: Store | str | os.PathLike[str] | None = None,
    run: str | None = None,
    gpu: str | None = None,
    model: str | None = None,
    keep_python: bool = False,
    strict: bool = False,
    progress: ProgressFn | None = None,
) -> Analysis:
    """The analysis document of one run: a ``Run``, a stored run's id, or the paths of one run (ingested, or
    the stored run reused)."""
    the_run = open_run(paths_or_run, store, run=run, keep_python=keep_python, strict=strict, progress=progress)
    gpu_obj, gpu_origin = gpu_of_run(the_run.metadata, gpu)
    model_obj: Model | None = model_or_error(model) if model else None
    meta = the_run.metadata
    present = the_run.store.present([the_run.id])
    con = the_run.store.connect([the_run.id])
    try:
        profile = _profile(con) if "kernels" in present else None
        doc = {
            "run": {
                "id": the_run.id,
                "lltrace_version": meta.get("lltrace_version"),
                "sources": [
                    {
                        "path": s["path"],
                        "format": s["format"],
                        "version": s.get("version"),
                        "records": s.get("records"),
                        "dropped": s.get("dropped"),
                        "warnings": s.get("warnings") or [],
                        "rank": s.get("rank"),
                    }
                    for s in meta["sources"]
                ],
                "skipped": meta.get("skipped") or [],
                "checks": meta.get("checks"),
                "clock_alignment": [
                    a
                    for a in (meta.get("clock") or {}).get("alignment", [])
                    if a.get("method", "").startswith("profiler clock") is False
                ],
                "join": _join(meta.get("join")),
                "gpu": {"name": gpu_obj.name, "origin": gpu_origin} if gpu_obj else None,
                "gpu_not_in_catalog": _gpu_not_in_catalog(meta) if gpu_obj is None else None,
                "model": {"name": model_obj.name, "origin": "option --model"} if model_obj else None,
            },
            "requests": _requests(con) if "requests" in present else None,
            "attribution": None,
            "classification": None,
            "steps": _steps(con, gpu_obj, model_obj, profile) if "engine_steps" in present else None,
            "profile": profile,
            "kv": _kv(con) if present & {"engine_stats", "engine_steps"} else None,
            "speculative": (rows(con, "SELECT * EXCLUDE (run_id) FROM engine_speculative") or [None])[0]
            if present & {"engine_stats", "engine_config"}
            else None,
            "workload": (rows(con, "SELECT * EXCLUDE (run_id) FROM workload_mix") or [None])[0]
            if "requests" in present
            else None,
            "client_summary": client_summary(meta["sources"]),
            "engine_latency": (rows(con, "SELECT * EXCLUDE (run_id) FROM engine_latency_histograms") or [None])[0]
            if "engine_stats" in present
            else None,
            "replicas": rows(con, "SELECT * EXCLUDE (run_id) FROM engine_replicas ORDER BY engine")
            if "engine_stats" in present
            else [],
            "engine_quantiles": rows(con, "SELECT * EXCLUDE (run_id) FROM engine_histogram_quantiles ORDER BY metric")
            if "engine_histograms" in present
            else [],
            "engine_queue_causes": (rows(con, "SELECT * EXCLUDE (run_id) FROM engine_queue_causes") or [None])[0]
            if "engine_stats" in present
            else None,
            "engine_timeline": _engine_timeline(con) if "engine_stats" in present else None,
            "advice": [],
        }
        att = rows(con, "SELECT * EXCLUDE (run_id) FROM attribution_run") if "requests" in present else []
        if att and att[0]["requests"]:
            a = att[0]
            doc["attribution"] = _attribution(a) | queue_split(con, a["queue_s"])
            by_client = rows(
                con, "SELECT * EXCLUDE (run_id) FROM attribution_client ORDER BY first_arrival_s, client_id"
            )
            doc["attribution"]["by_client"] = by_client if len(by_client) > 1 else None
            basis = {p: doc["attribution"][p]["basis"] for p in E2E_PARTS}
            tail = rows(con, "SELECT * EXCLUDE (run_id) FROM attribution_tail")
            doc["attribution"]["tail"] = tail_section(tail, basis)
            kv = doc["kv"]
            if kv is not None:
                kv["kv_wait_s"] = doc["attribution"]["kv_wait"]["total_s"]
            if "engine_steps" in present:
                suffered, caused, n_mixed = con.execute(
                    "SELECT sum(suffered_s), sum(caused_s), (SELECT count(*) FROM interference_steps) "
                    "FROM interference_request"
                ).fetchone()
                if n_mixed:
                    doc["attribution"]["interference"] = {
                        "total_s": clean(suffered),
                        "share_of_parent": clean(suffered / a["decode_s"]) if suffered and a["decode_s"] else None,
                        "basis": "estimated",
                        "caused_total_s": clean(caused),
                        "mixed_steps": n_mixed,
                        "method": "mixed-step time minus a decode-only fit of step time on decode tokens, "
                        "charged by time overlap (see queries/interference_*.sql)",
                    }
            doc["classification"] = classify(
                a,
                doc["attribution"]["kv_wait"]["total_s"],
                {p: doc["attribution"][p] for p in (*PARTS, "load_wait")},
                doc["engine_queue_causes"],
                engine_name(meta["sources"]),
            )
            doc["advice"] = advise(
                a,
                doc["classification"]["label"],
                {p: doc["attribution"][p] for p in (*PARTS, "load_wait")},
                doc["attribution"]["interference"],
                doc.get("workload"),
                fp8_decode_ratio(model_obj, gpu_obj, doc.get("workload")),
                doc["kv"],
                _prefix_caching(con),
                engine_name(meta["sources"]),
                doc["speculative"],
            )
        elif "requests" in present and model_obj and gpu_obj:
            doc["classification"] = classify_token_mix(con, model_obj.name, gpu_obj.name)
        elif (doc.get("engine_latency") or {}).get("e2e_requests") and classify_histograms(doc["engine_latency"]):
            doc["classification"] = classify_histograms(doc["engine_latency"], doc["engine_queue_causes"])
        elif doc["steps"] and has_phases(doc["steps"].get("phase_share")):
            doc["classification"] = classify_steps(
                doc["steps"]["phase_share"], doc["steps"].get("detection"), doc["engine_queue_causes"]
            )
        elif queue_verdict := classify_queue(doc["engine_queue_causes"]):
            doc["classification"] = queue_verdict
        doc["advice"] += advise_steps(doc["steps"])
    finally:
        con.close()
    return Analysis(the_run, checked(doc, "analysis"))


def _steps(
    con: duckdb.DuckDBPyConnection, gpu: GPU | None, model: Model | None, profile: dict[str, Any] | None
) -> dict[str, Any]:
    sources = dict(con.execute("SELECT source, count(*) FROM engine_steps GROUP BY source").fetchall())
    # A run may carry steps from its profiler trace and from the server's iteration log; the profiler's
    # (with GPU data) are described, the other source's count is reported beside them.
    src = "profiler" if sources.get("profiler") else "log" if sources.get("log") else None
    where = f"WHERE source = '{src}'" if src else ""
    counts = {k: 0 for k in STEP_KINDS}
    unknown = 0
    for kind, n in con.execute(f"SELECT kind, count(*) FROM engine_steps {where} GROUP BY kind").fetchall():
        if kind in counts:
            counts[kind] = n
        else:
            unknown += n
    by_kind = rows(con, f"SELECT * EXCLUDE (run_id, source) FROM profiler_steps_by_kind {where} ORDER BY kind")
    share = rows(con, f"SELECT * EXCLUDE (run_id, source) FROM profiler_phase_share {where}")
    if share and src == "profiler" and share[0]["basis"] == "gpu_busy" and profile and profile["gpu_busy"]:
        # GPU work no step holds (launched before the first detected step, or between steps no marker delimits):
        # the shares above are of the steps' time only, so how much lies outside them is said beside them. It is
        # the GPU's busy time less the steps' (each step's union of its own ops), floored at zero: at least that
        traced = sum(r["busy_s"] for r in profile["gpu_busy"])
        outside = max(0.0, traced - share[0]["total_s"]) if traced else None
        shown = outside is not None and outside >= thresholds()["steps_outside_share_shown"] * traced
        share[0] |= {
            "gpu_busy_s": traced,
            "outside_steps_s": outside,
            "steps_hold": 1 - outside / traced if shown else None,  # said beside the shares where it matters
        }
    items = rows(
        con,
        f"""
        SELECT part, step_id, kind, kind_from, start_s, wall_s AS dur_s, prefill_reqs, prefill_tokens,
               decode_reqs, decode_tokens, gpu_busy_s, launch_gap_s, gpu_idle_s, kernels, cuda_graph,
               graph_launches, t_gemm_s, t_attention_s, t_communication_s, t_memory_s, t_elementwise_s,
               t_other_s, shape_tokens, shape_reqs, shape_query_len, shape_context_tokens, marker, detection,
               kind_why
        FROM engine_steps {where} ORDER BY part, start_s, step_id
        """,
    )
    note = None
    for it in items:
        it["bound"] = None
        if gpu is None or model is None:
            continue
        tokens = it["shape_tokens"] or (it["prefill_tokens"] or 0) + (it["decode_tokens"] or 0)
        if not tokens:
            continue
        reqs = it["shape_reqs"] or ((it["prefill_reqs"] or 0) + (it["decode_reqs"] or 0)) or None
        r = step_roofline(model, gpu, tokens, it["shape_context_tokens"], reqs)
        it["bound"] = r.bound
        it["arithmetic_intensity"] = round(r.intensity, 2)
        it["ridge_flops_per_byte"] = round(r.ridge, 2)
        it["roofline_min_s"] = r.min_time_s
        it["roofline_efficiency"] = r.min_time_s / it["gpu_busy_s"] if it["gpu_busy_s"] else None
    if gpu is None or model is None:
        note = (
            "compute- vs memory-bound per step needs the model and the GPU: pass --model and --gpu "
            "(the GPU is read from deviceProperties when the trace has it)"
        )
    elif items and not any(it["bound"] for it in items):
        note = "compute- vs memory-bound per step needs each step's token count, which no step here has" + (
            " (their kinds came from the kernels, which do not give counts: trace with record_shapes=True "
            "or keep the engine's step markers)"
            if any(it["kind_from"] == "kernels" for it in items)
            else ""
        )
    # a decode step's tokens beyond one per decoding request: speculative decoding's draft tokens (vLLM counts the
    # tokens it verified), or a request resumed after preemption recomputing its tokens
    counted = [it for it in items if it["kind"] == "decode" and it["decode_reqs"] and it["decode_tokens"] is not None]
    beyond = [it["decode_tokens"] - it["decode_reqs"] for it in counted]
    kind_from: dict[str, int] = {}
    undecided: dict[str, int] = {}
    for it in items:
        if it["kind"] is not None:
            kind_from[it["kind_from"] or "unknown"] = kind_from.get(it["kind_from"] or "unknown", 0) + 1
        elif it["kind_why"]:
            undecided[it["kind_why"]] = undecided.get(it["kind_why"], 0) + 1
    return {
        "count": sum(counts.values()) + unknown,
        "count_by_kind": counts | ({"unknown": unknown} if unknown else {}),
        "count_by_kind_from": kind_from,
        "undecided": [{"why": why, "steps": n} for why, n in undecided.items()],
        "ranks": _ranks(items) if src == "profiler" else None,
        "source": src,
        "count_by_source": sources,
        "by_kind": by_kind,
        "phase_share": share[0] if share else None,
        "detection": sorted({it["detection"] for it in items if it["detection"]}),
        "bound_note": note,
        "decode_tokens_beyond_requests": {
            "tokens": sum(b for b in beyond if b > 0),
            "steps": sum(b > 0 for b in beyond),
            "decode_steps": len(counted),
        }
        if any(b > 0 for b in beyond)
        else None,
        "items": items,
    }


def _attribution(a: dict[str, Any]) -> dict[str, Any]:
    basis = {
        "overhead": "derived",
        "preempted": "measured" if a["preempted_s"] else "derived",
        "queue": a["queue_basis"],
        "prefill": a["prefill_basis"],
        "decode": a["decode_basis"],
    }
    out: dict[str, Any] = {c: {"total_s": a[f"{c}_s"], "share": a[f"{c}_share"], "basis": basis[c]} for c in E2E_PARTS}
    if not a["preempted_s"]:
        out["preempted"]["note"] = "no source timed preemptions: preempted time stays inside prefill/decode"
    out["interference"] = {"total_s": None, "share_of_parent": None, "basis": None}
    out["requests"] = a["requests"]
    out["requests_incomplete"] = a["requests_incomplete"]
    out["clock_errors"] = a["clock_errors"]
    out["e2e_s_total"] = a["e2e_s"]
    out["prefill_tokens_per_s"] = a["prefill_tokens_per_s"]
    out["prefill_cached_tokens"] = a["prefill_cached_tokens"]
    out["prefill_computed_tokens_per_s"] = a["prefill_computed_tokens_per_s"]
    out["decode_s_per_token"] = a["decode_s_per_token"]
    return out


def _engine_timeline(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The engine's own figures window by window over the run (``engine_windows``: load, KV, requests and the
    histograms' p50/p90 per window), the width the smallest nice one giving at most 24 windows of two samples
    or more; None without two timed samples."""
    span, step = con.execute(
        """
        WITH t AS (SELECT DISTINCT ts_s FROM engine_stats WHERE ts_s IS NOT NULL)
        SELECT max(ts_s) - min(ts_s), (SELECT median(d) FROM (SELECT ts_s - lag(ts_s) OVER (ORDER BY ts_s) AS d FROM t))
        FROM t
        """
    ).fetchone()
    if not span:
        return None
    width = timeline_width(span, step)
    windows = engine_windows(con, width)
    return {"width_s": width, "windows": [windows[k] for k in sorted(windows)]}


def _kv(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """KV-cache pressure and the prefix cache (``kv_wait_s`` is filled from the attribution's queue split)."""
    # waiting requests: a server's data-parallel engines' at one moment together (each replica of a fleet apart)
    peak, waiting, waitcap, samples = con.execute(
        "SELECT max(kv), max(waiting), max(waitcap), sum(n) FROM (SELECT max(kv) AS kv, sum(waiting) AS waiting, "
        "sum(waitcap) AS waitcap, sum(n) AS n FROM (SELECT source, instance, ts_s, engine, max(kv_usage) AS kv, "
        "max(waiting) AS waiting, max(waiting_capacity) AS waitcap, count(*) AS n FROM engine_stats "
        "WHERE source IS DISTINCT FROM 'stage' GROUP BY ALL) GROUP BY source, instance, ts_s)"
    ).fetchone()
    pre = (con.execute("SELECT preemptions FROM engine_preemptions").fetchone() or (None,))[0]
    cache = (rows(con, "SELECT * EXCLUDE (run_id) FROM engine_prefix_cache") or [{}])[0]
    per_request, bases = con.execute(
        "SELECT count(*), string_agg(DISTINCT basis, ' and ' ORDER BY basis) FROM requests_cached_tokens"
    ).fetchone()
    if not samples and not cache:
        return None
    return {
        "peak_usage": clean(peak),
        "preemptions": clean(pre),
        "peak_waiting": clean(waiting),
        "peak_waiting_capacity": clean(waitcap),
        "kv_wait_s": None,
        "prefix_cache_hit_rate": cache.get("hit_rate"),
        "prefix_cache_hit_basis": cache.get("hit_basis"),
        "prefix_cache_hit_tokens": cache.get("hit_tokens"),
        "prefix_cache_queried_tokens": cache.get("queried_tokens"),
        "prefix_cached_share": cache.get("cached_share"),
        "prefix_cached_basis": cache.get("cached_basis"),
        "prefix_cached_requests": per_request or None,
        "prefix_cached_requests_basis": bases,
    }


EXCLUDED_WHY: dict[str, str] = {
    "failed": "the request failed (an error status: HTTP error, rejected, aborted)",
    "cancelled": "the client cancelled it before it finished",
    "aborted": "the engine aborted it before it finished (vLLM aborts a request whose client disconnected: a client "
    "timeout or a closed stream)",
    "incomplete": "it had not finished when its record ends (the benchmark stopped; a server log ends, or the server "
    "failed, before it finished)",
    "warmup": "it belongs to the benchmark's warm-up, which the tool's own statistics leave out",
    "cooldown": "it belongs to the benchmark's cool-down, which the tool's own statistics leave out",
    "unjoined": "a client's record that no engine record joined and no send time places, in a run whose engine "
    "records include some no client record joined: it may be one of them, and no request is counted twice",
}
"""Why a request outside requests_latency.counted is left out of the run's figures, by outcome."""


MAX_CAUSES = 5
"""The most causes listed for one outcome (the commonest; the rest counted in ``other_causes``)."""


def cause_label(code: int | None, text: str | None) -> str:
    """One cause of failure as people name it: an HTTP status with its standard phrase (``HTTP 429 Too Many
    Requests``), a client's own code (``code -100``), else the source's error text."""
    if code is not None and 100 <= code <= 599:
        try:
            return f"HTTP {code} {HTTPStatus(code).phrase}"
        except ValueError:  # a status no standard names (nginx's 499, a server's own)
            return f"HTTP {code}"
    if code is not None:
        return f"code {code}"
    return text or "no cause given"


def _causes(groups: list[dict[str, Any]], requests: int) -> dict[str, Any]:
    """An outcome's causes as its sources state them (``requests_errors``), commonest first: what each was, how
    many requests, and when they arrived; the requests in causes past ``MAX_CAUSES`` and those no source gave a
    cause for, counted."""
    listed = [
        {"cause": cause_label(g["error_code"], g["error"]), **{k: clean(v) for k, v in g.items() if k != "outcome"}}
        for g in groups[:MAX_CAUSES]
    ]
    return {
        "causes": listed,
        "other_causes": sum(g["requests"] for g in groups[MAX_CAUSES:]),
        "no_cause_given": requests - sum(g["requests"] for g in groups),
    }


def _requests(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    found = rows(con, "SELECT * EXCLUDE (run_id) FROM requests_summary")
    if not found:
        return None
    r = found[0]

    def dist(prefix: str) -> dict[str, Any] | None:
        d = {k: r[f"{prefix}_{k}"] for k in ("p50", "p90", "p99", "mean")}
        return None if all(v is None for v in d.values()) else d

    by_outcome = con.execute(
        "SELECT outcome, count(*) FROM requests_latency WHERE NOT counted GROUP BY outcome "
        "ORDER BY count(*) DESC, outcome"
    ).fetchall()
    causes = rows(
        con,
        "SELECT * EXCLUDE (run_id) FROM requests_errors ORDER BY outcome, requests DESC, error_code, error",
    )
    return {
        "count": r["requests"],
        "errors": r["errors"],
        "counted": r["counted"],
        "excluded": [
            {
                "outcome": o,
                "requests": n,
                "why": EXCLUDED_WHY[o],
                **_causes([c for c in causes if c["outcome"] == o], n),
            }
            for o, n in by_outcome
        ],
        "basis": r["basis"],
        "ttft_s": dist("ttft"),
        "tpot_s": dist("tpot"),
        "e2e_s": dist("e2e"),
        "queue_s": dist("queue"),
    }


def _profile(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    (n_kernels,) = con.execute("SELECT count(*) FROM kernels").fetchone()
    if not n_kernels:
        return {"gpu_ops": 0, "kernel_time": [], "gpu_busy": [], "attention_variants": [], "orphans": 0}
    return {
        "gpu_ops": n_kernels,
        "kernel_time": rows(con, "SELECT * EXCLUDE (run_id) FROM profiler_kernel_time ORDER BY total_s DESC"),
        "gpu_busy": rows(con, "SELECT * EXCLUDE (run_id) FROM profiler_gpu_busy ORDER BY part, device"),
        "attention_variants": rows(
            con, "SELECT * EXCLUDE (run_id) FROM profiler_attention_variant ORDER BY total_s DESC"
        ),
        "orphans": con.execute("SELECT count(*) FROM kernels WHERE orphan").fetchone()[0],
        "cuda_graph_kernels": con.execute("SELECT count(*) FROM kernels WHERE cuda_graph").fetchone()[0],
    }

"""``analyze``: the analysis document of DESIGN.md from a run's query views."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lltrace.api import ProgressFn, Run, ingest
from lltrace.catalog import GPU, Model, find_gpu, gpu_or_error, model_or_error, step_roofline
from lltrace.classify import advise, advise_steps, classify
from lltrace.store import Store

STEP_KINDS = ("prefill", "decode", "mixed", "idle")


@dataclass
class Analysis:
    """The result of ``analyze``: the run and its analysis document."""

    run: Run
    document: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The analysis document (plain JSON types)."""
        return self.document


def _clean(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def _rows(con, query: str) -> list[dict[str, Any]]:
    cur = con.execute(query)
    cols = [d[0] for d in cur.description]
    return [{c: _clean(v) for c, v in zip(cols, row, strict=True)} for row in cur.fetchall()]


def _views(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}


_BENCH_FIELDS = {
    "request_rate": ("request_rate",),
    "max_concurrency": ("max_concurrency",),
    "completed": ("completed",),
    "failed": ("failed",),
    "duration_s": ("duration",),
    "median_ttft_ms": ("median_ttft_ms",),
    "median_tpot_ms": ("median_tpot_ms",),
    "median_itl_ms": ("median_itl_ms",),
    "median_e2e_ms": ("median_e2el_ms", "median_e2e_latency_ms"),
    "p99_ttft_ms": ("p99_ttft_ms",),
    "output_tokens_per_s": ("output_throughput",),
}


def _bench_summaries(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A benchmark client's own summary per run (vLLM / SGLang names unified); NULL where it gave none."""
    out = []
    for b in summaries:
        row = {k: next((b[n] for n in names if b.get(n) is not None), None) for k, names in _BENCH_FIELDS.items()}
        done = b.get("completed")
        for side in ("input", "output"):
            total = b.get(f"total_{side}_tokens")
            row[f"mean_{side}_tokens"] = total / done if total is not None and done else None
        out.append(row)
    return out


def _resolve_gpu(run: Run, gpu: str | None) -> tuple[GPU | None, str | None]:
    if gpu:
        return gpu_or_error(gpu), "option --gpu"
    det = (run.metadata.get("detected") or {}).get("gpu")
    if det and det.get("name"):
        found = find_gpu(det["name"], det.get("memory_bytes"))
        if found:
            return found, det.get("origin")
    return None, None


def analyze(
    paths_or_run: Sequence[str | os.PathLike[str]] | Run,
    *,
    store: Store | str | os.PathLike[str] | None = None,
    run: str | None = None,
    gpu: str | None = None,
    model: str | None = None,
    keep_python: bool = False,
    strict: bool = False,
    progress: ProgressFn | None = None,
) -> Analysis:
    """Ingest (or reuse) the files of one run and build its analysis document."""
    the_run = (
        paths_or_run
        if isinstance(paths_or_run, Run)
        else ingest(paths_or_run, store=store, run=run, keep_python=keep_python, strict=strict, progress=progress)
    )
    gpu_obj, gpu_origin = _resolve_gpu(the_run, gpu)
    model_obj: Model | None = model_or_error(model) if model else None
    meta = the_run.metadata
    con = the_run.store.connect([the_run.id])
    try:
        views = _views(con)
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
                        **({"benchmark": _bench_summaries(s["bench"])} if s.get("bench") else {}),
                    }
                    for s in meta["sources"]
                ],
                "skipped": meta.get("skipped") or [],
                "clock_alignment": [
                    a
                    for a in (meta.get("clock") or {}).get("alignment", [])
                    if a.get("method", "").startswith("profiler clock") is False
                ],
                "gpu": {"name": gpu_obj.name, "origin": gpu_origin} if gpu_obj else None,
                "model": {"name": model_obj.name, "origin": "option --model"} if model_obj else None,
            },
            "requests": _requests(con, views),
            "attribution": None,
            "classification": None,
            "steps": _steps(con, views, gpu_obj, model_obj),
            "profile": _profile(con, views),
            "kv": _kv(con, views),
            "workload": (_rows(con, "SELECT * EXCLUDE (run_id) FROM workload_mix") or [None])[0]
            if "workload_mix" in views
            else None,
            "advice": [],
        }
        att = _rows(con, "SELECT * EXCLUDE (run_id) FROM attribution_run") if "attribution_run" in views else []
        if att and att[0]["requests"]:
            a = att[0]
            kv = doc["kv"]
            doc["attribution"] = _attribution(a, kv)
            if "interference_request" in views:
                suffered, caused, n_mixed = con.execute(
                    "SELECT sum(suffered_s), sum(caused_s), (SELECT count(*) FROM interference_steps) "
                    "FROM interference_request"
                ).fetchone()
                if n_mixed:
                    doc["attribution"]["interference"] = {
                        "total_s": _clean(suffered),
                        "share_of_parent": _clean(suffered / a["decode_s"]) if suffered and a["decode_s"] else None,
                        "basis": "estimated",
                        "caused_total_s": _clean(caused),
                        "mixed_steps": n_mixed,
                        "method": "mixed-step time minus a decode-only fit of step time on decode tokens, "
                        "charged by time overlap (see queries/interference_*.sql)",
                    }
            doc["classification"] = classify(a, kv["kv_wait_s"] if kv else None)
            doc["advice"] = advise(
                a,
                doc["classification"]["label"],
                kv,
                doc["attribution"]["interference"],
                doc.get("workload"),
                _fp8_decode_ratio(model_obj, gpu_obj, doc.get("workload")),
            )
        elif "requests" in views and model_obj and gpu_obj:
            doc["classification"] = _classify_token_mix(con, model_obj.name, gpu_obj.name)
        elif doc["steps"] and _has_phases(doc["steps"].get("phase_share")):
            doc["classification"] = _classify_steps(doc["steps"]["phase_share"])
        doc["advice"] += advise_steps(doc["steps"])
    finally:
        con.close()
    return Analysis(the_run, doc)


def _steps(con, views: set[str], gpu: GPU | None, model: Model | None) -> dict[str, Any] | None:
    if "engine_steps" not in views:
        return None
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
    by_kind = _rows(con, f"SELECT * EXCLUDE (run_id, source) FROM profiler_steps_by_kind {where} ORDER BY kind")
    share = _rows(con, f"SELECT * EXCLUDE (run_id, source) FROM profiler_phase_share {where}")
    items = _rows(
        con,
        f"""
        SELECT part, step_id, kind, kind_from, start_s, wall_s AS dur_s, prefill_reqs, prefill_tokens,
               decode_reqs, decode_tokens, gpu_busy_s, launch_gap_s, gpu_idle_s, kernels, cuda_graph,
               graph_launches, t_gemm_s, t_attention_s, t_communication_s, t_memory_s, t_elementwise_s,
               t_other_s, shape_tokens, shape_reqs, shape_query_len, shape_context_tokens, marker, detection
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
    return {
        "count": sum(counts.values()) + unknown,
        "count_by_kind": counts | ({"unknown": unknown} if unknown else {}),
        "source": src,
        "count_by_source": sources,
        "by_kind": by_kind,
        "phase_share": share[0] if share else None,
        "detection": sorted({it["detection"] for it in items if it["detection"]}),
        "bound_note": note,
        "items": items,
    }


_COMPONENTS = ("overhead", "queue", "prefill", "decode", "preempted")


def _fp8_decode_ratio(model: Model | None, gpu: GPU | None, workload: dict | None) -> dict[str, Any] | None:
    """FP8 over BF16 decode time per token from the roofline, at the run's mean prompt and output lengths."""
    if model is None or gpu is None:
        return None
    from lltrace.estimate import estimate

    n_in = round((workload or {}).get("input_mean") or 512)
    n_out = round((workload or {}).get("output_mean") or 128)
    bf16 = estimate(model=model.name, gpu=gpu.name, input_tokens=n_in, output_tokens=n_out)
    fp8 = estimate(model=model.name, gpu=gpu.name, input_tokens=n_in, output_tokens=n_out, quant="fp8")
    return {"ratio": fp8["decode_s_per_token"] / bf16["decode_s_per_token"], "model": model.name, "gpu": gpu.name}


def _classify_token_mix(con, model: str, gpu: str) -> dict[str, Any] | None:
    """Arrivals and sizes only: prefill and decode time of every request from the latency model (estimated)."""
    from lltrace.classify import DOMINANT_SHARE, THRESHOLDS
    from lltrace.estimate import estimate

    n, mean_in, mean_out = con.execute(
        "SELECT count(*), avg(input_tokens), avg(output_tokens) FROM requests "
        "WHERE input_tokens IS NOT NULL AND output_tokens IS NOT NULL"
    ).fetchone()
    if not n:
        return None
    rates = estimate(model=model, gpu=gpu, input_tokens=round(mean_in), output_tokens=round(mean_out))
    tps, spt = rates["prefill_tokens_per_s"], rates["decode_s_per_token"]
    pre, dec = con.execute(
        f"SELECT sum(input_tokens) / {tps}, sum(output_tokens) * {spt} FROM requests "
        "WHERE input_tokens IS NOT NULL AND output_tokens IS NOT NULL"
    ).fetchone()
    pre, dec = float(pre), float(dec)
    p, d = pre / (pre + dec), dec / (pre + dec)
    label = "prefill-dominant" if p >= DOMINANT_SHARE else "decode-dominant" if d >= DOMINANT_SHARE else "balanced"
    return {
        "label": label,
        "why": f"estimated from the token mix of {n:,} requests on {rates['inputs']['gpu']['name']} with "
        f"{rates['inputs']['model']['name']}: prefill {p:.0%} and decode {d:.0%} of the modelled service time "
        f"(queueing cannot be known from arrivals alone)",
        "prefill_share": p,
        "decode_share": d,
        "queue_share": None,
        "crossover_input_tokens": tps * mean_out * spt,
        "crossover_formula": "L* = modelled prefill_tokens_per_s x mean_output_tokens x modelled decode_s_per_token",
        "basis": "estimated",
        "assumption": {"model": model, "gpu": gpu, "prefill_tokens_per_s": tps, "decode_s_per_token": spt},
        "thresholds": THRESHOLDS,
    }


def _has_phases(share: dict[str, Any] | None) -> bool:
    """Whether any step time is known to be prefill, decode or mixed (a training or non-LLM trace has none:
    no prefill/decode verdict is drawn from it)."""
    return bool(share) and any((share.get(k) or 0) > 0 for k in ("prefill_share", "decode_share", "mixed_share"))


def _classify_steps(share: dict[str, Any]) -> dict[str, Any]:
    """A profiler trace alone: prefill vs decode share of its step time."""
    from lltrace.classify import DOMINANT_SHARE, THRESHOLDS

    p, d = share["prefill_share"], share["decode_share"]
    label = "prefill-dominant" if p >= DOMINANT_SHARE else "decode-dominant" if d >= DOMINANT_SHARE else "balanced"
    basis = "GPU busy time" if share["basis"] == "gpu_busy" else "step wall time"
    return {
        "label": label,
        "why": f"from the profiler's engine steps: prefill {p:.0%}, decode {d:.0%}, mixed {share['mixed_share']:.0%} "
        f"of {basis} (no request-level source in this run)",
        "prefill_share": p,
        "decode_share": d,
        "queue_share": None,
        "crossover_input_tokens": None,
        "basis": "profiler steps",
        "thresholds": THRESHOLDS,
    }


def _attribution(a: dict[str, Any], kv: dict[str, Any] | None) -> dict[str, Any]:
    basis = {
        "overhead": "derived",
        "preempted": "measured" if a["preempted_s"] else "derived",
        "queue": a["queue_basis"],
        "prefill": a["prefill_basis"],
        "decode": a["decode_basis"],
    }
    out: dict[str, Any] = {
        c: {"total_s": a[f"{c}_s"], "share": a[f"{c}_share"], "basis": basis[c]} for c in _COMPONENTS
    }
    if not a["preempted_s"]:
        out["preempted"]["note"] = "no source timed preemptions: preempted time stays inside prefill/decode"
    kv_wait = kv["kv_wait_s"] if kv else None
    out["kv_wait"] = {
        "total_s": kv_wait,
        "share_of_parent": kv_wait / a["queue_s"] if kv_wait is not None and a["queue_s"] else None,
        "basis": "derived" if kv_wait is not None else None,
    }
    out["interference"] = {"total_s": None, "share_of_parent": None, "basis": None}
    out["requests"] = a["requests"]
    out["requests_incomplete"] = a["requests_incomplete"]
    out["clock_errors"] = a["clock_errors"]
    out["e2e_s_total"] = a["e2e_s"]
    out["prefill_tokens_per_s"] = a["prefill_tokens_per_s"]
    out["decode_s_per_token"] = a["decode_s_per_token"]
    return out


def _kv(con, views: set[str]) -> dict[str, Any] | None:
    if "engine_stats" not in views:
        return None
    peak, pre, waitcap = con.execute(
        "SELECT max(kv_usage), max(preemptions_total), max(waiting_capacity) FROM engine_stats"
    ).fetchone()
    kv_wait = None
    if "attribution_kv_wait" in views:
        (kv_wait,) = con.execute("SELECT sum(kv_wait_s) FROM attribution_kv_wait").fetchone()
    return {
        "peak_usage": _clean(peak),
        "preemptions": _clean(pre),
        "peak_waiting_capacity": _clean(waitcap),
        "kv_wait_s": _clean(kv_wait),
    }


def _requests(con, views: set[str]) -> dict[str, Any] | None:
    if "requests_summary" not in views:
        return None
    rows = _rows(con, "SELECT * EXCLUDE (run_id) FROM requests_summary")
    if not rows:
        return None
    r = rows[0]

    def dist(prefix: str) -> dict[str, Any] | None:
        d = {k: r[f"{prefix}_{k}"] for k in ("p50", "p90", "p99", "mean")}
        return None if all(v is None for v in d.values()) else d

    return {
        "count": r["requests"],
        "errors": r["errors"],
        "basis": r["basis"],
        "ttft_s": dist("ttft"),
        "tpot_s": dist("tpot"),
        "e2e_s": dist("e2e"),
        "queue_s": dist("queue"),
    }


def _profile(con, views: set[str]) -> dict[str, Any] | None:
    if "kernels" not in views:
        return None
    (n_kernels,) = con.execute("SELECT count(*) FROM kernels").fetchone()
    if not n_kernels:
        return {"gpu_ops": 0, "kernel_time": [], "gpu_busy": [], "attention_variants": [], "orphans": 0}
    return {
        "gpu_ops": n_kernels,
        "kernel_time": _rows(con, "SELECT * EXCLUDE (run_id) FROM profiler_kernel_time ORDER BY total_s DESC"),
        "gpu_busy": _rows(con, "SELECT * EXCLUDE (run_id) FROM profiler_gpu_busy ORDER BY part, device"),
        "attention_variants": _rows(
            con, "SELECT * EXCLUDE (run_id) FROM profiler_attention_variant ORDER BY total_s DESC"
        ),
        "orphans": con.execute("SELECT count(*) FROM kernels WHERE orphan").fetchone()[0],
        "cuda_graph_kernels": con.execute("SELECT count(*) FROM kernels WHERE cuda_graph").fetchone()[0],
    }

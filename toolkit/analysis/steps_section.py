"""The ``steps`` and ``profile`` sections of the analysis document: the engine's steps by kind
(``engine_steps_counts``, ``profiler_steps_by_kind``, ``profiler_phase_share``), each step with its roofline bound
where the model and GPU are known (``engine_steps_items``, ``lltrace.physics.roofline``), and the profiler's GPU
work (``profiler_counts``, ``profiler_kernel_time``, ``profiler_gpu_busy``, ``profiler_attention_variant``)."""

from __future__ import annotations

from typing import Any

import duckdb

from lltrace.analysis.sql import rows
from lltrace.documents.vocabulary import KindFrom, StepKind
from lltrace.physics.catalog import GPU, Model
from lltrace.physics.roofline import step_roofline
from lltrace.queries import thresholds


def profile_section(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The profiler's GPU work (the run has kernels)."""
    counts = (rows(con, "SELECT * EXCLUDE (run_id) FROM profiler_counts") or [{}])[0]
    if not counts.get("gpu_ops"):
        return {"gpu_ops": 0, "kernel_time": [], "gpu_busy": [], "attention_variants": [], "orphans": 0}
    return {
        "gpu_ops": counts["gpu_ops"],
        "kernel_time": rows(con, "SELECT * EXCLUDE (run_id) FROM profiler_kernel_time ORDER BY total_s DESC"),
        "gpu_busy": rows(con, "SELECT * EXCLUDE (run_id) FROM profiler_gpu_busy ORDER BY part, device"),
        "attention_variants": rows(
            con, "SELECT * EXCLUDE (run_id) FROM profiler_attention_variant ORDER BY total_s DESC"
        ),
        "orphans": counts["orphans"],
        "cuda_graph_kernels": counts["cuda_graph_kernels"],
    }


def steps_section(
    con: duckdb.DuckDBPyConnection, gpu: GPU | None, model: Model | None, profile: dict[str, Any] | None
) -> dict[str, Any]:
    """The engine's steps: a run may carry steps from its profiler trace and from the server's iteration log; the
    profiler's (with GPU data) are described, the other source's count is said beside them."""
    counts = con.execute("SELECT source, kind, steps FROM engine_steps_counts").fetchall()
    sources: dict[str, int] = {}
    for source, _, n in counts:
        sources[source] = sources.get(source, 0) + n
    src = "profiler" if sources.get("profiler") else "log" if sources.get("log") else None
    by_kind = {k.value: 0 for k in StepKind}
    unknown = 0
    for source, kind, n in counts:
        if src is not None and source != src:
            continue
        if kind in by_kind:
            by_kind[kind] += n
        else:
            unknown += n
    where, params = ("WHERE source = ?", [src]) if src else ("", [])
    order = "ORDER BY part, start_s, step_id"
    items = rows(con, f"SELECT * EXCLUDE (run_id, source) FROM engine_steps_items {where} {order}", params)
    for it in items:
        it["bound"] = None
        _roofline(it, gpu, model)
    kind_from: dict[str, int] = {}
    undecided: dict[str, int] = {}
    for it in items:
        if it["kind"] is not None:
            kind_from[it["kind_from"] or "unknown"] = kind_from.get(it["kind_from"] or "unknown", 0) + 1
        elif it["kind_why"]:
            undecided[it["kind_why"]] = undecided.get(it["kind_why"], 0) + 1
    return {
        "count": sum(by_kind.values()) + unknown,
        "count_by_kind": by_kind | ({"unknown": unknown} if unknown else {}),
        "count_by_kind_from": kind_from,
        "undecided": [{"why": why, "steps": n} for why, n in undecided.items()],
        "ranks": _ranks(items) if src == "profiler" else None,
        "source": src,
        "count_by_source": sources,
        "by_kind": rows(
            con, f"SELECT * EXCLUDE (run_id, source) FROM profiler_steps_by_kind {where} ORDER BY kind", params
        ),
        "phase_share": _phase_share(con, where, params, src, profile),
        "detection": sorted({it["detection"] for it in items if it["detection"]}),
        "bound_note": _bound_note(items, gpu, model),
        "decode_tokens_beyond_requests": _beyond(items),
        "items": items,
    }


def _phase_share(
    con: duckdb.DuckDBPyConnection, where: str, params: list[Any], src: str | None, profile: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Step time by phase; with GPU data, the GPU work no step holds (launched before the first detected step, or
    between steps no marker delimits) said beside it: the shares are of the steps' time only. It is the GPU's busy
    time less the steps' (each step's union of its own ops), floored at zero: at least that much lies outside."""
    share = rows(con, f"SELECT * EXCLUDE (run_id, source) FROM profiler_phase_share {where}", params)
    if not share:
        return None
    if src == "profiler" and share[0]["basis"] == "gpu_busy" and profile and profile["gpu_busy"]:
        traced = sum(r["busy_s"] for r in profile["gpu_busy"])
        outside = max(0.0, traced - share[0]["total_s"]) if traced else None
        shown = outside is not None and outside >= thresholds()["steps_outside_share_shown"] * traced
        share[0] |= {
            "gpu_busy_s": traced,
            "outside_steps_s": outside,
            "steps_hold": 1 - outside / traced if shown else None,  # said beside the shares where it matters
        }
    return share[0]


def _roofline(it: dict[str, Any], gpu: GPU | None, model: Model | None) -> None:
    """The step's roofline bound, intensity and least time, where the model, the GPU and its tokens are known."""
    if gpu is None or model is None:
        return
    tokens = it["shape_tokens"] or (it["prefill_tokens"] or 0) + (it["decode_tokens"] or 0)
    if not tokens:
        return
    reqs = it["shape_reqs"] or ((it["prefill_reqs"] or 0) + (it["decode_reqs"] or 0)) or None
    r = step_roofline(model, gpu, tokens, it["shape_context_tokens"], reqs)
    it["bound"] = r.bound
    it["arithmetic_intensity"] = round(r.intensity, 2)
    it["ridge_flops_per_byte"] = round(r.ridge, 2)
    it["roofline_min_s"] = r.min_time_s
    it["roofline_efficiency"] = r.min_time_s / it["gpu_busy_s"] if it["gpu_busy_s"] else None


def _bound_note(items: list[dict[str, Any]], gpu: GPU | None, model: Model | None) -> str | None:
    """Why no step has a roofline bound, where none has."""
    if gpu is None or model is None:
        return (
            "compute- vs memory-bound per step needs the model and the GPU: pass --model and --gpu "
            "(the GPU is read from deviceProperties when the trace has it)"
        )
    if items and not any(it["bound"] for it in items):
        return "compute- vs memory-bound per step needs each step's token count, which no step here has" + (
            " (their kinds came from the kernels, which do not give counts: trace with record_shapes=True "
            "or keep the engine's step markers)"
            if any(it["kind_from"] == KindFrom.KERNELS for it in items)
            else ""
        )
    return None


def _beyond(items: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Decode steps' tokens beyond one per decoding request: speculative decoding's draft tokens (vLLM counts the
    tokens it verified), or a request resumed after preemption recomputing its tokens."""
    counted = [
        it for it in items if it["kind"] == StepKind.DECODE and it["decode_reqs"] and it["decode_tokens"] is not None
    ]
    beyond = [it["decode_tokens"] - it["decode_reqs"] for it in counted]
    if not any(b > 0 for b in beyond):
        return None
    return {
        "tokens": sum(b for b in beyond if b > 0),
        "steps": sum(b > 0 for b in beyond),
        "decode_steps": len(counted),
    }


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

"""Forward passes read from attention ops' input shapes (``record_shapes``): how many tokens and requests one
forward ran, whether it was a decode, and where a trace's forward passes begin and end when no marker says.

A forward's attention op takes the query as its first input: ``[T, H, D]`` for vLLM's varlen attention,
``[B, H, S, D]`` for SDPA, ``[B, S, H, D]`` for FlashAttention's forward (S the query length: 1 in a decode).
"""

from __future__ import annotations

import bisect
import json
from typing import Any

import duckdb

from lltrace.parsers.kineto_tables import LAUNCH_CATS


def _dims(text: str | None) -> list | None:
    if not text:
        return None
    try:
        v = json.loads(text)
    except ValueError:
        return None
    return v if isinstance(v, list) else None


def shape_reading(op_name: str, input_dims: str | None) -> dict[str, int | None] | None:
    """Token and request counts implied by one attention op's input shapes (None if not readable)."""
    dims = _dims(input_dims)
    if not dims or not isinstance(dims[0], list):
        return None
    q = dims[0]
    if "unified_attention" in op_name and len(q) == 3:
        return {"tokens": q[0], "reqs": None, "query_len": None, "context": None}
    if "cpu_attention_with_kv_cache" in op_name and len(q) == 3:
        reqs = dims[4][0] - 1 if len(dims) > 4 and isinstance(dims[4], list) and len(dims[4]) == 1 else None
        return {"tokens": q[0], "reqs": reqs, "query_len": None, "context": None}
    if ("scaled_dot_product" in op_name) and len(q) == 4:
        k = dims[1] if len(dims) > 1 and isinstance(dims[1], list) and len(dims[1]) == 4 else None
        return {"tokens": q[0] * q[2], "reqs": q[0], "query_len": q[2], "context": k[0] * k[2] if k else None}
    if op_name.endswith("_flash_attention_forward") and len(q) == 4:
        return {"tokens": q[0] * q[1], "reqs": q[0], "query_len": q[1], "context": None}
    return None


def merged_shape_reading(ops: list[tuple[str, str]]) -> tuple[str | None, dict | None]:
    """Combine the readings of a step's attention ops (the first op that gives each count wins)."""
    merged: dict[str, int | None] = {"tokens": None, "reqs": None, "query_len": None, "context": None}
    names = []
    for name, dims in ops:
        reading = shape_reading(name, dims)
        if reading is None:
            continue
        names.append(name)
        for k, v in reading.items():
            if merged[k] is None and v is not None:
                merged[k] = v
    if not names:
        return None, None
    return "+".join(dict.fromkeys(names)), merged


# (TorchInductor records each Triton kernel it launches as a CPU op named for the ATen ops it fuses,
# ``triton_poi_fused__scaled_dot_product_…``: those prepare attention's inputs and their shapes are not its query's)
ATTN_OPS_SQL = (
    "((name LIKE '%unified_attention%' OR name LIKE '%cpu_attention_with_kv_cache%' "
    "OR name LIKE '%scaled_dot_product%' OR name LIKE '%_flash_attention_forward') "
    "AND NOT starts_with(name, 'triton_'))"
)


def step_row(name: str, pid: Any, tid: Any, ts: int, dur: int | None, marker: Any = None, ext: Any = None) -> dict:
    """One detected step: its CPU span and what its marker says (``marker``: an object with ``kind`` and the
    four counts, ``kineto_steps.Marker``; None where the step has no marker that says any)."""
    return dict(
        marker=name,
        pid=pid,
        tid=tid,
        start_ns=ts,
        end_ns=ts + (dur or 0),
        external_id=ext,
        kind=marker.kind if marker else None,
        prefill_reqs=marker.prefill_reqs if marker else None,
        prefill_tokens=marker.prefill_tokens if marker else None,
        decode_reqs=marker.decode_reqs if marker else None,
        decode_tokens=marker.decode_tokens if marker else None,
    )


def public_step(step: dict) -> dict:
    """A step without the working keys (``_key``, ``_own``) its detection kept on it."""
    return {k: v for k, v in step.items() if not k.startswith("_")}


def holds_prefill_and_decode(marked: list[dict], passes: list[dict]) -> bool:
    """Whether a ``ProfilerStep#N`` holds several forward passes: then it is a loop iteration of the user's (HF
    ``generate()``: a prefill and its decodes), not one engine iteration, and the passes are the steps. Several
    passes are surely several forwards where one is a module call or a compiled forward's call, or where
    one reads decode and another does not. A step holding only prefill passes (layers that attend over different
    shapes, or several prompts), or only decode passes (sliding-window layers read other key lengths), keeps its
    marker."""
    for m in marked:
        inside = [s for s in passes if s["pid"] == m["pid"] and m["start_ns"] <= s["start_ns"] <= m["end_ns"]]
        kinds = {s["_own"] for s in inside}
        if len(inside) >= 2 and (kinds & {"compiled", "module"} or kinds >= {"decode", None}):
            return True
    return False


def kind_of_reading(reading: dict[str, int | None] | None) -> str | None:
    """The forward's kind its shapes say: a query longer than one token (or more tokens than requests) is a
    prefill, one token per request a decode; None where they do not say."""
    if reading is None:
        return None
    ql, tok, reqs = reading["query_len"], reading["tokens"], reading["reqs"]
    if ql is not None:
        return "prefill" if ql > 1 else "decode"
    if tok is not None and reqs is not None:
        return "decode" if tok == reqs else "prefill" if tok > reqs else None
    return None


def pass_reads_decode(op_name: str, dims: str | None) -> bool:
    """Whether one attention op's input shapes read as a decode forward (one new token per request)."""
    return kind_of_reading(shape_reading(op_name, dims)) == "decode"


# a CUDA/HIP graph launch (cudaGraphLaunch, hipGraphLaunch), and the launch-side events that bound a stream capture
GRAPH_LAUNCH_SQL = f"cat IN {LAUNCH_CATS} AND name ILIKE '%GraphLaunch%'"
_GRAPH_EVENTS_SQL = (
    f"cat IN {LAUNCH_CATS} AND (name ILIKE '%GraphLaunch%' OR name ILIKE '%StreamBeginCapture%' "
    "OR name ILIKE '%StreamEndCapture%')"
)


def compiled_passes(con: duckdb.DuckDBPyConnection, window: tuple[int, int] | None = None) -> list[dict]:
    """Forward passes run by a torch.compile'd forward (HF ``generate()`` compiles its decoding forward): each
    outermost ``Torch-Compiled Region`` (Dynamo's record of one call of the compiled function) that runs attention
    or launches a CUDA graph (mode ``reduce-overhead``). Attention ops inside a stream capture are recorded into the
    graph the region then launches, so their shapes are the replay's; a region that launches a graph and runs no
    attention op itself is marked a CUDA-graph replay. One region is taken for one forward: a forward split by graph
    breaks, or a model compiled layer by layer, would count once per piece. ``window`` as for
    :func:`forward_passes_from_shapes`."""
    lo, hi = window or (None, None)
    where = "($lo IS NULL OR ts_ns >= $lo) AND ($hi IS NULL OR ts_ns <= $hi)"
    rows = con.execute(
        f"""
        WITH r AS (SELECT name, pid, tid, ts_ns, ts_ns + dur_ns AS end_ns FROM ops
                   WHERE cat = 'cpu_op' AND starts_with(name, 'Torch-Compiled Region') AND dur_ns IS NOT NULL
                     AND {where}),
        top AS (SELECT * FROM r a WHERE NOT EXISTS (
                    SELECT 1 FROM r b WHERE b.pid = a.pid AND b.tid = a.tid AND b.ts_ns <= a.ts_ns
                    AND b.end_ns >= a.end_ns AND (b.ts_ns < a.ts_ns OR b.end_ns > a.end_ns))),
        ev AS (SELECT pid, tid, ts_ns,
                      CASE WHEN name ILIKE '%GraphLaunch%' THEN 'launch' WHEN name ILIKE '%BeginCapture%' THEN 'begin'
                           WHEN name ILIKE '%EndCapture%' THEN 'end' ELSE 'attention' END AS what
               FROM ops WHERE (({_GRAPH_EVENTS_SQL}) OR (cat = 'cpu_op' AND {ATTN_OPS_SQL})) AND {where})
        SELECT top.name, top.pid, top.tid, top.ts_ns, top.end_ns, list(ev.what ORDER BY ev.ts_ns)
        FROM top JOIN ev ON ev.pid = top.pid AND ev.tid = top.tid AND ev.ts_ns BETWEEN top.ts_ns AND top.end_ns
        GROUP BY ALL ORDER BY top.ts_ns
        """,
        {"lo": lo, "hi": hi},
    ).fetchall()
    passes = []
    for name, pid, tid, ts, end, events in rows:
        capturing, eager_attention = False, False
        for what in events:
            capturing = what == "begin" or (capturing and what != "end")
            eager_attention |= what == "attention" and not capturing
        if "launch" in events or "attention" in events:
            marker = f"{name} (CUDA graph replay)" if "launch" in events and not eager_attention else name
            passes.append(step_row(marker, pid, tid, ts, end - ts) | {"_own": "compiled"})
    return passes


def _outermost(rows: list[tuple]) -> list[tuple]:
    """Of ``(name, pid, tid, ts_ns, dur_ns, ...)`` rows sorted by thread, start and longest first, those no other
    row of their thread encloses."""
    out, outer = [], (None, None, -1)
    for r in rows:
        if (r[1], r[2]) == outer[:2] and r[3] < outer[2]:
            continue
        out.append(r)
        outer = (r[1], r[2], r[3] + (r[4] or 0))
    return out


def module_passes(con: duckdb.DuckDBPyConnection, window: tuple[int, int] | None = None) -> list[dict]:
    """Forward passes the profiler's Python stacks delimit (``with_stack=True``): each outermost module call
    (``nn.Module: LlamaForCausalLM_0``, the python_function frame PyTorch's tracer records for a module's
    ``__call__``) that runs attention. Unlike a pass read from its attention ops, it begins and ends where the
    forward does. ``window`` as for :func:`forward_passes_from_shapes`."""
    lo, hi = window or (None, None)
    where = "($lo IS NULL OR ts_ns >= $lo) AND ($hi IS NULL OR ts_ns <= $hi)"
    frames = con.execute(
        f"""
        SELECT name, pid, tid, ts_ns, dur_ns FROM ops
        WHERE cat = 'python_function' AND starts_with(name, 'nn.Module: ') AND dur_ns IS NOT NULL AND {where}
        ORDER BY pid, tid, ts_ns, dur_ns DESC
        """,
        {"lo": lo, "hi": hi},
    ).fetchall()
    if not frames:
        return []
    attention: dict[tuple, list[int]] = {}
    for pid, tid, ts in con.execute(
        f"SELECT pid, tid, ts_ns FROM ops WHERE cat = 'cpu_op' AND {ATTN_OPS_SQL} AND {where} ORDER BY ts_ns",
        {"lo": lo, "hi": hi},
    ).fetchall():
        attention.setdefault((pid, tid), []).append(ts)
    passes = []
    for name, pid, tid, ts, dur in _outermost(frames):
        times = attention.get((pid, tid), [])
        if bisect.bisect_right(times, ts + dur) > bisect.bisect_left(times, ts):
            passes.append(step_row(name, pid, tid, ts, dur) | {"_own": "module"})
    return passes


def _calls(modules: list[dict], regions: list[dict]) -> list[dict]:
    """Module calls and compiled regions as passes, in start order: a region inside a module call is part of it."""
    spans: dict[tuple, tuple[list[int], list[int]]] = {}
    for m in modules:
        starts, ends = spans.setdefault((m["pid"], m["tid"]), ([], []))
        starts.append(m["start_ns"])
        ends.append(m["end_ns"])
    inside = []
    for r in regions:
        starts, ends = spans.get((r["pid"], r["tid"]), ([], []))
        i = bisect.bisect_right(starts, r["start_ns"]) - 1
        inside.append(i >= 0 and r["start_ns"] <= ends[i])
    return sorted(
        modules + [r for r, nested in zip(regions, inside, strict=True) if not nested],
        key=lambda s: (s["pid"], s["tid"], s["start_ns"]),
    )


def forward_passes_from_shapes(
    con: duckdb.DuckDBPyConnection, window: tuple[int, int] | None = None, compiled: bool = False
) -> list[dict]:
    """Forward passes of a trace with no markers at all: runs of attention ops with the same input shapes, and
    with ``compiled`` the calls of a torch.compile'd forward (:func:`compiled_passes`), whose attention ops are
    theirs.

    Every layer of one forward calls attention with the same shapes; the next forward changes them (a
    decode step's key grows by one token, a new prompt has another length). A pass runs from its first
    attention op to the start of the next pass on its thread that is surely a forward of its own (a decode or a
    compiled forward's call: the generation loop's period, the rest of its forward, sampling, the next forward's
    start), else to its last attention op's end (then the attention part of the pass only: a lower bound).
    ``window``: only the ops that start in [from, to] ns (the Parquet row groups outside it are not read).
    """
    lo, hi = window or (None, None)
    found = con.execute(
        f"""
        SELECT name, pid, tid, ts_ns, dur_ns, input_dims FROM ops
        WHERE cat = 'cpu_op' AND input_dims IS NOT NULL AND {ATTN_OPS_SQL}
          AND ($lo IS NULL OR ts_ns >= $lo) AND ($hi IS NULL OR ts_ns <= $hi)
        ORDER BY pid, tid, ts_ns, dur_ns DESC
        """,
        {"lo": lo, "hi": hi},
    ).fetchall()
    # one attention call per layer: the outermost attention op (SDPA dispatches to a backend's op inside it, while
    # compiled code calls that backend op itself, ``aten::_scaled_dot_product_cudnn_attention`` and the like)
    rows = _outermost(found)
    calls = _calls(module_passes(con, window), compiled_passes(con, window)) if compiled else []
    regions: dict[tuple, tuple[list[int], list[int]]] = {}
    for r in calls:  # (in start order; the calls do not overlap on one thread)
        starts, ends = regions.setdefault((r["pid"], r["tid"]), ([], []))
        starts.append(r["start_ns"])
        ends.append(r["end_ns"])
    steps: list[dict] = []
    for name, pid, tid, ts, dur, dims in rows:
        starts, ends = regions.get((pid, tid), ([], []))
        i = bisect.bisect_right(starts, ts) - 1
        if i >= 0 and ts <= ends[i]:
            continue  # run by a module call or a compiled forward (or captured into its graph): that call is the pass
        last = steps[-1] if steps else None
        # a run of one shape ends where a module call or a compiled forward (another pass) came between its ops
        if last and last["_key"] == (pid, tid, name, dims) and bisect.bisect_right(starts, last["start_ns"]) == i + 1:
            last["end_ns"] = max(last["end_ns"], ts + (dur or 0))
            continue
        steps.append(step_row(f"{name} {dims}", pid, tid, ts, dur) | {"_key": (pid, tid, name, dims)})
    for s in steps:
        _, _, name, dims = s.pop("_key")
        s["_own"] = "decode" if pass_reads_decode(name, dims) else None
    steps = sorted(steps + calls, key=lambda s: (s["pid"], s["tid"], s["start_ns"]))
    # (in thread order) a decode pass or a compiled forward's call continues the generation loop of the pass before it
    for cur, nxt in zip(steps, steps[1:], strict=False):
        if nxt["_own"] and (nxt["pid"], nxt["tid"]) == (cur["pid"], cur["tid"]):
            cur["end_ns"] = max(cur["end_ns"], nxt["start_ns"])
    return sorted(steps, key=lambda s: s["start_ns"])

"""Engine iterations (``engine_steps``) recovered from a profiler trace's staged tables.

Markers are tried in this order and the first family present defines the steps:

1. vLLM ``execute_context_N(T)_generation_M(G)`` (also ``T_attn`` suffixes) and ``execute_new_N_cached_M``;
2. SGLang ``step[EXTEND|DECODE|MIXED|IDLE bs=… toks=…]``;
3. TraceLens' detailed ``execute_K_context_N(sq…sk…)_generation_M(sq…sk…)``;
4. ``record_function`` ranges named for a phase (``prefill``, ``decode``, ``decode_step``, ``extend``);
5. ``ProfilerStep#N``: the user's loop iteration, one engine iteration only where it holds one forward. Where the
   loop's steps hold a decode pass and a pass that is not (an HF ``generate()`` profiled per call: a prefill and its
   decodes; judged on its first eight steps), they give way to the forward passes, found as in 8
   (``attention_shapes_in_profiler_step``), each call of a torch.compile'd forward (``Torch-Compiled Region``,
   CUDA-graph replays included) and each outermost module call that runs attention (``nn.Module: …``, with
   ``with_stack``) being one;
6. vLLM worker ``execute_model`` frames (python_function, kept for this);
7. CUDA graph launches (one replay = one step; its kind comes from the shapes);
8. with no marker at all, forward passes as runs of attention ops with identical input shapes, the calls of a
   torch.compile'd forward and the outermost module calls that run attention.

Independently of the marker, the step's input shapes are read from its attention op (query ``[T, H, D]``
for vLLM's varlen attention, ``[B, H, S, D]`` for SDPA): ``shape_tokens``, ``shape_reqs``,
``shape_query_len``. When the marker gives no kind or counts, the shapes decide (query length > 1 or
tokens > requests = prefill).

GPU work is attributed to a step when its launch (CPU, same process) falls inside the step's CPU span;
kernels replayed from a CUDA graph share the graph launch's correlation and so follow it. GPU work with
no launch in the trace (launched before the window opened) is attributed by GPU time to the step whose
span contains it, and flagged as ``orphan`` in ``kernels``.
"""

from __future__ import annotations

import bisect
import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lltrace.arrow_rows import table_from_rows
from lltrace.cores import usable_cores
from lltrace.parsers.kernel_classes import launched_every_step
from lltrace.parsers.kineto import STEPS_MEMORY
from lltrace.parsers.kineto_passes import (
    ATTN_OPS_SQL,
    GRAPH_LAUNCH_SQL,
    forward_passes_from_shapes,
    holds_prefill_and_decode,
    kind_of_reading,
    merged_shape_reading,
    public_step,
    step_row,
)
from lltrace.tables import ENGINE_STEPS, KERNEL_TIME_CLASSES

_VLLM = re.compile(r"^execute_context_(\d+)\((\d+)(?:_\d+)?\)_generation_(\d+)\((\d+)(?:_\d+)?\)$")
_VLLM_NEW_CACHED = re.compile(r"^execute_new_(\d+)_cached_(\d+)$")
_SGLANG = re.compile(r"^step\[(EXTEND|DECODE|MIXED|IDLE|PREFILL)\b([^\]]*)\]$", re.IGNORECASE)
_TRACELENS = re.compile(r"^execute_(\d+)_context_(\d+)\(sq(\d+)sk\d+[^)]*\)_generation_(\d+)\(sq(\d+)sk\d+[^)]*\)$")
_PHASE = re.compile(r"^(prefill|prefill_step|extend|decode|decode_step|generate_step)$", re.IGNORECASE)
_PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")

# family name, priority (lower wins)
FAMILIES = {
    "vllm": 1,
    "vllm_new_cached": 2,
    "sglang": 3,
    "tracelens": 4,
    "phase_annotation": 5,
    "profiler_step": 6,
    "execute_model": 7,
    "cuda_graph": 8,
    "attention_shapes": 9,
}


@dataclass
class Marker:
    """What one annotation name says about its step."""

    family: str
    kind: str | None
    prefill_reqs: int | None = None
    prefill_tokens: int | None = None
    decode_reqs: int | None = None
    decode_tokens: int | None = None


def _kind(prefill_tokens: int | None, decode_tokens: int | None, prefill_reqs=None, decode_reqs=None) -> str:
    p = (prefill_tokens or 0) > 0 or (prefill_tokens is None and (prefill_reqs or 0) > 0)
    d = (decode_tokens or 0) > 0 or (decode_tokens is None and (decode_reqs or 0) > 0)
    return "mixed" if p and d else "prefill" if p else "decode" if d else "idle"


def parse_marker(name: str) -> Marker | None:
    """Read an annotation name as a step marker, or None when it is not one."""
    if m := _VLLM.match(name):
        nc, tc, ng, tg = (int(x) for x in m.groups())
        return Marker("vllm", _kind(tc, tg), nc, tc, ng, tg)
    if m := _VLLM_NEW_CACHED.match(name):
        new, cached = int(m.group(1)), int(m.group(2))
        # Token counts are not in this marker; new requests prefill, cached ones continue (mostly decode).
        return Marker("vllm_new_cached", _kind(None, None, new, cached), new, None, cached, None)
    if m := _SGLANG.match(name):
        mode = m.group(1).upper()
        fields = dict(re.findall(r"(\w+)=(\d+)", m.group(2)))
        bs = int(fields["bs"]) if "bs" in fields else None
        toks = int(fields["toks"]) if "toks" in fields else None
        if mode in ("EXTEND", "PREFILL"):
            return Marker("sglang", "prefill", bs, toks, 0, 0)
        if mode == "DECODE":
            # A DECODE forward carries one new token per request (no speculative decoding markers here).
            return Marker("sglang", "decode", 0, 0, bs, bs)
        if mode == "MIXED":
            # bs counts prefill and decode requests together; the split is not in the marker.
            return Marker("sglang", "mixed", None, toks, None, None)
        return Marker("sglang", "idle", 0, 0, 0, 0)
    if m := _TRACELENS.match(name):
        _, nc, sqc, ng, sqg = (int(x) for x in m.groups())
        return Marker("tracelens", _kind(sqc, sqg), nc, sqc, ng, sqg)
    if m := _PHASE.match(name):
        word = m.group(1).lower()
        kind = "prefill" if word.startswith(("prefill", "extend")) else "decode"
        return Marker("phase_annotation", kind)
    if _PROFILER_STEP.match(name):
        return Marker("profiler_step", None)
    return None


def _candidate_markers(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    rows = con.execute(
        """
        SELECT name, pid, tid, ts_ns, dur_ns, external_id FROM annotations WHERE NOT on_gpu
        UNION ALL
        SELECT name, pid, tid, ts_ns, dur_ns, external_id FROM ops
        WHERE cat = 'cpu_op' AND (starts_with(name, 'execute_') OR starts_with(name, 'step[')
              OR starts_with(name, 'ProfilerStep#') OR starts_with(name, 'prefill') OR starts_with(name, 'decode'))
        ORDER BY ts_ns
        """
    ).fetchall()
    return rows


_FIRST_MARKED = 8  # a trace's ProfilerSteps are one loop of the user's: its first ones show what each holds


def _loop_holds_generations(con: duckdb.DuckDBPyConnection, marked: list[dict]) -> bool:
    """Whether the user's loop (``ProfilerStep#N``) runs a whole generation per iteration, judged on its first
    ``_FIRST_MARKED`` steps: only their stretch of the trace is read (a 2 GB trace's 400 steps of one forward each
    are not scanned for passes they do not hold)."""
    first = sorted(marked, key=lambda m: m["start_ns"])[:_FIRST_MARKED]
    window = (first[0]["start_ns"], max(m["end_ns"] for m in first))
    return holds_prefill_and_decode(first, forward_passes_from_shapes(con, window, compiled=True))


def _fit_to_iterations(passes: list[dict], marked: list[dict]) -> None:
    """End each pass no later than the loop iteration (``ProfilerStep#N`` of its process) it started in, and the
    last pass of each iteration at the iteration's end (the rest of its generation loop: sampling, the stop check),
    as every earlier pass runs to the next one's start. The iteration is found by bisection: a long trace's passes
    times its iterations would be too many to compare pairwise."""
    by_pid: dict[Any, tuple[list[int], list[dict]]] = {}
    for m in sorted(marked, key=lambda m: m["start_ns"]):
        starts, rows = by_pid.setdefault(m["pid"], ([], []))
        starts.append(m["start_ns"])
        rows.append(m)
    last: dict[tuple[Any, int], dict] = {}
    for s in passes:
        starts, rows = by_pid.get(s["pid"], ([], []))
        i = bisect.bisect_right(starts, s["start_ns"]) - 1
        if i >= 0 and s["start_ns"] <= rows[i]["end_ns"]:  # (iterations of one loop do not nest)
            s["end_ns"] = min(s["end_ns"], rows[i]["end_ns"])
            if (s["pid"], i) not in last or s["start_ns"] >= last[(s["pid"], i)]["start_ns"]:
                last[(s["pid"], i)] = s
    for (pid, i), s in last.items():
        s["end_ns"] = by_pid[pid][1][i]["end_ns"]


def _find_steps(con: duckdb.DuckDBPyConnection) -> tuple[str | None, list[dict]]:
    """The steps of the highest-priority family present (see the module docstring)."""
    found: dict[str, list[dict]] = {}
    for name, pid, tid, ts, dur, ext in _candidate_markers(con):
        marker = parse_marker(name)
        if marker is not None:
            found.setdefault(marker.family, []).append(step_row(name, pid, tid, ts, dur, marker, ext))
    if found:
        family = min(found, key=FAMILIES.__getitem__)
        if family == "profiler_step" and _loop_holds_generations(con, found[family]):
            passes = forward_passes_from_shapes(con, compiled=True)
            _fit_to_iterations(passes, found[family])
            return "attention_shapes_in_profiler_step", [public_step(s) for s in passes]
        return family, found[family]
    # vLLM worker frames: the outermost execute_model of each thread.
    rows = con.execute(
        """
        WITH em AS (SELECT name, pid, tid, ts_ns, dur_ns FROM ops
                    WHERE cat = 'python_function' AND name LIKE '%execute_model%')
        SELECT a.name, a.pid, a.tid, a.ts_ns, a.dur_ns FROM em a
        WHERE NOT EXISTS (SELECT 1 FROM em b WHERE b.pid = a.pid AND b.tid = a.tid
                          AND b.ts_ns <= a.ts_ns AND b.ts_ns + b.dur_ns >= a.ts_ns + a.dur_ns
                          AND (b.ts_ns < a.ts_ns OR b.dur_ns > a.dur_ns))
        ORDER BY a.ts_ns
        """
    ).fetchall()
    if rows:
        return "execute_model", [step_row(*r) for r in rows]
    # CUDA graph replays: one launch is one step; a replay is usually decode, but only the shapes can say.
    rows = con.execute(
        f"SELECT name, pid, tid, ts_ns, dur_ns FROM ops WHERE {GRAPH_LAUNCH_SQL} ORDER BY ts_ns"
    ).fetchall()
    if rows:
        return "cuda_graph", [step_row(*r) for r in rows]
    steps = [public_step(s) for s in forward_passes_from_shapes(con, compiled=True)]
    return ("attention_shapes" if steps else None), steps


# a backward pass: the kernels autograd launches (PyTorch's *_backward / *Backward*, cuDNN/CUTLASS wgrad and
# dgrad, FlashAttention's bwd); a step that runs them is a training step, never prefill or decode
_BACKWARD = r"(?i)backward|_bwd|bwd_|wgrad|dgrad"


@dataclass(frozen=True)
class KindRule:
    """One row of step_kinds.csv: the kind it gives (None: no kind) when every condition it sets holds."""

    kind: str | None
    conditions: dict[str, str]
    why: str


@lru_cache(maxsize=1)
def kind_rules() -> tuple[KindRule, ...]:
    """The packaged rules that read a step's kind from its kernels, in match order."""
    text = resources.files("lltrace.parsers").joinpath("step_kinds.csv").read_text()
    out = []
    for row in csv.DictReader(text.splitlines()):
        why = row.pop("why")
        kind = row.pop("kind") or None
        out.append(KindRule(kind, {k: v for k, v in row.items() if v}, why))
    return tuple(out)


def step_kind_from_kernels(ev: dict[str, Any]) -> tuple[str | None, str | None]:
    """The step's kind by the first rule of step_kinds.csv its kernel evidence satisfies, and the rule's why;
    (None, None) when no rule applies."""
    for rule in kind_rules():
        ok = True
        for key, want in rule.conditions.items():
            if key == "busy_share_below":
                share = ev.get("busy_share")
                ok = share is not None and share < float(want)
            else:
                ok = bool(ev.get(key)) == (want == "yes")
            if not ok:
                break
        if ok:
            return rule.kind, rule.why
    return None, None


def _kernel_evidence(con: duckdb.DuckDBPyConnection, busy: dict[int, tuple[int, int, int]]) -> dict[int, dict]:
    """Per step, what its kernels say (the conditions of step_kinds.csv): backward kernels, any attention or GEMM,
    attention of each variant, attention run eager or inside a graph, GPU busy time over the median step's."""
    decoders = [
        r[0]
        for r in con.execute(
            "SELECT DISTINCT n.name FROM attributed a JOIN kernel_names n USING (name_id) "
            "WHERE a.kernel_class = 'attention' AND a.attention_variant = 'decode'"
        ).fetchall()
    ]
    # per kernel name, once: a backward kernel's name, and whether the name is launched in every step
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE name_flags AS SELECT name_id, regexp_matches(name, '{_BACKWARD}') AS backward, "
        "list_contains(?::VARCHAR[], name) AS every_step FROM kernel_names",
        [launched_every_step(decoders)],
    )
    rows = con.execute(
        """
        SELECT step_id,
               bool_or(backward) AS backward,
               bool_or(kernel_class IN ('attention', 'gemm')) AS compute,
               bool_or(kernel_class = 'attention' AND attention_variant = 'prefill') AS prefill_attention,
               bool_or(kernel_class = 'attention' AND attention_variant = 'decode') AS decode_attention,
               bool_or(kernel_class = 'attention' AND attention_variant = 'decode'
                       AND NOT coalesce(every_step, false)) AS decode_attention_conditional,
               bool_or(kernel_class = 'attention' AND NOT coalesce(cuda_graph, false)) AS attention_eager,
               bool_or(kernel_class = 'attention' AND coalesce(cuda_graph, false)) AS attention_in_graph
        FROM attributed LEFT JOIN name_flags USING (name_id) WHERE kernel_class <> 'sync' GROUP BY step_id
        """
    ).fetchall()
    anywhere = bool(con.execute("SELECT count(*) FROM attributed WHERE kernel_class = 'attention'").fetchone()[0])
    times = sorted(b for b, _, _ in busy.values() if b)
    median = times[len(times) // 2] if times else None
    out = {}
    for step_id, *flags in rows:
        ev = dict(
            zip(
                (
                    "backward",
                    "compute",
                    "prefill_attention",
                    "decode_attention",
                    "decode_attention_conditional",
                    "attention_eager",
                    "attention_in_graph",
                ),
                flags,
                strict=True,
            )
        )
        b = busy.get(step_id, (None,))[0]
        ev["busy_share"] = b / median if b is not None and median else None
        ev["attention_in_trace"] = anywhere
        out[step_id] = ev
    return out


_STEPS_IN = pa.schema(
    [
        ("step_id", pa.int64()),
        ("pid", pa.string()),
        ("tid", pa.string()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
    ]
)


def _busy_intervals(con: duckdb.DuckDBPyConnection) -> dict[int, tuple[int, int, int]]:
    """Per step: the union of its attributed GPU intervals (synchronisation excluded) as (busy ns, first
    start, last end). Intervals sorted by start; an interval starting after every earlier one has ended
    opens a new busy island. Computed over arrays, each step's times lifted above the previous step's."""
    cols = con.execute(
        "SELECT step_id, ts_ns, ts_ns + dur_ns FROM attributed WHERE kernel_class <> 'sync' AND dur_ns >= 0 "
        "ORDER BY step_id, ts_ns, ts_ns + dur_ns"
    ).fetchnumpy()
    step, s, e = (np.asarray(cols[k], dtype=np.int64) for k in cols)
    if len(step) == 0:
        return {}
    first = np.flatnonzero(np.r_[True, step[1:] != step[:-1]])  # each step's first interval
    group = np.cumsum(np.r_[True, step[1:] != step[:-1]]) - 1
    t0, span = int(s.min()), int(e.max()) - int(s.min()) + 1
    if span * len(first) >= 2**62:  # lifting would overflow: step by step instead
        parts = np.split(np.arange(len(step)), first[1:])
    else:
        parts = None
    if parts is None:
        lift = group * span
        ls, le = s - t0 + lift, e - t0 + lift
        run_end = np.maximum.accumulate(le)
        opens = np.r_[True, ls[1:] > run_end[:-1]]
        opens[first] = True
        island = np.flatnonzero(opens)
        island_end = run_end[np.r_[island[1:] - 1, len(step) - 1]]
        lengths = island_end - ls[island]
        busy = np.add.reduceat(lengths, np.searchsorted(island, first))
        last = run_end[np.r_[first[1:] - 1, len(step) - 1]] - lift[first] + t0
        return {int(step[f]): (int(b), int(s[f]), int(x)) for f, b, x in zip(first, busy, last, strict=True)}
    out = {}
    for idx in parts:
        ss, ee = s[idx], e[idx]
        run_end = np.maximum.accumulate(ee)
        opens = np.r_[True, ss[1:] > run_end[:-1]]
        island = np.flatnonzero(opens)
        island_end = run_end[np.r_[island[1:] - 1, len(ss) - 1]]
        out[int(step[idx[0]])] = (int((island_end - ss[island]).sum()), int(ss[0]), int(run_end[-1]))
    return out


def detect_steps(stage: Path, part: int) -> tuple[pa.Table, dict]:
    """Compute the ``engine_steps`` rows of one staged trace; returns the table and a detection summary."""
    con = duckdb.connect()
    con.execute(
        f"SET threads = {usable_cores()}; SET memory_limit = '{STEPS_MEMORY}'; SET temp_directory = '{stage}/_tmp'; "
        "SET enable_progress_bar = false"
    )
    for t in ("kernels", "ops", "annotations"):
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{stage}/{t}/part-{part:05d}.*parquet')")

    family, steps = _find_steps(con)
    summary = {"family": family, "steps": len(steps)}
    if not steps:
        con.close()
        return ENGINE_STEPS.schema.empty_table(), summary

    for i, s in enumerate(steps):
        s["step_id"] = i
    con.register(
        "steps_in",
        table_from_rows(steps, _STEPS_IN),
    )
    # Next step's start bounds where orphan GPU work is looked for.
    con.execute(
        """
        CREATE TEMP TABLE st AS
        SELECT *, lead(start_ns) OVER (ORDER BY start_ns) AS next_start_ns FROM steps_in
        """
    )
    # Kernel names are long and few: the joins carry a number for each (kernel_names), so that what they hold in
    # memory is a few integers per kernel whatever the trace's size. The number is the name's hash where no two of
    # the trace's names share one (checked; else their rank, joined back by name: on a 2 GB trace's 693,042 kernels
    # the hashes take 0.01 s, the join 0.10-0.18 s).
    con.execute(
        "CREATE TEMP TABLE kernel_names AS SELECT name, hash(name) AS name_id FROM (SELECT DISTINCT name FROM kernels)"
    )
    (hashed,) = con.execute("SELECT count(DISTINCT name_id) = count(*) FROM kernel_names").fetchone()
    if hashed:
        named = "(SELECT *, CASE WHEN name IS NOT NULL THEN hash(name) END AS name_id FROM kernels) k"
    else:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE kernel_names AS "
            "SELECT name, row_number() OVER (ORDER BY name) AS name_id FROM (SELECT DISTINCT name FROM kernels)"
        )
        named = "(SELECT k.*, n.name_id FROM kernels k LEFT JOIN kernel_names n ON n.name = k.name) k"
    con.execute(
        f"""
        CREATE TEMP TABLE attributed AS
        WITH k AS (
            SELECT k.ts_ns, k.dur_ns, k.kernel_class, k.cuda_graph, k.correlation, k.orphan, k.attention_variant,
                   k.launch_pid, k.launch_ts_ns, k.name_id
            FROM {named}
        ), launched AS (
            SELECT s.step_id, k.ts_ns, k.dur_ns, k.kernel_class, k.cuda_graph, k.correlation, k.orphan,
                   k.attention_variant, k.name_id
            FROM k
            ASOF JOIN st s ON k.launch_pid = s.pid AND k.launch_ts_ns >= s.start_ns
            WHERE NOT k.orphan AND k.launch_ts_ns <= s.end_ns
        ), orphans AS (
            SELECT s.step_id, k.ts_ns, k.dur_ns, k.kernel_class, k.cuda_graph, k.correlation, k.orphan,
                   k.attention_variant, k.name_id
            FROM k
            ASOF JOIN st s ON k.ts_ns >= s.start_ns
            WHERE k.orphan AND k.ts_ns < coalesce(s.next_start_ns, 9223372036854775807)
        )
        SELECT * FROM launched UNION ALL SELECT * FROM orphans
        """
    )
    class_cols = ", ".join(
        f"sum(dur_ns) FILTER (WHERE kernel_class = '{c}') / 1e9 AS t_{c}_s" for c in KERNEL_TIME_CLASSES
    )
    busy = _busy_intervals(con)
    gpu = {
        r[0]: busy.get(r[0], (None, None, None)) + r[1:]
        for r in con.execute(
            f"""
            SELECT step_id, count(*) FILTER (WHERE kernel_class <> 'sync') AS n_kernels,
                   count(*) FILTER (WHERE cuda_graph) AS graph_kernels,
                   count(DISTINCT correlation) FILTER (WHERE cuda_graph) AS graph_launches,
                   count(*) FILTER (WHERE orphan) AS orphan_kernels,
                   {class_cols}
            FROM attributed GROUP BY step_id
            """
        ).fetchall()
    }
    evidence = _kernel_evidence(con, busy)
    ncols = 7 + len(KERNEL_TIME_CLASSES)
    shapes: dict[int, list[tuple[str, str]]] = {}
    for step_id, name, dims in con.execute(
        f"""
        SELECT s.step_id, o.name, arg_min(o.input_dims, o.ts_ns)
        FROM st s JOIN ops o ON o.pid = s.pid AND o.ts_ns >= s.start_ns AND o.ts_ns <= s.end_ns
        WHERE o.cat = 'cpu_op' AND o.input_dims IS NOT NULL AND {ATTN_OPS_SQL.replace("name", "o.name")}
        GROUP BY s.step_id, o.name ORDER BY s.step_id, min(o.ts_ns)
        """
    ).fetchall():
        shapes.setdefault(step_id, []).append((name, dims))
    # the profiler writes every op's input shapes or none (record_shapes)
    shapes_recorded = con.execute("SELECT 1 FROM ops WHERE input_dims IS NOT NULL LIMIT 1").fetchone() is not None
    con.close()

    rows = []
    for s in steps:
        g = gpu.get(s["step_id"], (None,) * ncols)
        busy_ns, first_ns, last_ns = g[0], g[1], g[2]
        n_k, graph_k, graph_l, orphan_k = g[3], g[4], g[5], g[6]
        cls_t = g[7:]
        op_name, sh = merged_shape_reading(shapes.get(s["step_id"], []))
        kind = s["kind"]
        pt, dt = s["prefill_tokens"], s["decode_tokens"]
        pr, dr = s["prefill_reqs"], s["decode_reqs"]
        kind_from = "marker" if kind else None
        if kind is None and sh is not None:
            ql, tok, reqs = sh["query_len"], sh["tokens"], sh["reqs"]
            kind = kind_of_reading(sh)
            if kind == "decode":
                dt, dr, pt, pr = tok, reqs, 0, 0
            elif kind == "prefill" and ql is not None:
                pt, pr, dt, dr = tok, reqs, 0, 0
            kind_from = "shapes" if kind else None
        why = None
        if kind is None and evidence:
            # a step of a GPU trace that ran no kernel at all is as empty as one that ran no attention or GEMM
            # the kernels the step ran (parsers/step_kinds.csv); token and request counts stay unknown
            empty = {"busy_share": 0.0, "attention_in_trace": next(iter(evidence.values()))["attention_in_trace"]}
            kind, why = step_kind_from_kernels(evidence.get(s["step_id"], empty))
            kind_from = "kernels" if kind else None
            if kind is None and why and not shapes_recorded:
                why += "; the trace has no input shapes: with record_shapes=True its attention ops' shapes tell"
        elif kind is None:  # a CPU-only trace: the marker and the shapes were all there was to read
            why = (
                "its marker gives none, the trace has no GPU kernels, and no attention op in it has input shapes "
                "(profile with record_shapes=True)"
                if op_name is None
                else f"its marker gives none, nor do the input shapes of {op_name}"
            )
        wall_ns = s["end_ns"] - s["start_ns"]
        span_end = max(s["end_ns"], last_ns or s["end_ns"])
        rows.append(
            {
                "part": part,
                "step_id": s["step_id"],
                "start_ns": s["start_ns"],
                "end_ns": s["end_ns"],
                "start_s": s["start_ns"] / 1e9,
                "end_s": s["end_ns"] / 1e9,
                "kind": kind,
                "kind_from": kind_from,
                "kind_why": why,
                "prefill_reqs": pr,
                "prefill_tokens": pt,
                "decode_reqs": dr,
                "decode_tokens": dt,
                "wall_s": wall_ns / 1e9,
                "gpu_busy_s": busy_ns / 1e9 if busy_ns is not None else None,
                "gpu_start_s": first_ns / 1e9 if first_ns is not None else None,
                "gpu_end_s": last_ns / 1e9 if last_ns is not None else None,
                "launch_gap_s": max(0, first_ns - s["start_ns"]) / 1e9 if first_ns is not None else None,
                "gpu_idle_s": (span_end - s["start_ns"] - busy_ns) / 1e9 if busy_ns is not None else None,
                "kernels": n_k or 0,
                "cuda_graph": bool(graph_k) if n_k else None,
                "graph_launches": graph_l or 0,
                "orphan_kernels": orphan_k or 0,
                **{f"t_{c}_s": cls_t[i] for i, c in enumerate(KERNEL_TIME_CLASSES)},
                "shape_op": op_name,
                "shape_tokens": sh["tokens"] if sh else None,
                "shape_reqs": sh["reqs"] if sh else None,
                "shape_query_len": sh["query_len"] if sh else None,
                "shape_context_tokens": sh["context"] if sh else None,
                "marker": s["marker"],
                "detection": family,
                "source": "profiler",
            }
        )
    return table_from_rows(rows, ENGINE_STEPS), summary


def post_ingest(stage: Path, part: int) -> dict:
    """The profiler format's post-ingest step: detect the staged trace's engine steps and write them as
    ``stage/engine_steps/part-<part>.parquet``; returns what the run metadata records of the detection."""
    steps, summary = detect_steps(stage, part)
    (stage / "engine_steps").mkdir(exist_ok=True)
    pq.write_table(steps, stage / "engine_steps" / f"part-{part:05d}.parquet", compression="zstd")
    return summary | {"rows": {"engine_steps": steps.num_rows}}

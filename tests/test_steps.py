"""Engine steps recovered from real traces, checked against the raw JSON read independently."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import DATA, SAMPLES, data_file, raw_trace
from rich.console import Console

import lltrace
from lltrace.reports.terminal import print_summary

STEP = re.compile(r"^execute_context_(\d+)\((\d+)(?:_\d+)?\)_generation_(\d+)\((\d+)\)$")


def _steps(path, store, **kw):
    run = lltrace.ingest([path], store=store, **kw)
    return run, run.sql("SELECT * FROM engine_steps ORDER BY start_ns").to_dicts()


def test_vllm_b200_single_prefill_step_of_888_tokens(store):
    run, steps = _steps(data_file("torch", "vllm_b200_tp8_gptoss_mxfp4_prefill_eager.rank0.json.gz"), store)
    assert len(steps) == 1
    s = steps[0]
    assert (s["kind"], s["prefill_reqs"], s["prefill_tokens"], s["decode_tokens"]) == ("prefill", 1, 888, 0)
    assert s["shape_tokens"] == 888  # vllm::unified_attention_with_output query [888, 8, 64]
    # GPU busy time is the union of the GPU ops launched inside the step (recomputed from raw JSON).
    ann, ivs = _raw_step_gpu(data_file("torch", "vllm_b200_tp8_gptoss_mxfp4_prefill_eager.rank0.json.gz"))
    busy = _union(ivs)
    assert s["gpu_busy_s"] == pytest.approx(float(busy) / 1e6, abs=1e-9)
    assert s["kernels"] == len(ivs)
    assert s["cuda_graph"] is False


def _raw_step_gpu(path: Path) -> tuple[dict, list[tuple[Decimal, Decimal]]]:
    """The raw trace's one ``execute_…`` step annotation and the GPU ops (kernels, copies, sets) of the runtime
    calls it launched (same process, launched inside its span), as (start, end) µs."""
    ev = raw_trace(str(path))["traceEvents"]
    ann = next(e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("execute_"))
    t0, t1 = ann["ts"], ann["ts"] + ann["dur"]
    corr = {
        e["args"]["correlation"]
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver")
        and t0 <= e["ts"] <= t1
        and e.get("pid") == ann["pid"]
        and "correlation" in e.get("args", {})
    }
    ivs = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in ev
        if e.get("ph") == "X"
        and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
        and e["args"].get("correlation") in corr
    )
    return ann, ivs


def _union(ivs: list[tuple[Decimal, Decimal]]) -> Decimal:
    """Total length of the union of sorted intervals."""
    busy, cur_s, cur_e = Decimal(0), None, None
    for a, b in ivs:
        if cur_e is None or a > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    return busy + (cur_e - cur_s)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("vllm_v1_mi300x_decode_fullgraph_bs32.AMD.json.gz", "decode"),
        ("vllm_v1_mi300x_mixed_piecewise_8155p37d.AMD.json.gz", "mixed"),
        ("vllm_b200_tp8_gptoss_mxfp4_prefill_eager.rank0.json.gz", "prefill"),
    ],
)
def test_a_step_whose_gpu_work_outlasts_its_cpu_span_is_told(name, kind, tmp_path):
    """vLLM's CUDA-graph steps on MI300X return on the CPU long before their kernels run (full graph: a 2.4 ms
    annotation, 10.7 ms of GPU work after it): the table's ms columns are CPU spans, so the steps whose GPU busy
    time exceeds their span are counted and their GPU time shown. The eager B200 step waits for its kernels:
    nothing to tell. Expected values from the raw JSON."""
    path = data_file("torch", name)
    ann, ivs = _raw_step_gpu(path)
    busy_s = float(_union(ivs)) / 1e6
    longer = busy_s > float(ann["dur"]) / 1e6
    assert longer == (kind != "prefill")  # the premise, from the raw file
    result = lltrace.analyze([path], store=tmp_path / "s")
    (row,) = [r for r in result.to_dict()["steps"]["by_kind"] if r["kind"] == kind]
    assert row["wall_s_mean"] == pytest.approx(float(ann["dur"]) / 1e6, abs=1e-9)
    console = Console(width=300, record=True)
    print_summary(result.document, console)
    text = console.export_text()
    if not longer:
        assert row["gpu_longer_steps"] == 0 and row["gpu_longer_busy_s_mean"] is None
        assert "busy longer than the CPU span" not in text
        return
    assert row["gpu_longer_steps"] == 1
    assert row["gpu_longer_busy_s_mean"] == pytest.approx(busy_s, abs=1e-9)
    assert row["gpu_longer_start_s_mean"] == pytest.approx(float(ivs[0][0] - ann["ts"]) / 1e6, abs=1e-9)
    assert (
        f"The GPU was busy longer than the CPU span of 1 of 1 {kind} steps" in text
        and f"GPU busy per step, mean: {kind} {busy_s * 1e3:.2f} ms" in text
    )


def test_sglang_mi300x_decode_step_of_batch_32(store):
    run, steps = _steps(data_file("torch", "sglang_mi300x_qwen3-8b_decode_step.AMD.json.gz"), store)
    assert len(steps) == 1
    s = steps[0]
    assert (s["kind"], s["decode_reqs"], s["detection"]) == ("decode", 32, "sglang")
    assert s["cuda_graph"] is True and s["graph_launches"] == 1  # the decode ran as one hipGraphLaunch


@pytest.mark.parametrize("run_dir", ["B_kvpressure", "B2_kv2x", "A_baseline"])
def test_vllm_cpu_steps_agree_with_annotations_and_input_shapes(run_dir, store):
    path = next((DATA / "vllm_cpu" / run_dir / "profiler").glob("rank0.*.json.gz"))
    run, steps = _steps(path, store)
    ev = [e for e in raw_trace(str(path))["traceEvents"] if e.get("ph") == "X"]
    ann = sorted((e for e in ev if e.get("cat") == "user_annotation" and STEP.match(e["name"])), key=lambda e: e["ts"])
    assert len(steps) == len(ann)
    if run_dir.startswith("B"):
        assert len(steps) == 60
    ops = sorted((e for e in ev if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    for s, a in zip(steps, ann, strict=True):
        nc, tc, ng, tg = (int(x) for x in STEP.match(a["name"]).groups())
        inside = [o for o in ops if a["ts"] <= o["ts"] <= a["ts"] + a["dur"]]
        if tc + tg == 0:  # an idle iteration runs no model forward, so there are no shapes to read
            assert s["kind"] == "idle" and s["shape_tokens"] is None
            continue
        q = next(o for o in inside if o["name"] == "vllm::unified_attention_with_output")
        kv = next(o for o in inside if o["name"] == "_C::cpu_attention_with_kv_cache")
        shape_tokens = q["args"]["Input Dims"][0][0]
        shape_reqs = kv["args"]["Input Dims"][4][0] - 1  # query_start_loc has one entry per request + 1
        # Reading 1 (annotation) and reading 2 (shapes) agree, and lltrace reports both.
        assert (s["prefill_reqs"], s["prefill_tokens"], s["decode_reqs"], s["decode_tokens"]) == (nc, tc, ng, tg)
        assert tc + tg == shape_tokens == s["shape_tokens"]
        assert nc + ng == shape_reqs == s["shape_reqs"]
        kind = "mixed" if tc and tg else "prefill" if tc else "decode" if tg else "idle"
        assert s["kind"] == kind
        assert s["wall_s"] == pytest.approx(float(a["dur"]) / 1e6, abs=1e-9)


def test_hf_profiler_step_is_a_prefill_read_from_sdpa_shapes(store):
    run, steps = _steps(data_file("torch", "hf_transformers_qwen1.5-0.5b_h100_prefill_forward_bs16x559.json.gz"), store)
    assert len(steps) == 1
    s = steps[0]
    assert (s["detection"], s["kind"], s["kind_from"]) == ("profiler_step", "prefill", "shapes")
    assert (s["prefill_reqs"], s["prefill_tokens"], s["shape_query_len"]) == (16, 16 * 559, 559)


def test_cpu_tinylm_phase_annotations(store):
    path = data_file("torch", "torch-cpu-tinylm-infer-10mb.trace.json.gz")
    run, steps = _steps(path, store)
    names = [e["name"] for e in raw_trace(str(path))["traceEvents"] if e.get("cat") == "user_annotation"]
    assert len(steps) == names.count("prefill") + names.count("decode_step")
    assert sum(s["kind"] == "prefill" for s in steps) == names.count("prefill")
    decode = [s for s in steps if s["kind"] == "decode"]
    assert all(s["shape_query_len"] == 1 for s in decode)
    assert all(s["gpu_busy_s"] is None for s in steps)  # CPU-only trace: no GPU data, not zero


def test_training_trace_without_markers_has_no_steps(store):
    run, steps = _steps(data_file("torch", "hta_a100_alexnet_benchmark_small.json.gz"), store)
    assert steps == []


def test_step_marker_parsing():
    from lltrace.parsers.kineto_steps import parse_marker

    m = parse_marker("execute_context_7(1664)_generation_1(1)")
    assert (m.kind, m.prefill_reqs, m.prefill_tokens, m.decode_reqs, m.decode_tokens) == ("mixed", 7, 1664, 1, 1)
    assert parse_marker("execute_context_0(0)_generation_4(4)").kind == "decode"
    assert parse_marker("execute_context_0(0)_generation_0(0)").kind == "idle"
    m = parse_marker("execute_new_2_cached_5")
    assert (m.kind, m.prefill_reqs, m.decode_reqs, m.prefill_tokens) == ("mixed", 2, 5, None)
    m = parse_marker("step[EXTEND bs=15 toks=15360]")
    assert (m.kind, m.prefill_reqs, m.prefill_tokens) == ("prefill", 15, 15360)
    assert parse_marker("step[MIXED bs=2]").kind == "mixed"
    m = parse_marker("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk32785sqsq32sqsk32785)")
    assert (m.family, m.kind, m.decode_reqs, m.decode_tokens) == ("tracelens", "decode", 32, 32)
    assert parse_marker("ProfilerStep#12").family == "profiler_step"
    assert parse_marker("aten::mm") is None


def test_forward_passes_from_attention_shapes_when_a_trace_has_no_markers(store, tmp_path):
    """The CPU tiny-LM trace with every annotation removed: steps come from the attention shapes alone."""

    def drop(events: list[dict]) -> list[dict]:
        return [e for e in events if e.get("cat") != "user_annotation"]

    _tinylm_steps_match_its_annotations(store, tmp_path, drop, "attention_shapes")


def _tinylm_steps_match_its_annotations(store, tmp_path, edit, detection: str) -> None:
    """The CPU tiny-LM trace with its events edited by ``edit``: the steps found (by ``detection``) are its
    prefill and decode_step annotations, kind for kind."""
    import gzip
    import json

    src = data_file("torch", "torch-cpu-tinylm-infer-10mb.trace.json.gz")
    doc = json.loads(gzip.decompress(src.read_bytes()))
    names = [e["name"] for e in doc["traceEvents"] if e.get("cat") == "user_annotation"]
    doc["traceEvents"] = edit(doc["traceEvents"])
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    run, steps = _steps(path, store)
    assert {s["detection"] for s in steps} == {detection}
    assert sum(s["kind"] == "prefill" for s in steps) == names.count("prefill")
    assert sum(s["kind"] == "decode" for s in steps) == names.count("decode_step")


def test_trace_without_llm_phases_gets_no_prefill_decode_verdict(tmp_path: Path) -> None:
    """A recsys training trace: its ProfilerStep steps are of unknown kind, so no "balanced" verdict."""
    path = data_file("torch", "hta_a100_recsys_8rank_oldformat.rank3.json.gz")
    doc = lltrace.analyze([path], store=tmp_path).to_dict()
    share = doc["steps"]["phase_share"]
    assert share["prefill_share"] == share["decode_share"] == share["mixed_share"] == 0
    assert doc["classification"] is None


@pytest.mark.parametrize("spread", [10**6, 2**61])  # the second forces the step-by-step path (no lifting)
def test_busy_intervals_are_the_union_of_each_steps_kernels(spread):
    import random

    import duckdb

    from lltrace.parsers.kineto_steps import _busy_intervals

    rng = random.Random(spread)
    rows = []
    for step in range(40):
        base = rng.randrange(spread)  # steps may overlap in time: each is its own union
        for _ in range(rng.randrange(1, 30)):
            start = base + rng.randrange(10_000)
            rows.append((step, start, rng.choice([0, 1, 5, 500, 3000]), rng.choice(["gemm", "sync", "attention"])))
    con = duckdb.connect()
    con.execute("CREATE TABLE attributed (step_id BIGINT, ts_ns BIGINT, dur_ns BIGINT, kernel_class VARCHAR)")
    con.executemany("INSERT INTO attributed VALUES (?, ?, ?, ?)", rows)
    expected = {}
    for step in {r[0] for r in rows}:
        iv = sorted((s, s + d) for st, s, d, c in rows if st == step and c != "sync")
        if not iv:
            continue
        busy, cur_s, cur_e = 0, *iv[0]
        for s, e in iv[1:]:
            if s > cur_e:
                busy += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        busy += cur_e - cur_s
        expected[step] = (busy, iv[0][0], max(e for _, e in iv))
    assert _busy_intervals(con) == expected


def test_a_profiler_step_holding_a_whole_generate_gives_way_to_its_forward_passes(store):
    """A real HF generate() trace profiled per call (sample_traces/hf_generate_cpu): each ProfilerStep holds a
    prefill and its decodes; the steps are the forward passes, counted from the raw file's attention calls."""
    path = SAMPLES / "hf_generate_cpu" / "hf_generate_cpu_profilerstep.json.gz"
    events = raw_trace(str(path))["traceEvents"]
    marked = [e for e in events if e.get("name", "").startswith("ProfilerStep#")]
    layers = 2  # the tiny Llama's (its config.json)
    # each forward calls attention once per layer: query [B, H, S, D], S = 1 in a decode
    queries = [e["args"]["Input Dims"][0] for e in events if e.get("name") == "aten::scaled_dot_product_attention"]
    decode_q = [q for q in queries if q[2] == 1]
    prefill_q = [q for q in queries if q[2] > 1]
    run, steps = _steps(path, store)
    assert len(marked) == 2 and len(steps) > len(marked)
    assert {s["detection"] for s in steps} == {"attention_shapes_in_profiler_step"}
    decode = [s for s in steps if s["kind"] == "decode"]
    prefill = [s for s in steps if s["kind"] == "prefill"]
    assert len(decode) == len(decode_q) // layers and len(prefill) == len(prefill_q) // layers
    assert sum(s["decode_tokens"] for s in decode) == sum(q[0] for q in decode_q) // layers
    assert sum(s["prefill_tokens"] for s in prefill) == sum(q[0] * q[2] for q in prefill_q) // layers
    # every pass lies within the ProfilerStep it began in, and passes do not overlap
    spans = [(round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)) for e in marked]
    base = raw_trace(str(path)).get("baseTimeNanoseconds", 0)
    for s in steps:
        assert any(a + base <= s["start_ns"] <= s["end_ns"] <= b + base for a, b in spans)
    ordered = sorted(steps, key=lambda s: s["start_ns"])
    assert all(x["end_ns"] <= y["start_ns"] for x, y in zip(ordered, ordered[1:], strict=False))


def test_a_profiler_step_of_one_forward_keeps_its_marker(store, tmp_path):
    """The tiny-LM trace with its phase annotations renamed ProfilerStep#N: each holds one forward, so the
    ProfilerSteps stay the steps (with the kinds their shapes give)."""

    def rename(events: list[dict]) -> list[dict]:
        marked = [e for e in events if e.get("cat") == "user_annotation" and e["name"] in ("prefill", "decode_step")]
        for k, e in enumerate(marked):
            e["name"] = f"ProfilerStep#{k}"
        return events

    _tinylm_steps_match_its_annotations(store, tmp_path, rename, "profiler_step")


def test_a_cpu_step_without_shapes_says_why_it_has_no_kind(store, tmp_path):
    """The HF generate() sample with its input shapes removed (as profiled without record_shapes): its two
    ProfilerSteps keep their marker, have no kind, and say what would give one."""
    import gzip
    import json

    src = SAMPLES / "hf_generate_cpu" / "hf_generate_cpu_profilerstep.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    for e in doc["traceEvents"]:
        (e.get("args") or {}).pop("Input Dims", None)
    path = tmp_path / "no_shapes.json"
    path.write_text(json.dumps(doc))
    run, steps = _steps(path, store)
    assert [s["detection"] for s in steps] == ["profiler_step"] * 2
    assert all(s["kind"] is None and "record_shapes=True" in s["kind_why"] for s in steps)
    out = lltrace.analyze([path], store=tmp_path / "s2").to_dict()["steps"]
    assert out["undecided"] == [{"why": steps[0]["kind_why"], "steps": 2}]


@pytest.mark.parametrize(
    "name, overlap",
    [
        ("hta_a100_recsys_8rank_oldformat.rank3.json.gz", True),  # NCCL's stream beside the compute stream: 113 ms
        ("vllm_b200_tp8_gptoss_mxfp4_prefill_eager.rank0.json.gz", True),  # MoE kernels on one stream: 69 us
        ("vllm_v1_mi300x_mixed_piecewise_8155p37d.AMD.json.gz", False),  # 0.1 us: below the display's 0.01 ms
    ],
)
def test_kernel_classes_summing_past_the_busy_time_are_explained(name, overlap, tmp_path):
    """GPU ops that overlap in time (on concurrent streams, or on one stream with programmatic dependent launch, as the
    B200 trace's MoE kernels do) count in full in the kernel-class table but once in the GPU busy time, so the classes
    can sum past it; where the two figures on screen disagree, a line says why. The premise (how much the GPU ops
    overlap) from the raw file."""
    path = data_file("torch", name)
    ev = raw_trace(str(path))["traceEvents"]
    ivs = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in ev
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e["dur"] > 0
    )
    assert (sum(b - a for a, b in ivs) - _union(ivs) >= 10) == overlap  # 10 us: the display's 0.01 ms
    result = lltrace.analyze([path], store=tmp_path / "s")
    doc = result.to_dict()
    console = Console(width=300, record=True)
    print_summary(result.document, console)
    text = console.export_text()
    summed = sum(r["total_s"] for r in doc["profile"]["kernel_time"])
    union = sum(b["busy_s"] for b in doc["profile"]["gpu_busy"])
    line = f"The classes sum to {summed * 1e3:.2f} ms, more than the {union * 1e3:.2f} ms the GPU was busy"
    assert (line in text) == overlap
    assert ("GPU ops ran at the same time" in text) == overlap


@pytest.mark.parametrize("name, count", [("hf_generate_eager_shapes", 16), ("hf_generate_cudagraph_noshapes", 14)])
def test_kernel_names_numbered_by_rank_where_two_share_a_hash_give_the_same_steps(name, count, tmp_path, monkeypatch):
    """Step detection numbers kernel names by their hash; where two names share one (forced here: every name hashes to
    0) it numbers them by rank instead, and every step's figures and kind stay the same (the second trace's kinds
    come from its kernels' names)."""
    import duckdb

    from lltrace.parsers import kineto_steps

    path = SAMPLES / "hf_generate_gpu" / f"{name}.json.gz"
    _, hashed = _steps(path, tmp_path / "a")
    connect = duckdb.connect

    def colliding(*args, **kwargs):
        con = connect(*args, **kwargs)
        con.execute("CREATE TEMP MACRO hash(x) AS 0")
        return con

    monkeypatch.setattr(kineto_steps.duckdb, "connect", colliding)
    _, ranked = _steps(path, tmp_path / "b")
    assert len(hashed) == count and {s["kind"] for s in hashed} >= {"decode"}
    assert [{k: v for k, v in s.items() if k != "run_id"} for s in ranked] == [
        {k: v for k, v in s.items() if k != "run_id"} for s in hashed
    ]

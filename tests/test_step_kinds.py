"""Step kinds from the kernels a step ran (parsers/step_kinds.csv), where a trace has no step marker and no input
shapes: checked on copies of every real GPU inference trace with both removed, against the kind the original's
marker or shapes give (read here from the raw JSON)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from conftest import DATA

import lltrace
from lltrace.parsers.kineto_steps import kind_rules, step_kind_from_kernels

GPU_INFERENCE = sorted(
    {
        p.name: p
        for p in (DATA / "torch").glob("*.json.gz")
        # (a graph-capture trace runs no step: its kernels are recorded into a graph, test_kineto_real)
        if not p.name.startswith(("hta_", "torch-cpu", "vllm_cpu")) and "graph_capture" not in p.name
    }.values()
)
_KIND_MARKER = re.compile(r"^(execute_|step\[)")
_SHAPE_ARGS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")


def raw_kinds(path: Path) -> list[str]:
    """The kind of each step as the raw trace tells it: vLLM's / TraceLens' execute_… marker (context and
    generation token counts), SGLang's step[MODE …], else the attention op's query shape (length > 1: prefill)."""
    events = json.loads(gzip.open(path).read())["traceEvents"]
    kinds = []
    end = float("-inf")  # a marker nested in the previous one (SGLang's step[…] inside TraceLens') is the same step
    for e in sorted(events, key=lambda e: e.get("ts", 0)):
        name = e.get("name") or ""
        if e.get("cat") not in ("user_annotation", "cpu_op") or e.get("ts", 0) < end:
            continue
        if m := re.match(r"^execute_context_\d+\((\d+)[^)]*\)_generation_\d+\((\d+)", name):
            ctx, gen = int(m.group(1)), int(m.group(2))
        elif m := re.match(r"^execute_\d+_context_\d+\(sq(\d+)[^)]*\)_generation_\d+\(sq(\d+)", name):
            ctx, gen = int(m.group(1)), int(m.group(2))
        elif m := re.match(r"^step\[(\w+)", name):
            end = e.get("ts", 0) + e.get("dur", 0)
            kinds.append({"DECODE": "decode", "EXTEND": "prefill", "MIXED": "mixed"}[m.group(1)])
            continue
        else:
            continue
        end = e.get("ts", 0) + e.get("dur", 0)
        kinds.append("mixed" if ctx and gen else "prefill" if ctx else "decode")
    if not kinds:  # no marker: the flash attention op's query [batch, query length, heads, dim]
        for e in events:
            if e.get("name") == "aten::_flash_attention_forward" and "Input Dims" in (e.get("args") or {}):
                kinds.append("prefill" if e["args"]["Input Dims"][0][1] > 1 else "decode")
                break
    return kinds


def stripped(path: Path, out: Path) -> Path:
    """The trace without its kind-giving step markers and without any op's input shapes."""
    doc = json.loads(gzip.open(path).read())
    kept = []
    for e in doc["traceEvents"]:
        if _KIND_MARKER.match(e.get("name") or "") and e.get("cat") in ("user_annotation", "gpu_user_annotation"):
            continue
        if isinstance(e.get("args"), dict):
            e["args"] = {k: v for k, v in e["args"].items() if k not in _SHAPE_ARGS}
        kept.append(e)
    doc["traceEvents"] = kept
    with gzip.open(out, "wt") as f:
        json.dump(doc, f)
    return out


# the one real trace whose kernels cannot tell its kind: vLLM's ROCm unified attention runs one 2D kernel for
# prefill and mixed batches alike, eager between piecewise graph pieces (its 3D split-KV kernel is decode only)
UNDECIDABLE = {"vllm_v1_mi300x_mixed_piecewise_8155p37d.AMD.json.gz"}


@pytest.mark.parametrize("path", GPU_INFERENCE, ids=lambda p: p.name)
def test_without_markers_and_shapes_the_kernels_give_the_kind(path, tmp_path):
    expected = raw_kinds(path)
    assert expected, "every real GPU inference trace tells its steps' kinds by a marker or shapes"
    original = lltrace.ingest([path], store=tmp_path / "a").table("engine_steps")
    assert original["kind"].to_list() == expected
    run = lltrace.ingest([stripped(path, tmp_path / path.name)], store=tmp_path / "b")
    steps = run.table("engine_steps").to_dicts()
    assert len(steps) == len(expected)
    for step, kind in zip(steps, expected, strict=True):
        assert step["shape_tokens"] is None and step["prefill_tokens"] is None and step["decode_tokens"] is None
        if path.name in UNDECIDABLE:
            assert step["kind"] is None and step["kind_why"].startswith("attention kernels that do not tell")
        else:
            assert (step["kind"], step["kind_from"]) == (kind, "kernels")


def test_the_verdict_and_the_roofline_work_on_kernel_kinds(tmp_path):
    path = DATA / "torch" / "vllm_b200_tp8_gptoss_mxfp4_prefill_eager.rank0.json.gz"
    doc = lltrace.analyze([stripped(path, tmp_path / path.name)], store=tmp_path / "s").to_dict()
    assert (doc["classification"]["label"], doc["classification"]["basis"]) == ("prefill-dominant", "profiler steps")
    assert doc["steps"]["count_by_kind_from"] == {"kernels": 1}


@pytest.mark.parametrize(
    "name", ["hta_a100_ddp_nccl_2rank.rank0.json.gz", "hta_a100_recsys_8rank_oldformat.rank3.json.gz"]
)
def test_a_training_trace_gets_no_inference_kind(name, tmp_path):
    doc = lltrace.analyze([DATA / "torch" / name], store=tmp_path).to_dict()
    steps = doc["steps"]
    assert steps["count"] and steps["count_by_kind"].get("unknown") == steps["count"]
    assert [u["why"].split(":")[0] for u in steps["undecided"]] == ["training"]
    label = (doc["classification"] or {}).get("label")
    assert label not in ("prefill-dominant", "decode-dominant")


def test_every_rule_on_its_own_evidence():
    """Each row of step_kinds.csv, fed the evidence it names (real traces exercise the prefill-only, decode-only,
    undecidable and training rows above)."""
    base = dict(
        backward=False,
        attention_in_trace=True,
        compute=True,
        prefill_attention=False,
        decode_attention=False,
        attention_eager=False,
        attention_in_graph=False,
        busy_share=1.0,
    )
    cases = [
        (dict(backward=True, prefill_attention=True), None, "training"),
        (dict(attention_in_trace=False, compute=False), None, "no attention kernel anywhere"),
        (dict(compute=False), "idle", "no attention or GEMM"),
        (dict(busy_share=0.005, decode_attention=True), "idle", "the GPU was busy for under 1 %"),
        (dict(prefill_attention=True, decode_attention=True), None, "prefill attention ran, and the only decode"),
        (
            dict(prefill_attention=True, decode_attention=True, decode_attention_conditional=True),
            "mixed",
            "prefill and decode",
        ),
        (dict(prefill_attention=True), "prefill", "only prefill"),
        (dict(decode_attention=True, attention_in_graph=True), "decode", "only decode"),
        (dict(decode_attention=True, attention_eager=True), "decode", "only decode"),  # ROCM_ATTN: no prefill kernel
        (dict(attention_in_graph=True), "decode", "attention replayed inside a CUDA/HIP graph"),
        (dict(attention_eager=True, attention_in_graph=True), None, "attention kernels that do not tell"),
        (dict(attention_eager=False, attention_in_graph=False), None, None),
    ]
    for change, kind, why in cases:
        got_kind, got_why = step_kind_from_kernels(base | change)
        assert got_kind == kind, change
        assert (got_why is None) if why is None else got_why.startswith(why), (change, got_why)
    assert len(kind_rules()) == 10


def test_ranks_whose_steps_disagree_are_reported(tmp_path):
    """Two ranks of one (stripped) SGLang decode step; the second's attention renamed to a prefill kernel."""
    src = stripped(DATA / "torch" / "sglang_mi300x_qwen3-8b_decode_step.AMD.json.gz", tmp_path / "r0.json.gz")
    doc = json.loads(gzip.open(src).read())
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and "paged_attention" in (e.get("name") or ""):
            e["name"] = "flash_fwd_kernel"
        if isinstance(e.get("pid"), int):
            e["pid"] += 1000
    folder = tmp_path / "ranks"
    folder.mkdir()
    (folder / "rank0.json.gz").write_bytes(src.read_bytes())
    with gzip.open(folder / "rank1.json.gz", "wt") as f:
        json.dump(doc, f)
    steps = lltrace.analyze([folder], store=tmp_path / "s").to_dict()["steps"]
    assert steps["ranks"] == {"ranks": 2, "agree": False, "disagree_parts": [1], "steps_per_rank": {"0": 1, "1": 1}}

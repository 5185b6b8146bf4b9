"""HF ``generate()`` on an H200, profiled per call (sample_traces/hf_generate_gpu, this project's own run): eager and
CUDA-graph decoding, each with and without ``record_shapes``. Every expected figure is read from the raw JSON with
``json``: the forward passes from the attention calls and graph launches, the GPU time from the kernels."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from conftest import SAMPLES, raw_trace

import lltrace

HERE = SAMPLES / "hf_generate_gpu"
INFO = json.loads((HERE / "run_info.json").read_text())
LAYERS = INFO["layers"]  # the tiny Llama's; the medium one's in INFO["medium_model"]


def _trace(name: str) -> tuple[list[dict], int]:
    doc = raw_trace(str(HERE / f"{name}.json.gz"))
    return doc["traceEvents"], int(doc.get("baseTimeNanoseconds", 0))


def _ns(us: Decimal, base: int) -> int:
    return int((us * 1000).to_integral_value()) + base


def _steps(name: str, store):
    run = lltrace.ingest([HERE / f"{name}.json.gz"], store=store)
    return run, run.sql("SELECT * FROM engine_steps ORDER BY start_ns").to_dicts()


def _sdpa_queries(events: list[dict], op: str = "aten::scaled_dot_product_attention") -> list[list[int]]:
    return [e["args"]["Input Dims"][0] for e in events if e.get("name") == op]


def _union_us(ivs: list[tuple[Decimal, Decimal]]) -> Decimal:
    total, end = Decimal(0), None
    for s, e in sorted(ivs):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


@pytest.mark.parametrize(
    "name, layers",
    [
        ("hf_generate_eager_shapes", LAYERS),
        ("hf_generate_medium_eager_shapes", INFO["medium_model"]["num_hidden_layers"]),
    ],
)
def test_eager_generate_on_a_gpu_gives_its_forward_passes(name, layers, store):
    """Each ProfilerStep holds one generate(): a prefill and its decodes, counted from the attention calls (one per
    layer per forward; query [B, H, S, D], S = 1 in a decode), with every pass's kernels found on the GPU."""
    events, _ = _trace(name)
    queries = _sdpa_queries(events)
    decode_q = [q for q in queries if q[2] == 1]
    prefill_q = [q for q in queries if q[2] > 1]
    v = INFO["variants"][name]
    assert len(decode_q) // layers == 2 * (v["generated_tokens"] - 1)  # (the premise, from the script's own count)
    run, steps = _steps(name, store)
    assert {s["detection"] for s in steps} == {"attention_shapes_in_profiler_step"}
    decode = [s for s in steps if s["kind"] == "decode"]
    prefill = [s for s in steps if s["kind"] == "prefill"]
    assert len(decode) == len(decode_q) // layers and len(prefill) == len(prefill_q) // layers == 2
    assert sum(s["decode_tokens"] for s in decode) == sum(q[0] for q in decode_q) // layers
    assert sum(s["prefill_tokens"] for s in prefill) == sum(q[0] * q[2] for q in prefill_q) // layers
    assert sum(s["prefill_tokens"] for s in prefill) == 2 * v["batch"] * v["prompt_tokens"]
    assert all(s["kernels"] > 0 and s["gpu_busy_s"] > 0 and not s["cuda_graph"] for s in steps)


def _graph_launched_kernels(events: list[dict]) -> list[dict]:
    launches = {e["args"]["correlation"] for e in events if e.get("name") == "cudaGraphLaunch"}
    return [e for e in events if e.get("cat") == "kernel" and e["args"].get("correlation") in launches]


def test_cuda_graph_decodes_are_steps_of_their_own(store):
    """With a static cache, generate() compiles its decoding forward (torch.compile, mode reduce-overhead): each
    decode is one ``Torch-Compiled Region`` that launches one CUDA graph, while the prefill runs eager. Each replay
    is a decode step; the first of each generate() re-records its graph in the trace, and the attention op captured
    then gives that step its shapes; the others take their kind from the graph's kernels."""
    name = "hf_generate_cudagraph_shapes"
    events, _ = _trace(name)
    launches = [e for e in events if e.get("name") == "cudaGraphLaunch"]
    prefill_q = [q for q in _sdpa_queries(events) if q[2] > 1]  # eager: the prefills only
    begins = sorted(e["ts"] for e in events if e.get("name") == "cudaStreamBeginCapture")
    ends = sorted(e["ts"] for e in events if e.get("name") == "cudaStreamEndCapture")
    captured = [  # the attention ops recorded into a graph (the compiled code calls cuDNN's attention directly)
        e["args"]["Input Dims"][0]
        for e in events
        if e.get("name") == "aten::_scaled_dot_product_cudnn_attention"
        and any(b <= e["ts"] <= x for b, x in zip(begins, ends, strict=True))
    ]
    assert len(launches) == 2 * (INFO["variants"][name]["generated_tokens"] - 1)
    assert captured and all(q[2] == 1 for q in captured)
    run, steps = _steps(name, store)
    decode = [s for s in steps if s["kind"] == "decode"]
    prefill = [s for s in steps if s["kind"] == "prefill"]
    assert len(steps) == len(decode) + len(prefill)
    assert len(decode) == len(launches) and all(s["graph_launches"] == 1 for s in decode)
    assert len(prefill) == len(prefill_q) // LAYERS == 2
    assert sum(s["prefill_tokens"] for s in prefill) == sum(q[0] * q[2] for q in prefill_q) // LAYERS
    from_shapes = [s for s in decode if s["kind_from"] == "shapes"]
    assert len(from_shapes) == len(captured) // LAYERS
    assert sum(s["decode_tokens"] for s in from_shapes) == sum(q[0] for q in captured) // LAYERS
    assert {s["kind_from"] for s in decode} == {"shapes", "kernels"}
    # every graph launch is a decode step's, one each (the prefills run eager)
    graph_k = _graph_launched_kernels(events)
    got = run.sql("SELECT count(*) AS n FROM kernels WHERE cuda_graph").to_dicts()[0]["n"]
    assert got == len(graph_k)
    assert sum(s["graph_launches"] for s in steps) == len(launches)
    assert all(not s["cuda_graph"] and s["graph_launches"] == 0 for s in prefill)


def _launched_before_first(events: list[dict], passes: list[tuple[Decimal, Decimal]]) -> list[tuple]:
    """The GPU ops (start, end µs) launched in each ProfilerStep before the first of ``passes`` that starts in it."""
    marked = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("name", "").startswith("ProfilerStep#") and e.get("cat") == "user_annotation"
    )
    first = [min(a for a, _ in passes if m0 <= a <= m1) for m0, m1 in marked]
    launch_ts = {
        e["args"]["correlation"]: e["ts"]
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    return [
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
        and any(m0 <= launch_ts[e["args"]["correlation"]] < f for (m0, _), f in zip(marked, first, strict=True))
    ]


def test_cuda_graph_decodes_without_shapes_and_the_prefill_time_no_step_holds(store):
    """Without record_shapes the eager prefill cannot be delimited, but each graph replay still is one decode: the
    steps are the replays, and the GPU time launched before each generate()'s first replay (its prefill) is said
    to lie outside any step, to the microsecond of the raw kernels' union."""
    name = "hf_generate_cudagraph_noshapes"
    events, base = _trace(name)
    regions = sorted(
        (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name", "").startswith("Torch-Compiled Region")
    )
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    before = _launched_before_first(events, regions)
    run, steps = _steps(name, store)
    assert len(steps) == len(regions) == sum(e.get("name") == "cudaGraphLaunch" for e in events)
    assert {(s["kind"], s["kind_from"]) for s in steps} == {("decode", "kernels")}
    doc = lltrace.analyze(run).to_dict()
    share = doc["steps"]["phase_share"]
    all_busy = _union_us([(e["ts"], e["ts"] + e["dur"]) for e in gpu])
    assert share["gpu_busy_s"] == pytest.approx(float(all_busy) / 1e6, abs=1e-9)
    assert share["outside_steps_s"] == pytest.approx(float(_union_us(before)) / 1e6, abs=2e-9)
    assert share["outside_steps_s"] > 0.1 * share["gpu_busy_s"]
    held = 1 - share["outside_steps_s"] / share["gpu_busy_s"]
    assert (
        share["steps_hold"] == pytest.approx(held)
        and f"in steps ({held:.0%} of the GPU's)" in doc["classification"]["why"]
    )


def test_eager_generate_without_shapes_says_what_would_tell(store):
    """Eager, no record_shapes: nothing delimits the forwards inside a ProfilerStep and the cuDNN attention kernels
    do not name a phase, so the two loop iterations stay the steps, without a kind, and say what would give one."""
    run, steps = _steps("hf_generate_eager_noshapes", store)
    assert [s["detection"] for s in steps] == ["profiler_step"] * 2
    assert all(s["kind"] is None and "record_shapes=True" in s["kind_why"] for s in steps)


@pytest.mark.parametrize("name", ["hf_generate_eager_shapes", "hf_generate_cudagraph_shapes"])
def test_inductor_kernels_named_after_attention_are_not_attention(name, store):
    """TorchInductor's fused pointwise kernels carry the ATen ops they fuse in their names
    (``triton_poi_fused__scaled_dot_product_cudnn_attention_…``): they are elementwise, and the attention class
    holds exactly the cuDNN SDPA kernels of the raw file."""
    events, _ = _trace(name)
    sdpa = [e for e in events if e.get("cat") == "kernel" and "_sdpa_" in e["name"]]
    run = lltrace.ingest([HERE / f"{name}.json.gz"], store=store)
    got = run.sql("SELECT count(*) AS n, sum(dur_ns) AS ns FROM kernels WHERE kernel_class = 'attention'").to_dicts()[0]
    assert got["n"] == len(sdpa) == 2 * INFO["new_tokens"] * LAYERS
    assert got["ns"] == pytest.approx(float(sum(e["dur"] for e in sdpa)) * 1000, abs=len(sdpa))
    triton = run.sql("SELECT DISTINCT kernel_class FROM kernels WHERE starts_with(name, 'triton_')").to_dicts()
    assert [r["kernel_class"] for r in triton] in ([], ["elementwise"])


def test_cuda_graph_advice_is_a_bound_the_real_graph_run_respects(tmp_path):
    """A real what-if pair: the same generate() eager and with CUDA-graph decoding. The eager run's advice names
    HF's setting and bounds the gain (its launch gaps removed at best); the graph run's measured decode step lies
    between that best case and the eager step (the host work of HF's loop between forwards stays), and the graph
    run gets no such advice."""
    eager = lltrace.analyze([HERE / "hf_generate_eager_shapes.json.gz"], store=tmp_path / "a").to_dict()
    graph = lltrace.analyze([HERE / "hf_generate_cudagraph_shapes.json.gz"], store=tmp_path / "b").to_dict()
    (item,) = [a for a in eager["advice"] if a["bottleneck"] == "overhead"]
    assert "reduce-overhead" in item["setting"] and "cache_implementation" in item["setting"]
    decode = [it for it in graph["steps"]["items"] if it["kind"] == "decode"]
    measured = sum(it["dur_s"] for it in decode) / len(decode)
    assert item["expected_gain"]["to"] < measured < item["expected_gain"]["from"]
    assert all(it["cuda_graph"] for it in decode)
    assert not [a for a in graph["advice"] if a["bottleneck"] == "overhead"]


def test_a_forward_compiled_without_graphs_is_one_pass_per_call(store):
    """CompileConfig(mode="default"): Inductor without CUDA graphs, so each decode is a ``Torch-Compiled Region``
    whose compiled code calls cuDNN's attention op itself (no ``scaled_dot_product_attention`` around it), and with
    a static cache every decode has the same shapes: one pass per region, its shapes from the attention calls inside
    it, as the raw file counts them."""
    name = "hf_generate_compiled_shapes"
    events, _ = _trace(name)
    regions = sorted(
        (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name", "").startswith("Torch-Compiled Region")
    )
    inside = [
        e["args"]["Input Dims"][0]
        for e in events
        if e.get("name") == "aten::_scaled_dot_product_cudnn_attention" and any(a <= e["ts"] <= b for a, b in regions)
    ]
    prefill_q = [q for q in _sdpa_queries(events) if q[2] > 1]
    assert len(regions) == 2 * (INFO["variants"][name]["generated_tokens"] - 1) and len(set(map(str, inside))) == 1
    run, steps = _steps(name, store)
    decode = [s for s in steps if s["kind"] == "decode"]
    prefill = [s for s in steps if s["kind"] == "prefill"]
    assert len(steps) == len(decode) + len(prefill) and len(decode) == len(regions) == len(inside) // LAYERS
    assert all(s["kind_from"] == "shapes" and s["marker"].startswith("Torch-Compiled Region") for s in decode)
    assert sum(s["decode_tokens"] for s in decode) == sum(q[0] for q in inside) // LAYERS
    assert len(prefill) == len(prefill_q) // LAYERS == 2
    assert sum(s["prefill_tokens"] for s in prefill) == sum(q[0] * q[2] for q in prefill_q) // LAYERS
    # without record_shapes the same regions are the passes, of no kind (cuDNN's kernels name no phase)
    run, steps = _steps("hf_generate_compiled_noshapes", store / "noshapes")
    assert len(steps) == len(regions) and all(s["kind"] is None and "record_shapes" in s["kind_why"] for s in steps)


def test_diff_of_the_eager_and_graph_runs_counts_tokens_only_where_steps_give_them(tmp_path):
    """``lltrace diff`` of the real pair: 12 of the graph run's 14 decodes took their kind from the kernels and have
    no token counts, so tokens per step are the 2 that do (4, the batch, as the raw captures say) and no time per
    token is made up from those two (re-recording) steps; the terminal says over how many steps the sum runs."""
    from typer.testing import CliRunner

    from lltrace.cli import app

    paths = [str(HERE / f"hf_generate_{v}_shapes.json.gz") for v in ("eager", "cudagraph")]
    r = CliRunner().invoke(app, ["diff", "--store", str(tmp_path / "s"), "--json", *paths])
    assert r.exit_code == 0, r.output
    decode = json.loads(r.stdout)["components"]["decode"]
    assert decode["baseline_tokens_per_step"] == decode["incident_tokens_per_step"] == INFO["batch"]
    assert (decode["baseline_token_steps"], decode["incident_token_steps"]) == (14, 2)
    assert decode["baseline_s_per_token"] > 0 and decode["incident_s_per_token"] is None
    r = CliRunner().invoke(
        app, ["analyze", "--store", str(tmp_path / "s"), "--quiet", paths[1]], env={"COLUMNS": "200"}
    )
    assert r.exit_code == 0 and "8 (2 of 14 steps)" in r.output


def test_python_stacks_give_each_forward_its_own_bounds(store):
    """with_stack=True: the profiler records each module call as a python_function frame, and the outermost one that
    runs attention (``nn.Module: LlamaForCausalLM_0``) is a forward, from its first instant to its last. The steps
    begin where those frames begin, to the nanosecond of the raw file, their kinds and tokens from the attention
    calls inside each, and nearly all the GPU time lies in steps: only what each generate() launches before its
    first forward is outside, to the microsecond of the raw kernels' union."""
    name = "hf_generate_eager_stack"
    events, base = _trace(name)
    top = "nn.Module: LlamaForCausalLM_0"
    frames = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == top)
    assert len(frames) == 2 * INFO["variants"][name]["generated_tokens"]
    queries = [
        (e["ts"], e["args"]["Input Dims"][0]) for e in events if e.get("name") == "aten::scaled_dot_product_attention"
    ]
    run, steps = _steps(name, store)
    assert [s["marker"] for s in steps] == [top] * len(frames)
    assert [s["start_ns"] for s in steps] == [_ns(a, base) for a, _ in frames]
    for s, (a, b) in zip(steps, frames, strict=True):
        q = [d for t, d in queries if a <= t <= b]
        assert len(q) == LAYERS
        kind = "decode" if q[0][2] == 1 else "prefill"
        tokens = q[0][0] * q[0][2]
        assert (s["kind"], s["kind_from"]) == (kind, "shapes")
        assert s["decode_tokens" if kind == "decode" else "prefill_tokens"] == tokens
    before = _launched_before_first(events, frames)
    share = lltrace.analyze(run).to_dict()["steps"]["phase_share"]
    assert share["outside_steps_s"] == pytest.approx(float(_union_us(before)) / 1e6, abs=2e-9)
    assert share["outside_steps_s"] < 0.02 * share["gpu_busy_s"]

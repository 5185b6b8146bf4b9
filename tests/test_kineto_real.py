"""Every real profiler trace ingests; counts, times and classes match an independent json.load reading."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest
from conftest import raw_trace, torch_traces

import lltrace
from lltrace.parsers.kernel_classes import classify

OLD = {
    "Operator": "cpu_op",
    "Runtime": "cuda_runtime",
    "Kernel": "kernel",
    "Memcpy": "gpu_memcpy",
    "Memset": "gpu_memset",
}
GPU = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_sync"}
ANNOT = {"user_annotation", "gpu_user_annotation"}


def _ns(v) -> int:
    return int(Decimal(v) * 1000)


def _expected(path):
    d = raw_trace(str(path))
    ev = d["traceEvents"]
    base = int(d.get("baseTimeNanoseconds", 0))
    xs = [e for e in ev if e.get("ph") == "X"]
    has_real = any(e["ts"] != 0 for e in xs)
    xs = [e for e in xs if not (has_real and e["ts"] == 0)]
    cat = lambda e: OLD.get(e.get("cat"), e.get("cat"))  # noqa: E731
    kernels = [e for e in xs if cat(e) in GPU]
    annots = [e for e in xs if cat(e) in ANNOT]
    ops = [
        e
        for e in xs
        if cat(e) not in GPU | ANNOT
        and (cat(e) != "python_function" or "execute_model" in e["name"] or e["name"].startswith("nn.Module: "))
    ]
    flows = [e for e in ev if e.get("ph") in ("s", "f", "t")]
    by_class: Counter[str] = Counter()
    for e in kernels:
        by_class[classify(e["name"], cat(e))[0]] += _ns(e["dur"])
    return {
        "events": len(ev),
        "base": base,
        "kernels": kernels,
        "ops": len(ops),
        "annotations": len(annots),
        "flows": len(flows),
        "by_class": by_class,
        "first_kernel_ns": min((base + _ns(e["ts"]) for e in kernels), default=None),
        "first_op_ns": min((base + _ns(e["ts"]) for e in ops), default=None),
    }


@pytest.mark.parametrize("path", torch_traces(), ids=lambda p: p.parent.parent.name + "/" + p.name[:40])
def test_real_trace_matches_raw_json(path, store):
    exp = _expected(path)
    run = lltrace.ingest([path], store=store)
    src = run.metadata["sources"][0]
    assert src["records"] == exp["events"]
    rows = src["rows"]
    assert rows["kernels"] == len(exp["kernels"])
    assert rows["ops"] == exp["ops"]
    assert rows["annotations"] == exp["annotations"]
    assert rows["flows"] == exp["flows"]

    kernels = run.table("kernels")
    if exp["kernels"]:
        # Durations and start times are exact integer nanoseconds on the epoch clock.
        assert kernels["dur_ns"].sum() == sum(_ns(e["dur"]) for e in exp["kernels"])
        assert kernels["ts_ns"].min() == exp["first_kernel_ns"]
        got = {
            r["kernel_class"]: r["t"]
            for r in run.sql("SELECT kernel_class, sum(dur_ns)::BIGINT AS t FROM kernels GROUP BY 1").to_dicts()
        }
        assert got == dict(exp["by_class"])
    if exp["first_op_ns"] is not None:
        assert run.table("ops")["ts_ns"].min() == exp["first_op_ns"]


def test_version_fingerprints(store):
    from conftest import data_file

    cases = {
        ("torch", "hta_a100_recsys_8rank_oldformat.rank3.json.gz"): "2022",
        ("torch", "hta_a100_alexnet_benchmark_small.json.gz"): "2023",
        ("torch", "vllm_b200_tp8_gptoss_mxfp4_prefill_eager.rank0.json.gz"): "2024+",
        ("torch", "sglang_mi300x_qwen3-8b_decode_step.AMD.json.gz"): "ROCm",
    }
    for parts, expect in cases.items():
        run = lltrace.ingest([data_file(*parts)], store=store)
        assert expect in run.metadata["sources"][0]["version"], parts


def test_orphan_gpu_work_is_kept_and_flagged(store):
    from conftest import data_file

    path = data_file("torch", "hf_transformers_qwen1.5-0.5b_h100_prefill_forward_bs16x559.json.gz")
    d = raw_trace(str(path))
    launches = {
        e["args"]["correlation"]
        for e in d["traceEvents"]
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    gpu = [e for e in d["traceEvents"] if e.get("ph") == "X" and e.get("cat") in GPU]
    orphans = sum(1 for e in gpu if e["args"].get("correlation") not in launches)
    run = lltrace.ingest([path], store=store)
    assert orphans > 0
    assert run.table("kernels")["orphan"].sum() == orphans


def test_keep_python_keeps_stack_events(store):
    from conftest import data_file

    path = data_file("torch", "sglang_mi300x_qwen3-8b_decode_step.AMD.json.gz")
    d = raw_trace(str(path))
    py = [e["name"] for e in d["traceEvents"] if e.get("cat") == "python_function"]
    run = lltrace.ingest([path], store=store, keep_python=True)
    assert run.sql("SELECT count(*) AS n FROM ops WHERE cat = 'python_function'")["n"][0] == len(py)
    # by default the frames are dropped but for vLLM's execute_model and the module calls (step markers)
    kept = [n for n in py if "execute_model" in n or n.startswith("nn.Module: ")]
    assert kept == ["nn.Module: Sampler_0"]  # (this trace's one module frame: SGLang's sampler)
    dropped = lltrace.ingest([path], store=store)
    assert dropped.metadata["sources"][0]["dropped"]["python_function (not asked for)"] == len(py) - len(kept)


def test_multi_rank_folder_is_one_run_with_a_part_per_file(store, tmp_path):
    import shutil

    from conftest import data_file

    folder = tmp_path / "ranks"
    folder.mkdir()
    for name in ("hta_a100_ddp_nccl_2rank.rank0.json.gz", "hta_a100_recsys_8rank_oldformat.rank3.json.gz"):
        shutil.copy(data_file("torch", name), folder / name)
    (folder / "notes.txt").write_text("not a trace\n")
    run = lltrace.ingest([folder], store=store)
    srcs = run.metadata["sources"]
    assert [s["rank"] for s in srcs] == [0, 3]  # from distributedInfo.rank, not the file order
    assert [s.path.endswith("notes.txt") for s in run.skipped] == [True]
    parts = run.sql("SELECT part, count(*) AS n FROM kernels GROUP BY part ORDER BY part")
    assert parts["n"].to_list() == [s["rows"]["kernels"] for s in srcs]


def test_gpu_busy_is_also_given_over_the_traced_window(store):
    """One 1.76 µs kernel in a 13.7 s trace: busy 100 % of its own op span, but ~0 % of what was traced."""
    from conftest import DATA

    path = DATA / "torch" / "hta_a100_triton_kernel_tiny.json.gz"
    raw = raw_trace(str(path))["traceEvents"]
    events = [e for e in raw if e.get("ph") == "X" and e.get("cat") != "python_function"]
    start = min(e["ts"] for e in events)
    end = max(e["ts"] + e["dur"] for e in events)
    busy = sum(e["dur"] for e in events if e["cat"] == "kernel")
    run = lltrace.ingest([path], store=store)
    (row,) = run.sql("SELECT busy_s, busy_fraction, traced_s, traced_fraction FROM profiler_gpu_busy").to_dicts()
    assert row["traced_s"] == pytest.approx(float(end - start) / 1e6, abs=1e-9)
    assert row["busy_s"] == pytest.approx(float(busy) / 1e6, abs=1e-9)
    assert row["busy_fraction"] == pytest.approx(1.0) and row["traced_fraction"] < 1e-6


def test_launches_recorded_into_a_graph_are_said_so(store):
    """A real SGLang graph-capture trace (TraceLens, MI300X): the kernels launched during the stream capture
    ran no GPU op in the trace; every launch of the shared traces has its kernel."""
    from conftest import SAMPLES

    path = SAMPLES / "torch" / "sglang_mi300x_qwen3-8b_decode_graph_capture_bs32.AMD.json.gz"
    ev = raw_trace(str(path))["traceEvents"]
    on_gpu = {e["args"].get("correlation") for e in ev if e.get("cat") in GPU}
    runtime = [e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    launches = [e for e in runtime if "LaunchKernel" in e["name"]]
    unrun = sum(1 for e in launches if e["args"]["correlation"] not in on_gpu)
    captures = sum(1 for e in runtime if "StreamBeginCapture" in e["name"])
    assert (unrun, len(launches), captures) == (544, 546, 1)  # as read with the json module
    src = lltrace.ingest([path], store=store).metadata["sources"][0]
    assert src["launches_without_gpu_op"] == {"kernel_launches": len(launches), "without_gpu_op": unrun}
    said = f"{unrun:,} of {len(launches):,} kernel launches"
    assert any(said in w and "1 stream capture" in w for w in src["warnings"])
    for normal in torch_traces()[:10]:
        src = lltrace.ingest([normal], store=store).metadata["sources"][0]
        assert "launches_without_gpu_op" not in src, normal.name


def test_a_range_profiler_trace_is_said_to_have_no_kernels(store):
    """A real trace taken with the CUPTI range profiler (HTA's test data, A100): Kineto records counter ranges
    (``cuda_profiler_range``) in place of kernels, so no launch has its GPU op; the warning names the profiler."""
    from conftest import SAMPLES

    path = SAMPLES / "torch" / "hta_a100_cupti_range_profiler.json.gz"
    ev = raw_trace(str(path))["traceEvents"]
    launches = [e for e in ev if e.get("cat") == "cuda_runtime" and "LaunchKernel" in e["name"]]
    ranges = sum(1 for e in ev if e.get("cat") == "cuda_profiler_range")
    assert (len(launches), ranges, sum(1 for e in ev if e.get("cat") in GPU)) == (77, 77, 0)  # the json module's
    src = lltrace.ingest([path], store=store).metadata["sources"][0]
    assert src["launches_without_gpu_op"] == {"kernel_launches": 77, "without_gpu_op": 77}
    assert any(
        "77 of 77 kernel launches" in w and "CUPTI range profiler" in w and "77 cuda_profiler_range" in w
        for w in src["warnings"]
    )

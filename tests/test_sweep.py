"""benchmarks/sweep.py: one line per file from elsewhere, with what lltrace made of it (or its one-line error)."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "sample_traces" / "hf_generate_gpu" / "hf_generate_eager_shapes.json.gz"


def _sweep_module():
    spec = importlib.util.spec_from_file_location("sweep", REPO / "benchmarks" / "sweep.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_real_trace_reads_as_its_raw_file_counts_and_a_refused_file_gives_its_error(tmp_path: Path) -> None:
    sweep = _sweep_module()
    events = json.loads(gzip.open(TRACE).read())["traceEvents"]
    kernels = sum(e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") for e in events)
    line = sweep.sweep(TRACE, tmp_path / "store")
    assert line.startswith("pytorch-kineto (compiled)")
    assert f"kernels={kernels:,}" in line
    # 2 generate() calls of 1 prefill and 7 decodes each (run_info.json)
    assert "steps 16 {'prefill': 2, 'decode': 14}" in line
    odd = tmp_path / "notes.txt"
    odd.write_text("not a trace\n")
    refused = sweep.sweep(odd, tmp_path / "store")
    assert refused.startswith("exit 1 in ") and str(odd) in refused

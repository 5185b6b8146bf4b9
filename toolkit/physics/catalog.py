"""GPU and model catalog: figures with their sources (``physics/data/*.csv``), and name matching.

Names are matched case-insensitively with common spellings (``A100-80GB``, ``a100``, ``H100-SXM``,
``NVIDIA H100 80GB HBM3``, ``meta-llama/Llama-2-7b-hf``).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from lltrace.errors import AnalysisError

BYTES_PER_PARAM = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5, "mxfp4": 0.53}


@dataclass(frozen=True)
class GPU:
    """Peak figures of one accelerator (dense, no sparsity)."""

    name: str
    vendor: str
    memory_gb: float
    hbm_gbps: float
    bf16_tflops: float
    fp8_tflops: float | None
    source: str
    achievable_bw_fraction: float = 1.0
    achievable_flops_fraction: float = 1.0
    achievable_source: str = ""
    link_gbps: float | None = None  # GPU-to-GPU bandwidth each way (NVLink / Infinity Fabric / PCIe)
    link_source: str = ""

    def peak_flops(self, precision: str = "bf16") -> float:
        """Peak dense FLOP/s at a precision (fp8/int8 fall back to bf16 where the GPU lacks them)."""
        if precision in ("fp8", "int8", "int4", "mxfp4") and self.fp8_tflops:
            return self.fp8_tflops * 1e12
        return self.bf16_tflops * 1e12


@dataclass(frozen=True)
class Model:
    """Shape of one model architecture."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    params_b: float
    active_params_b: float
    source: str

    def kv_bytes_per_token(self, kv_bytes: float = 2.0) -> float:
        """Bytes of K and V cached per token over all layers."""
        return 2 * self.layers * self.kv_heads * self.head_dim * kv_bytes


def _norm(name: str) -> str:
    s = name.strip().lower().replace("_", "-").replace(" ", "-")
    s = re.sub(r"^(nvidia-|amd-)", "", s)
    return re.sub(r"-+", "-", s)


def _rows(file: str) -> list[dict[str, str]]:
    text = resources.files("lltrace.physics").joinpath("data", file).read_text()
    return list(csv.DictReader(text.splitlines()))


@lru_cache(maxsize=1)
def gpus() -> tuple[GPU, ...]:
    """All catalog GPUs."""
    return tuple(
        GPU(
            r["name"],
            r["vendor"],
            float(r["memory_gb"]),
            float(r["hbm_gbps"]),
            float(r["bf16_tflops"]),
            float(r["fp8_tflops"]) if r["fp8_tflops"] else None,
            r["source"],
            float(r["achievable_bw_fraction"]),
            float(r["achievable_flops_fraction"]),
            r["achievable_source"],
            float(r["link_gbps"]) if r.get("link_gbps") else None,
            r.get("link_source", ""),
        )
        for r in _rows("gpus.csv")
    )


@lru_cache(maxsize=1)
def models() -> tuple[Model, ...]:
    """All catalog models."""
    return tuple(
        Model(
            r["name"],
            int(r["layers"]),
            int(r["hidden"]),
            int(r["heads"]),
            int(r["kv_heads"]),
            int(r["head_dim"]),
            float(r["params_b"]),
            float(r["active_params_b"]),
            r["source"],
        )
        for r in _rows("models.csv")
    )


def _aliases(kind: str) -> dict[str, str]:
    out = {}
    for r in _rows(kind):
        out[_norm(r["name"])] = r["name"]
        for a in r["aliases"].split("|"):
            if a:
                out[_norm(a)] = r["name"]
    return out


def find_gpu(name: str, memory_bytes: int | None = None) -> GPU | None:
    """Match a GPU name (user option or ``deviceProperties.name``) to the catalog, or None."""
    key = _norm(name)
    aliases = _aliases("gpus.csv")
    hit = aliases.get(key)
    if hit is None:
        # deviceProperties spellings such as "NVIDIA H100 80GB HBM3" or "NVIDIA A100-SXM4-80GB": an alias as a
        # whole part of the name ("l4" is not in "l40", "a10" not in "a10g", which are other GPUs).
        for alias in sorted(aliases, key=len, reverse=True):
            if alias and re.search(rf"(?<![a-z0-9]){re.escape(alias)}(?![a-z0-9])", key):
                hit = aliases[alias]
                break
    if hit is None:
        return None
    gpu = next(g for g in gpus() if g.name == hit)
    if gpu.name.startswith("A100") and memory_bytes:
        gb = memory_bytes / 2**30
        gpu = next(g for g in gpus() if g.name == ("A100-80GB" if gb > 48 else "A100-40GB"))
    return gpu


def find_model(name: str) -> Model | None:
    """Match a model name (``llama-2-7b``, ``meta-llama/Llama-2-7b-hf``) to the catalog, or None."""
    hit = _aliases("models.csv").get(_norm(name))
    return next((m for m in models() if m.name == hit), None) if hit else None


def check_precision(*names: str) -> None:
    """An ``AnalysisError`` naming the known precisions when one of ``names`` is not among them."""
    for q in names:
        if q not in BYTES_PER_PARAM:
            raise AnalysisError(f"unknown precision {q!r}; known: {', '.join(BYTES_PER_PARAM)}")


def gpu_or_error(name: str) -> GPU:
    """``find_gpu`` that raises a one-line error naming the known GPUs."""
    gpu = find_gpu(name)
    if gpu is None:
        raise AnalysisError(f"unknown GPU {name!r}; known: {', '.join(g.name for g in gpus())}")
    return gpu


def model_or_error(name: str) -> Model:
    """``find_model`` that raises a one-line error naming the known models."""
    model = find_model(name)
    if model is None:
        raise AnalysisError(f"unknown model {name!r}; known: {', '.join(m.name for m in models())}")
    return model


def gpu_of_run(metadata: dict[str, Any], option: str | None = None) -> tuple[GPU | None, str | None]:
    """The GPU a run ran on, and where that is known from: the option (``--gpu``), else the GPU its sources
    name (a profiler trace's ``deviceProperties``) when the catalog knows it, else (None, None)."""
    if option:
        return gpu_or_error(option), "option --gpu"
    det = (metadata.get("detected") or {}).get("gpu")
    if det and det.get("name"):
        found = find_gpu(det["name"], det.get("memory_bytes"))
        if found:
            return found, det.get("origin")
    return None, None

"""The one roofline: what a forward step of a model costs on a GPU, from its FLOPs and the bytes it reads.

Every figure lltrace computes from hardware reads this module: ``estimate`` (one request shape), the per-step
bound of ``analyze --model --gpu``, the replay's reference step cost and its hardware what-ifs (another GPU,
precision or tensor-parallel degree), and the FP8 advice. The physics (docs/latency-model.md):

* a step's FLOPs: 2 per active parameter per token (the matmuls) plus attention, 4 x layers x heads x
  head_dim per (query, key) pair, the pairs halved for a causal prefill;
* its bytes: every active weight read once, plus the KV cache of its context;
* its time: the larger of FLOPs at the GPU's achievable FLOP/s and bytes at its achievable bandwidth (the
  catalog's achievable fractions of peak, fitted to real A100 operator timings and named in the catalog);
  which of the two is larger is the step's bound.

Everything here is an estimate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lltrace.errors import AnalysisError
from lltrace.physics.catalog import BYTES_PER_PARAM, GPU, Model, check_precision

MEMORY_FRACTION = 0.9  # vLLM's default gpu_memory_utilization: the share of GPU memory the engine takes


@dataclass(frozen=True)
class Rates:
    """What one GPU achieves at one precision."""

    bandwidth: float  # HBM bytes/s
    flops: float  # dense FLOP/s


def achievable(gpu: GPU, precision: str = "bf16") -> Rates:
    """The GPU's achievable bandwidth and FLOP/s at a weight precision (catalog fractions of its peaks)."""
    return Rates(
        gpu.hbm_gbps * 1e9 * gpu.achievable_bw_fraction, gpu.peak_flops(precision) * gpu.achievable_flops_fraction
    )


def weight_bytes(model: Model, precision: str = "bf16") -> float:
    """Bytes of the active weights at a precision: what every step reads once."""
    return model.active_params_b * 1e9 * BYTES_PER_PARAM[precision]


def matmul_flops_per_token(model: Model) -> float:
    """FLOPs of the matmuls for one token: 2 per active parameter."""
    return 2 * model.active_params_b * 1e9


@dataclass(frozen=True)
class Roofline:
    """Roofline reading of one engine step (at the GPU's achievable rates)."""

    flops: float
    bytes: float
    intensity: float  # FLOPs per byte
    ridge: float  # the intensity above which the step is compute-bound
    bound: str  # compute | memory
    compute_s: float
    memory_s: float
    min_time_s: float  # max(compute_s, memory_s)


def step_roofline(
    model: Model,
    gpu: GPU,
    tokens: int,
    context_tokens: int | None = None,
    requests: int | None = None,
    weight_precision: str = "bf16",
    kv_bytes: float = 2.0,
) -> Roofline:
    """FLOPs, bytes and time of one forward step of ``tokens`` tokens, and whether it is compute- or memory-bound.

    Attention pairs are ``tokens x context / requests`` (halved when every token is a new prompt token, a
    causal prefill); its KV cache of ``context_tokens`` is read once. ``context_tokens`` None leaves attention
    and KV out (weights only).
    """
    ctx = context_tokens or 0
    flops = matmul_flops_per_token(model) * tokens
    if ctx:
        pairs = tokens * ctx / max(requests or 1, 1)
        if ctx == tokens and tokens > (requests or 1):
            pairs /= 2
        flops += 4 * model.layers * model.heads * model.head_dim * pairs
    byts = weight_bytes(model, weight_precision) + model.kv_bytes_per_token(kv_bytes) * ctx
    rates = achievable(gpu, weight_precision)
    compute_s, memory_s = flops / rates.flops, byts / rates.bandwidth
    return Roofline(
        flops=flops,
        bytes=byts,
        intensity=flops / byts,
        ridge=rates.flops / rates.bandwidth,
        bound="compute" if compute_s >= memory_s else "memory",
        compute_s=compute_s,
        memory_s=memory_s,
        min_time_s=max(compute_s, memory_s),
    )


def prefill_step(model: Model, gpu: GPU, input_tokens: int, quant: str = "bf16", kv_dtype: str = "bf16") -> Roofline:
    """One request's prompt prefilled in one step (causal attention over the prompt)."""
    return step_roofline(model, gpu, input_tokens, input_tokens, 1, quant, BYTES_PER_PARAM[kv_dtype])


def decode_step(model: Model, gpu: GPU, context_tokens: float, quant: str = "bf16", kv_dtype: str = "bf16") -> Roofline:
    """One request's decode step at a context: one token, the weights and its KV cache read once."""
    return step_roofline(model, gpu, 1, round(context_tokens), 1, quant, BYTES_PER_PARAM[kv_dtype])


def kv_memory_bytes(model: Model, gpu: GPU, quant: str, tp: int = 1, memory_fraction: float = MEMORY_FRACTION) -> float:
    """Bytes left for the KV cache: ``memory_fraction`` of ``tp`` GPUs' memory less the weights at ``quant``."""
    return tp * gpu.memory_gb * 1e9 * memory_fraction - model.params_b * 1e9 * BYTES_PER_PARAM[quant]


def kv_blocks_moved(
    blocks: int,
    model: Model | None,
    here: tuple[GPU | None, str, str, int],
    there: tuple[GPU, str, str, int],
    memory_fraction: float = MEMORY_FRACTION,
) -> tuple[int, str]:
    """A run's KV blocks at another (GPU, weights, KV dtype, TP degree): scaled by the KV bytes the memory left
    after the weights holds, there against here. Without the model only a KV dtype change is known."""
    (g0, q0, kv0, tp0), (g1, q1, kv1, tp1) = here, there
    kv_ratio = BYTES_PER_PARAM[kv0] / BYTES_PER_PARAM[kv1]
    if model is None or g0 is None:
        if (g0, q0, tp0) == (g1, q1, tp1):
            return int(blocks * kv_ratio), f"blocks x {kv_ratio:g} (KV bytes per element {kv0} -> {kv1})"
        return blocks, "kept: the model is unknown (--model), so the memory its weights leave is unknown"
    there_bytes = kv_memory_bytes(model, g1, q1, tp1, memory_fraction)
    if there_bytes <= 0:
        raise AnalysisError(f"{model.name} at {q1} does not fit in {tp1} x {g1.name}")
    ratio = there_bytes / kv_memory_bytes(model, g0, q0, tp0, memory_fraction) * kv_ratio
    return int(blocks * ratio), (
        f"blocks x {ratio:.3f}: (TP x memory x {memory_fraction} - weights) / KV bytes per token, "
        f"{tp1} x {g1.name} {q1}/{kv1} over {tp0} x {g0.name} {q0}/{kv0}"
    )


def transfer_ratios(
    gpu_from: GPU,
    gpu_to: GPU,
    *,
    quant_from: str = "bf16",
    quant_to: str = "bf16",
    kv_from: str = "bf16",
    kv_to: str = "bf16",
) -> dict[str, float]:
    """How a step's three costs scale from one GPU and precision to another: the per-step weight read
    (bandwidth and bytes per parameter), the per-prefill-token matmul FLOPs (FLOP/s at the precision) and
    the per-decode-token KV read (bandwidth and bytes per KV element); each is there over here."""
    check_precision(quant_from, quant_to, kv_from, kv_to)
    a, b = achievable(gpu_from, quant_from), achievable(gpu_to, quant_to)
    bw = a.bandwidth / b.bandwidth
    return {
        "per_step": bw * BYTES_PER_PARAM[quant_to] / BYTES_PER_PARAM[quant_from],
        "per_prefill_token": a.flops / b.flops,
        "per_decode_token": bw * BYTES_PER_PARAM[kv_to] / BYTES_PER_PARAM[kv_from],
    }


def all_reduce_s_per_token(model: Model, gpu: GPU, tp: int) -> float:
    """Each token's two all-reduces per layer at tensor-parallel degree ``tp`` (ring: ``2 (tp - 1) / tp`` of
    ``hidden`` x 2 bytes each way over the GPU's link). Bandwidth only: NCCL's per-call latency is not in the
    catalog, so this is a lower bound."""
    if tp < 1:
        raise AnalysisError(f"tensor-parallel degree {tp}: expected 1 or more")
    if tp == 1:
        return 0.0
    if not gpu.link_gbps:
        raise AnalysisError(f"the catalog has no GPU-to-GPU bandwidth for {gpu.name}")
    return model.layers * 2 * 2 * (tp - 1) / tp * model.hidden * 2 / (gpu.link_gbps * 1e9)


def reference_step(
    model: Model, gpu: GPU, *, quant: str = "bf16", kv_dtype: str = "bf16", mean_context: float = 1024.0
) -> dict[str, float]:
    """The roofline as a linear step cost, for a run with no timings of its own: per step every weight read
    once at achievable bandwidth; per prefill token its matmul FLOPs at achievable FLOP/s; per decode token
    its KV cache of ``mean_context`` tokens read once (memory-bound decode, below the ridge batch)."""
    check_precision(quant, kv_dtype)
    rates = achievable(gpu, quant)
    return {
        "per_step_s": weight_bytes(model, quant) / rates.bandwidth,
        "per_prefill_token_s": matmul_flops_per_token(model) / rates.flops,
        "per_decode_token_s": model.kv_bytes_per_token(BYTES_PER_PARAM[kv_dtype]) * mean_context / rates.bandwidth,
    }


def kv_blocks(
    model: Model, gpu: GPU, *, quant: str = "bf16", kv_dtype: str = "bf16", block_size: int = 16, tp: int = 1
) -> int:
    """KV-cache blocks of ``block_size`` tokens that fit in the memory the weights leave."""
    free = kv_memory_bytes(model, gpu, quant, tp)
    if free <= 0:
        raise AnalysisError(f"{model.name} at {quant} does not fit in {gpu.name}'s {gpu.memory_gb:g} GB")
    return int(free // (model.kv_bytes_per_token(BYTES_PER_PARAM[kv_dtype]) * block_size))


def describe(model: Model, gpu: GPU, quant: str) -> dict[str, Any]:
    """The figures a roofline estimate rests on, with their sources."""
    return {
        "model": {"name": model.name, "active_params_b": model.active_params_b, "source": model.source},
        "gpu": {
            "name": gpu.name,
            "hbm_gbps": gpu.hbm_gbps,
            "peak_tflops": gpu.peak_flops(quant) / 1e12,
            "achievable_bw_fraction": gpu.achievable_bw_fraction,
            "achievable_flops_fraction": gpu.achievable_flops_fraction,
            "source": gpu.source,
            "achievable_source": gpu.achievable_source,
        },
    }

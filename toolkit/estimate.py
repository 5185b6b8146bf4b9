"""``estimate``: the latency model (DESIGN.md) for one request shape.

From measured rates (``prefill_tps``, ``decode_ms_per_token``), or from a catalog model and GPU: prefill at
the GPU's achievable dense FLOP/s (compute-bound), decode at ``achievable HBM bandwidth / (weight bytes +
KV bytes per token x context)`` (bandwidth-bound). The achievable fractions of peak come from the catalog,
which names their source (a fit to real A100 timings). Every figure here is an estimate.
"""

from __future__ import annotations

from typing import Any

from lltrace.catalog import BYTES_PER_PARAM, gpu_or_error, model_or_error
from lltrace.errors import AnalysisError


def estimate(
    *,
    input_tokens: int,
    output_tokens: int,
    model: str | None = None,
    gpu: str | None = None,
    quant: str = "bf16",
    kv_dtype: str = "bf16",
    prefill_tps: float | None = None,
    decode_ms_per_token: float | None = None,
) -> dict[str, Any]:
    """Prefill/decode time, shares and crossover for one request shape (the ``estimate --json`` document)."""
    if input_tokens < 0 or output_tokens < 0:
        raise AnalysisError("input and output token counts must not be negative")
    inputs: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    bound: dict[str, str | None] = {"prefill": None, "decode": None}
    if prefill_tps is not None or decode_ms_per_token is not None:
        if prefill_tps is None or decode_ms_per_token is None:
            raise AnalysisError("give both --prefill-tps and --decode-ms-per-token, or --model and --gpu")
        tps, spt = float(prefill_tps), float(decode_ms_per_token) / 1e3
        inputs["rates"] = {"prefill_tokens_per_s": tps, "decode_s_per_token": spt, "origin": "given"}
    else:
        if not model or not gpu:
            raise AnalysisError("give --model and --gpu, or --prefill-tps and --decode-ms-per-token")
        m, g = model_or_error(model), gpu_or_error(gpu)
        if quant not in BYTES_PER_PARAM or kv_dtype not in BYTES_PER_PARAM:
            raise AnalysisError(f"unknown precision; known: {', '.join(BYTES_PER_PARAM)}")
        flops = g.peak_flops(quant) * g.achievable_flops_fraction
        bw = g.hbm_gbps * 1e9 * g.achievable_bw_fraction
        weight_bytes = m.active_params_b * 1e9 * BYTES_PER_PARAM[quant]
        kv_per_token = m.kv_bytes_per_token(BYTES_PER_PARAM[kv_dtype])
        # prefill: 2 FLOPs per active parameter per token, plus causal attention over the prompt
        attn = 4 * m.layers * m.heads * m.head_dim * input_tokens / 2
        tps = flops / (2 * m.active_params_b * 1e9 + attn) if input_tokens else flops / (2 * m.active_params_b * 1e9)
        # decode: every weight and the KV cache of the mean context read once per token
        context = input_tokens + output_tokens / 2
        spt = (weight_bytes + kv_per_token * context) / bw
        bound = {"prefill": "compute", "decode": "memory"}
        inputs |= {
            "model": {"name": m.name, "active_params_b": m.active_params_b, "source": m.source},
            "gpu": {
                "name": g.name,
                "hbm_gbps": g.hbm_gbps,
                "peak_tflops": g.peak_flops(quant) / 1e12,
                "achievable_bw_fraction": g.achievable_bw_fraction,
                "achievable_flops_fraction": g.achievable_flops_fraction,
                "source": g.source,
                "achievable_source": g.achievable_source,
            },
            "quant": quant,
            "kv_dtype": kv_dtype,
            "mean_decode_context_tokens": context,
        }
    prefill_s = input_tokens / tps if tps else 0.0
    decode_s = output_tokens * spt
    total = prefill_s + decode_s
    return {
        "prefill_s": prefill_s,
        "decode_s": decode_s,
        "decode_s_per_token": spt,
        "decode_tokens_per_s": 1 / spt if spt else None,
        "prefill_tokens_per_s": tps,
        "prefill_share": prefill_s / total if total else None,
        "decode_share": decode_s / total if total else None,
        "crossover_input_tokens": tps * output_tokens * spt,
        "bound": bound,
        "inputs": inputs,
        "basis": "estimated",
    }

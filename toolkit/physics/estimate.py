"""``estimate``: the latency model (docs/latency-model.md) for one request shape.

From measured rates (``prefill_tps``, ``decode_ms_per_token``), or from a catalog model and GPU through the
roofline (``lltrace.physics.roofline``): the prompt's prefill step and a decode step at the mean context
(prompt + half the output), each taking the larger of its compute and memory time, with the bound that says
which. ``prefill_tokens_per_s`` is the compute-bound prefill rate at this prompt length (the crossover length
``L*`` is computed with it: long prompts are compute-bound); a prompt so short that reading the weights takes
longer than its FLOPs is memory-bound and takes the weight read. Every figure here is an estimate.
"""

from __future__ import annotations

from typing import Any

from lltrace.documents import plain
from lltrace.errors import AnalysisError
from lltrace.physics.catalog import check_precision, gpu_or_error, model_or_error
from lltrace.physics.roofline import decode_step, describe, prefill_step


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
    prefill_floor = 0.0  # the prefill step's weight read, where it bounds the step
    if prefill_tps is not None or decode_ms_per_token is not None:
        if prefill_tps is None or decode_ms_per_token is None:
            raise AnalysisError("give both --prefill-tps and --decode-ms-per-token, or --model and --gpu")
        tps, spt = float(prefill_tps), float(decode_ms_per_token) / 1e3
        inputs["rates"] = {"prefill_tokens_per_s": tps, "decode_s_per_token": spt, "origin": "given"}
    else:
        if not model or not gpu:
            raise AnalysisError("give --model and --gpu, or --prefill-tps and --decode-ms-per-token")
        m, g = model_or_error(model), gpu_or_error(gpu)
        check_precision(quant, kv_dtype)
        context = input_tokens + output_tokens / 2
        prefill = prefill_step(m, g, max(input_tokens, 1), quant, kv_dtype)
        decode = decode_step(m, g, context, quant, kv_dtype)
        tps = max(input_tokens, 1) / prefill.compute_s
        spt = decode.min_time_s
        prefill_floor = prefill.memory_s if input_tokens else 0.0
        bound = {"prefill": prefill.bound, "decode": decode.bound}
        inputs |= describe(m, g, quant) | {"quant": quant, "kv_dtype": kv_dtype, "mean_decode_context_tokens": context}
    prefill_s = input_tokens / tps if tps else 0.0
    if bound["prefill"] == "memory":
        prefill_s = max(prefill_s, prefill_floor)
    decode_s = output_tokens * spt
    total = prefill_s + decode_s
    doc = {
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
    return plain(doc, "estimate")

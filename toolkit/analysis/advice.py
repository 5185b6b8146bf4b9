"""Advice: each item tied to one bottleneck (engine, pipe, room, queue, overhead, interference, prefix),
fired only on measured evidence, with the expected gain computed from the run's own numbers, the formula and
its inputs named. Thresholds: ``queries/thresholds.csv``.
"""

from __future__ import annotations

from typing import Any

from lltrace.physics.catalog import GPU, Model
from lltrace.physics.estimate import estimate
from lltrace.queries import thresholds


def fp8_decode_ratio(model: Model | None, gpu: GPU | None, workload: dict | None) -> dict[str, Any] | None:
    """FP8 over BF16 decode time per token from the roofline, at the run's mean prompt and output lengths."""
    if model is None or gpu is None:
        return None
    n_in = round((workload or {}).get("input_mean") or 512)
    n_out = round((workload or {}).get("output_mean") or 128)
    bf16 = estimate(model=model.name, gpu=gpu.name, input_tokens=n_in, output_tokens=n_out)
    fp8 = estimate(model=model.name, gpu=gpu.name, input_tokens=n_in, output_tokens=n_out, quant="fp8")
    return {"ratio": fp8["decode_s_per_token"] / bf16["decode_s_per_token"], "model": model.name, "gpu": gpu.name}


def _gain(metric: str, before: float, after: float, unit: str = "s") -> dict[str, Any]:
    return {"metric": metric, "from": before, "to": after, "unit": unit}


def advise_steps(steps: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Advice from profiler steps alone: decode steps whose GPU idles while the CPU launches kernels."""
    if not steps or steps.get("source") != "profiler":
        return []
    eager = [
        it
        for it in steps["items"]
        if it["kind"] == "decode"
        and it.get("cuda_graph") is False
        and it.get("gpu_idle_s") is not None
        and it.get("dur_s")
    ]
    if not eager:
        return []
    idle = sum(it["gpu_idle_s"] for it in eager) / len(eager)
    wall = sum(it["dur_s"] for it in eager) / len(eager)
    if idle / wall < thresholds()["launch_gap_share_for_advice"]:
        return []
    return [
        {
            "bottleneck": "overhead",
            "action": "Capture decode steps as CUDA graphs: the GPU idles while the CPU launches kernels one by one",
            "expected_gain": _gain("mean decode step time", wall, wall - idle),
            "formula": "step_wall_mean - gpu_idle_mean (launch gaps removed at best)",
            "evidence": {"eager_decode_steps": len(eager), "gpu_idle_s_mean": idle, "step_wall_s_mean": wall},
        }
    ]


def advise(
    att: dict[str, Any],
    label: str,
    kv: dict[str, Any] | None,
    interference: dict[str, Any] | None = None,
    workload: dict[str, Any] | None = None,
    fp8_decode_ratio: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Advice items, most valuable (seconds saved per request) first.

    ``fp8_decode_ratio`` (from the roofline, when the model and GPU are known) replaces the generic
    halving bound of weight quantization by the modelled ratio of FP8 to BF16 decode time per token.
    """
    t = thresholds()
    n = att["requests"]
    mean = {k: att[f"{k}_s"] / n for k in ("e2e", "queue", "prefill", "decode", "overhead")}
    items: list[tuple[float, dict[str, Any]]] = []
    kv_wait_mean = (kv or {}).get("kv_wait_s", 0.0) / n if kv and kv.get("kv_wait_s") is not None else None
    if kv and kv_wait_mean and (kv.get("preemptions") or 0) + (kv.get("peak_waiting_capacity") or 0) > 0:
        to = mean["queue"] - kv_wait_mean
        items.append(
            (
                kv_wait_mean,
                {
                    "bottleneck": "room",
                    "action": "Give the KV cache more room: more KV blocks (gpu_memory_utilization, a larger GPU "
                    "or more tensor-parallel ranks), an FP8 KV cache (half the bytes per token), or fewer "
                    "concurrent sequences with admission control",
                    "expected_gain": _gain("mean queue time per request", mean["queue"], to),
                    "formula": "queue_mean - kv_wait_mean (the queueing spent waiting for KV room removed at best)",
                    "evidence": {
                        "kv_wait_s_total": kv["kv_wait_s"],
                        "preemptions": kv.get("preemptions"),
                        "peak_kv_usage": kv.get("peak_usage"),
                        "peak_waiting_for_capacity": kv.get("peak_waiting_capacity"),
                        "requests": n,
                    },
                },
            )
        )
    if label == "queue-bound" or (label == "capacity-bound" and mean["queue"] > (kv_wait_mean or 0)):
        rest = mean["queue"] - (kv_wait_mean or 0)
        if rest > 0:
            items.append(
                (
                    rest,
                    {
                        "bottleneck": "queue",
                        "action": "Add replicas or raise the batch limits (max_num_seqs, max_num_batched_tokens): "
                        "requests wait behind other work, not for memory",
                        "expected_gain": _gain("mean queue time per request", mean["queue"], mean["queue"] - rest),
                        "formula": "queue_mean - kv_wait_mean (the load part of queueing removed at best)",
                        "evidence": {"queue_share": att["queue_share"], "queue_mean_s": mean["queue"]},
                    },
                )
            )
    spt = att.get("decode_s_per_token")
    if spt and att["decode_share"] >= t["pipe_share_for_advice"]:
        if fp8_decode_ratio:
            ratio = fp8_decode_ratio["ratio"]
            formula = (
                f"decode_mean x (1 - {ratio:.2f}): the roofline's FP8/BF16 decode time per token for "
                f"{fp8_decode_ratio['model']} on {fp8_decode_ratio['gpu']} at this run's mean context "
                "(weights and KV read per token; estimate)"
            )
        else:
            ratio = 0.5
            formula = (
                "decode_mean x (1 - 1/2): halving bytes per token (16 -> 8-bit weights) halves a "
                "bandwidth-bound step (upper bound; give --model and --gpu for the roofline's figure)"
            )
        saved = mean["decode"] * (1 - ratio)
        items.append(
            (
                saved,
                {
                    "bottleneck": "pipe",
                    "action": "Cut the bytes read per decode step: FP8/INT8 weights or speculative decoding "
                    "(more tokens per weight read)",
                    "expected_gain": _gain("mean decode time per request", mean["decode"], mean["decode"] - saved),
                    "formula": formula,
                    "evidence": {
                        "decode_share": att["decode_share"],
                        "decode_s_per_token": spt,
                        "mean_output_tokens": att.get("mean_output_tokens"),
                    },
                },
            )
        )
    tps = att.get("prefill_tokens_per_s")
    if tps and att["prefill_share"] >= t["engine_share_for_advice"]:
        saved = mean["prefill"] / 2
        items.append(
            (
                saved,
                {
                    "bottleneck": "engine",
                    "action": "Speed up prefill: prefix caching where prompts share prefixes, FP8 compute, or a larger "
                    "chunked-prefill token budget",
                    "expected_gain": _gain("mean prefill time per request", mean["prefill"], mean["prefill"] - saved),
                    "formula": "prefill_mean x (1 - 1/2): FP8 doubles dense FLOP/s on a compute-bound prefill (upper "
                    "bound; estimate)",
                    "evidence": {"prefill_share": att["prefill_share"], "prefill_tokens_per_s": tps},
                },
            )
        )
    if interference and (interference.get("share_of_parent") or 0) >= t["interference_share_for_advice"]:
        lost = interference["total_s"] / n
        items.append(
            (
                lost,
                {
                    "bottleneck": "interference",
                    "action": "Keep prefills from stalling decodes: a smaller chunked-prefill token budget, or "
                    "prefill-decode disaggregation",
                    "expected_gain": _gain("mean decode time per request", mean["decode"], mean["decode"] - lost),
                    "formula": "decode_mean - interference_mean (the decode time lost to mixed steps removed at best)",
                    "evidence": {
                        "interference_share_of_decode": interference["share_of_parent"],
                        "mixed_steps": interference.get("mixed_steps"),
                    },
                },
            )
        )
    reuse = (workload or {}).get("prefix_reuse")
    if reuse and reuse >= t["prefix_reuse_for_advice"] and att.get("prefill_s"):
        saved = mean["prefill"] * reuse
        items.append(
            (
                saved,
                {
                    "bottleneck": "engine",
                    "action": "Turn on prefix caching: a measured share of prompt blocks repeats an earlier "
                    "request's prefix",
                    "expected_gain": _gain("mean prefill time per request", mean["prefill"], mean["prefill"] - saved),
                    "formula": "prefill_mean x (1 - prefix_reuse): reused blocks need no recompute (upper bound: cache "
                    "capacity and eviction not modelled)",
                    "evidence": {"prefix_reuse": reuse, "prefix_blocks": (workload or {}).get("prefix_blocks")},
                },
            )
        )
    if att["overhead_share"] >= t["overhead_share_for_advice"]:
        items.append(
            (
                mean["overhead"],
                {
                    "bottleneck": "overhead",
                    "action": "Look outside the engine: tokenization, detokenization, the API server, network "
                    "and client",
                    "expected_gain": _gain("mean overhead per request", mean["overhead"], 0.0),
                    "formula": "e2e - (queue + prefill + decode), removed at best",
                    "evidence": {"overhead_share": att["overhead_share"]},
                },
            )
        )
    return [item for _, item in sorted(items, key=lambda t: -t[0])]

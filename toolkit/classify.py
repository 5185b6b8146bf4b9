"""Classification of a run and the advice rules, from the attribution views' numbers.

The thresholds are written once, here, and shown in the output:

- a component whose share of the summed end-to-end latency is at least ``DOMINANT_SHARE`` names the run:
  queue first (``queue-bound``), then prefill (``prefill-dominant``), then decode (``decode-dominant``);
- a queue-bound run is ``capacity-bound`` when at least ``CAPACITY_PART_OF_QUEUE`` of its queue time was
  spent while the engine reported requests waiting for KV-cache room;
- otherwise the run is ``balanced``.

Every advice item is tied to one bottleneck, fires only on measured evidence and carries the expected gain
computed from the run's own numbers, with the formula and its inputs named.
"""

from __future__ import annotations

from typing import Any

DOMINANT_SHARE = 0.5
CAPACITY_PART_OF_QUEUE = 0.5
OVERHEAD_SHARE_FOR_ADVICE = 0.10

THRESHOLDS = {
    "dominant_share": DOMINANT_SHARE,
    "capacity_part_of_queue": CAPACITY_PART_OF_QUEUE,
    "order": ["queue", "prefill", "decode"],
}


def classify(att: dict[str, Any], kv_wait_s: float | None) -> dict[str, Any]:
    """The run's label and why, from ``attribution_run`` figures."""
    q, p, d = att["queue_share"], att["prefill_share"], att["decode_share"]
    kv_part = (kv_wait_s / att["queue_s"]) if kv_wait_s is not None and att["queue_s"] else None
    if q >= DOMINANT_SHARE:
        if kv_part is not None and kv_part >= CAPACITY_PART_OF_QUEUE:
            label = "capacity-bound"
            why = (
                f"queueing is {q:.0%} of end-to-end latency and {kv_part:.0%} of that queueing happened while "
                f"requests were waiting for KV-cache room (thresholds: {DOMINANT_SHARE:.0%}, "
                f"{CAPACITY_PART_OF_QUEUE:.0%})"
            )
        else:
            label = "queue-bound"
            why = f"queueing is {q:.0%} of end-to-end latency (threshold {DOMINANT_SHARE:.0%})"
            if kv_part is not None:
                why += f"; only {kv_part:.0%} of it waiting for KV room"
    elif p >= DOMINANT_SHARE:
        label, why = "prefill-dominant", f"prefill is {p:.0%} of end-to-end latency (threshold {DOMINANT_SHARE:.0%})"
    elif d >= DOMINANT_SHARE:
        label, why = "decode-dominant", f"decode is {d:.0%} of end-to-end latency (threshold {DOMINANT_SHARE:.0%})"
    else:
        label = "balanced"
        why = f"no component reaches {DOMINANT_SHARE:.0%} (queue {q:.0%}, prefill {p:.0%}, decode {d:.0%})"
    tps, spt, lout = att.get("prefill_tokens_per_s"), att.get("decode_s_per_token"), att.get("mean_output_tokens")
    crossover = tps * lout * spt if tps and spt and lout else None
    return {
        "label": label,
        "why": why,
        "prefill_share": p,
        "decode_share": d,
        "queue_share": q,
        "requests_prefill_dominant": att.get("prefill_dominant_requests"),
        "requests": att.get("requests"),
        "crossover_input_tokens": crossover,
        "crossover_formula": "L* = prefill_tokens_per_s x mean_output_tokens x decode_s_per_token"
        if crossover
        else None,
        "thresholds": THRESHOLDS,
    }


def _gain(metric: str, before: float, after: float, unit: str = "s") -> dict[str, Any]:
    return {"metric": metric, "from": before, "to": after, "unit": unit}


INTERFERENCE_SHARE_FOR_ADVICE = 0.05
PREFIX_REUSE_FOR_ADVICE = 0.10
LAUNCH_GAP_SHARE_FOR_ADVICE = 0.20


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
    if idle / wall < LAUNCH_GAP_SHARE_FOR_ADVICE:
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
    if spt and att["decode_share"] >= 0.25:
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
    if tps and att["prefill_share"] >= 0.25:
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
    if interference and (interference.get("share_of_parent") or 0) >= INTERFERENCE_SHARE_FOR_ADVICE:
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
    if reuse and reuse >= PREFIX_REUSE_FOR_ADVICE and att.get("prefill_s"):
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
    if att["overhead_share"] >= OVERHEAD_SHARE_FOR_ADVICE:
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

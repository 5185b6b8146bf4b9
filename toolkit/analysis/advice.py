"""Advice: each item tied to one bottleneck (engine, pipe, room, queue, overhead, interference, prefix),
fired only on measured evidence, with the expected gain computed from the run's own numbers, the formula and
its inputs named. Thresholds: ``queries/thresholds.csv``.
"""

from __future__ import annotations

from typing import Any

from lltrace.ingest.engine import engine_setting
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


# the setting that turns CUDA graphs on, by what marked the steps: the engine's own markers name the engine; a user's
# ProfilerStep loop whose forwards were found by their shapes is a generation loop of PyTorch's (HF generate() or
# one's own), where torch.compile captures the graphs
_GRAPH_SETTINGS = {
    "vllm": "enforce_eager=False (vLLM)",
    "vllm_new_cached": "enforce_eager=False (vLLM)",
    "execute_model": "enforce_eager=False (vLLM)",
    "sglang": "--disable-cuda-graph off (SGLang)",
    "attention_shapes_in_profiler_step": 'torch.compile mode "reduce-overhead" for the decoding forward (HF '
    'generate: cache_implementation="static", whose compile mode it is by default)',
}


def graph_setting(detection: list[str]) -> str:
    """The setting that captures decode steps as CUDA graphs, named for the engine the step markers show; a
    general phrase where they show none."""
    named = {_GRAPH_SETTINGS[d] for d in detection if d in _GRAPH_SETTINGS}
    return named.pop() if len(named) == 1 else "CUDA graphs (the engine's eager-mode setting off)"


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
            "setting": graph_setting(steps.get("detection") or []),
            "action": "Capture decode steps as CUDA graphs: the GPU idles while the CPU launches kernels one by one",
            "expected_gain": _gain("mean decode step time", wall, wall - idle),
            "formula": "step_wall_mean - gpu_idle_mean (launch gaps removed at best)",
            "evidence": {"eager_decode_steps": len(eager), "gpu_idle_s_mean": idle, "step_wall_s_mean": wall},
        }
    ]


def _limit(part: dict[str, Any] | None, setting: str) -> str:
    found = ((part or {}).get("evidence") or {}).get(setting) or {}
    return f" (now {found['value']:,.0f}, {found['basis']})" if found.get("value") is not None else ""


def _queue_items(
    att: dict[str, Any], label: str, parts: dict[str, Any], n: int, kv: dict[str, Any] | None, engine: str | None
) -> list[tuple[float, dict[str, Any]]]:
    """One item per part of queue that matters: KV room, sequence slots, token budget, plain load. Each gain is
    that part's time removed at best: an upper bound (the replay gives the simulated figure)."""
    share_needed = thresholds()["queue_part_share_for_advice"]
    queue_mean = att["queue_s"] / n
    specs = {
        "kv_wait": (
            "room",
            "gpu_memory_utilization",
            "Give the KV cache more room: more KV blocks ({setting}, a larger GPU or more "
            "tensor-parallel ranks), an FP8 KV cache (half the bytes per token), or fewer concurrent sequences "
            "with admission control: the queue head did not fit the free KV blocks",
        ),
        "slot_wait": (
            "slots",
            "max_num_seqs",
            "Raise {setting}{limit}: requests waited for a sequence slot while the KV cache had room for more",
        ),
        "budget_wait": (
            "budget",
            "max_num_batched_tokens",
            "Raise {setting}{limit}: steps used the whole token budget while requests waited with a "
            "slot and KV room free",
        ),
        "load_wait": (
            "queue",
            None,
            "Add replicas: requests waited behind other work with none of the engine's limits binding",
        ),
    }
    items = []
    for name, (bottleneck, setting, action) in specs.items():
        part = parts.get(name) or {}
        total = part.get("total_s")
        if not total or total / att["e2e_s"] < share_needed:
            continue
        if name == "load_wait" and label not in ("queue-bound", "capacity-bound"):
            continue
        wait_mean = total / n
        evidence = {f"{name}_s_total": total, "share_of_queue": part.get("share_of_parent"), "requests": n}
        evidence |= {k: v for k, v in (part.get("evidence") or {}).items() if k != "rule"}
        if name == "kv_wait" and kv:
            evidence |= {k: kv.get(k) for k in ("peak_usage", "preemptions")}
        if name == "budget_wait" and (spec := evidence.get("speculative_tokens")):  # the drafts take budget too
            fewer = engine_setting("num_speculative_tokens", engine)
            action = action.replace(
                "{limit}:",
                f"{{limit}}, or draft fewer tokens a step ({fewer}, now {spec['value']:g}: the drafts take "
                "part of each step's budget):",
            )
        items.append(
            (
                wait_mean,
                {
                    "bottleneck": bottleneck,
                    "setting": setting,
                    "action": action.format(limit=_limit(part, setting or ""), setting=engine_setting(setting, engine)),
                    "expected_gain": _gain("mean queue time per request", queue_mean, queue_mean - wait_mean),
                    "formula": f"queue_mean - {name}_mean: that part of queueing removed, at best (an upper bound)",
                    "evidence": evidence,
                },
            )
        )
    return items


_Item = tuple[float, dict[str, Any]]


def advise(
    att: dict[str, Any],
    label: str,
    queue_parts: dict[str, Any] | None,
    interference: dict[str, Any] | None = None,
    workload: dict[str, Any] | None = None,
    fp8_decode_ratio: dict[str, Any] | None = None,
    kv: dict[str, Any] | None = None,
    prefix_caching: bool | None = None,
    engine: str | None = None,
    speculative: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Advice items, most valuable (seconds saved per request) first, each naming the engine ``setting`` it
    changes (None where it is not one setting).

    ``queue_parts`` are the attribution's kv_wait, slot_wait, budget_wait and load_wait. ``fp8_decode_ratio``
    (from the roofline, when the model and GPU are known) replaces the generic halving bound of weight
    quantization by the modelled ratio of FP8 to BF16 decode time per token. ``kv`` is the document's kv section
    (its usage and preemptions back the KV-room item; its measured prefix-cache hit rate the prefix item);
    ``prefix_caching`` whether the engine ran with prefix caching (None: not known). ``engine`` (the run's serving
    engine) names each setting as that engine does, in the action and in ``engine_setting``. ``speculative`` (the
    document's section) says the engine already decodes speculatively: the pipe item then offers the weights alone.
    """
    n = att["requests"]
    mean = {k: att[f"{k}_s"] / n for k in ("e2e", "queue", "prefill", "decode", "overhead")}
    items: list[_Item] = _queue_items(att, label, queue_parts or {}, n, kv, engine)
    items += [
        item
        for item in (
            _pipe_item(att, mean, fp8_decode_ratio, speculative),
            _engine_item(att, mean),
            _interference_item(interference, mean, n),
            _prefix_item(att, mean, workload, kv, prefix_caching),
            _overhead_item(att, mean),
        )
        if item is not None
    ]
    for _, item in items:
        item["engine_setting"] = engine_setting(item["setting"], engine)
    return [item for _, item in sorted(items, key=lambda t: -t[0])]


def _pipe_item(
    att: dict[str, Any],
    mean: dict[str, float],
    fp8_decode_ratio: dict[str, Any] | None,
    speculative: dict[str, Any] | None,
) -> _Item | None:
    """Decode dominates: fewer bytes read per decode step (FP8/INT8 weights, speculative decoding)."""
    spt = att.get("decode_s_per_token")
    if not spt or att["decode_share"] < thresholds()["pipe_share_for_advice"]:
        return None
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
    action = (
        "Cut the bytes read per decode step: FP8/INT8 weights or speculative decoding (more tokens per weight read)"
    )
    if speculative:
        action = "Cut the bytes read per decode step: FP8/INT8 weights (speculative decoding is on" + (
            f": {speculative['acceptance_rate']:.0%} of its draft tokens accepted)"
            if speculative.get("acceptance_rate") is not None
            else ")"
        )
    return saved, {
        "bottleneck": "pipe",
        "setting": "quantization",
        "action": action,
        "expected_gain": _gain("mean decode time per request", mean["decode"], mean["decode"] - saved),
        "formula": formula,
        "evidence": {
            "decode_share": att["decode_share"],
            "decode_s_per_token": spt,
            "mean_output_tokens": att.get("mean_output_tokens"),
        },
    }


def _engine_item(att: dict[str, Any], mean: dict[str, float]) -> _Item | None:
    """Prefill dominates: a faster prefill (prefix caching, FP8 compute, a larger chunked-prefill budget)."""
    tps = att.get("prefill_tokens_per_s")
    if not tps or att["prefill_share"] < thresholds()["engine_share_for_advice"]:
        return None
    saved = mean["prefill"] / 2
    return saved, {
        "bottleneck": "engine",
        "setting": "quantization",
        "action": "Speed up prefill: prefix caching where prompts share prefixes, FP8 compute, or a larger "
        "chunked-prefill token budget",
        "expected_gain": _gain("mean prefill time per request", mean["prefill"], mean["prefill"] - saved),
        "formula": "prefill_mean x (1 - 1/2): FP8 doubles dense FLOP/s on a compute-bound prefill (upper "
        "bound; estimate)",
        "evidence": {"prefill_share": att["prefill_share"], "prefill_tokens_per_s": tps},
    }


def _interference_item(interference: dict[str, Any] | None, mean: dict[str, float], n: int) -> _Item | None:
    """Prefills stall the decodes they share steps with: a smaller token budget, or disaggregation."""
    if not interference or (interference.get("share_of_parent") or 0) < thresholds()["interference_share_for_advice"]:
        return None
    lost = interference["total_s"] / n
    return lost, {
        "bottleneck": "interference",
        "setting": "max_num_batched_tokens",
        "action": "Keep prefills from stalling decodes: a smaller chunked-prefill token budget, or "
        "prefill-decode disaggregation",
        "expected_gain": _gain("mean decode time per request", mean["decode"], mean["decode"] - lost),
        "formula": "decode_mean - interference_mean (the decode time lost to mixed steps removed at best)",
        "evidence": {
            "interference_share_of_decode": interference["share_of_parent"],
            "mixed_steps": interference.get("mixed_steps"),
        },
    }


def _prefix_item(
    att: dict[str, Any],
    mean: dict[str, float],
    workload: dict[str, Any] | None,
    kv: dict[str, Any] | None,
    prefix_caching: bool | None,
) -> _Item | None:
    """The workload's prompts repeat earlier prefixes and the engine is not known to cache them: a cache that is on
    shows its own reuse in kv.prefix_cache_hit_rate, and turning it on again gains nothing."""
    reuse = (workload or {}).get("prefix_reuse")
    caching = prefix_caching or bool((kv or {}).get("prefix_cache_hit_rate"))
    if not reuse or reuse < thresholds()["prefix_reuse_for_advice"] or not att.get("prefill_s") or caching:
        return None
    saved = mean["prefill"] * reuse
    return saved, {
        "bottleneck": "prefix",
        "setting": "enable_prefix_caching",
        "action": "Turn on prefix caching: a measured share of prompt blocks repeats an earlier request's prefix",
        "expected_gain": _gain("mean prefill time per request", mean["prefill"], mean["prefill"] - saved),
        "formula": "prefill_mean x (1 - prefix_reuse): reused blocks need no recompute (upper bound: cache "
        "capacity and eviction not modelled)",
        "evidence": {
            "prefix_reuse": reuse,
            "prefix_blocks": (workload or {}).get("prefix_blocks"),
            "prefix_caching": prefix_caching,
        },
    }


def _overhead_item(att: dict[str, Any], mean: dict[str, float]) -> _Item | None:
    """Much of e2e lies outside the engine: look at the frontend, the network and the client."""
    if att["overhead_share"] < thresholds()["overhead_share_for_advice"]:
        return None
    return mean["overhead"], {
        "bottleneck": "overhead",
        "setting": None,
        "action": "Look outside the engine: tokenization, detokenization, the API server, network and client",
        "expected_gain": _gain("mean overhead per request", mean["overhead"], 0.0),
        "formula": "e2e - (queue + prefill + decode), removed at best",
        "evidence": {"overhead_share": att["overhead_share"]},
    }

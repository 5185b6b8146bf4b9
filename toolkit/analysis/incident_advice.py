"""What to change for an incident, ranked by what it would bring to the incident's own requests (docs/incidents.md).

The requests that suffered are the incident's requests not sent by the client that caused it (all of them where
no client caused it). Each item removes, from each of them, the part of its latency the item relieves, as the
attribution measured it: a sequence-slot wait (more slots), a KV-room wait and time preempted (more room), the
decode time lost to other requests' prefills (a per-request prompt-chunk cap), or all of the excess over their
level outside the incident (a pool or a priority of their own, admission control, the host back to its speed).
Every gain is an estimate, an upper bound at that: the replay gives the simulated figure.
"""

from __future__ import annotations

import math
from typing import Any

from lltrace.documents.incidents import METRIC_NAMES as NAMES
from lltrace.ingest.engine import engine_setting
from lltrace.queries import thresholds

# the parts of a request's latency each metric holds (a part outside the metric moves e2e instead)
HOLDS = {"ttft": ("queue", "prefill"), "queue": ("queue",), "e2e": ("queue", "prefill", "decode"), "tpot": ("decode",)}


def p90(values: list[float]) -> float | None:
    """The 90th percentile, linearly interpolated (DuckDB's quantile_cont)."""
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return None
    k = 0.9 * (len(xs) - 1)
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def _less(r: dict[str, Any], metric: str, saved: float) -> float | None:
    """The request's metric with ``saved`` seconds of it removed (TPOT: spread over its tokens after the first)."""
    v = r[f"{metric}_s"]
    if v is None:
        return None
    if metric == "tpot":
        n = (r["output_tokens"] or 0) - 1
        return max(v - saved / n, 0.0) if n > 0 else v
    return max(v - saved, 0.0)


def _item(
    bottleneck: str,
    setting: str | None,
    engine: str | None,
    action: str,
    metric: str,
    before: float,
    after: float,
    formula: str,
) -> dict[str, Any]:
    return {
        "bottleneck": bottleneck,
        "setting": setting,
        "engine_setting": engine_setting(setting, engine),
        "action": action,
        "expected_gain": {"metric": metric, "from": before, "to": after, "unit": "s"},
        "formula": formula,
        "basis": "estimated",
    }


def _removing(
    suffering: list[dict[str, Any]], metric: str, parts: tuple[str, ...], who: str
) -> tuple[str, float, float] | None:
    """The suffering requests' p90 of ``metric`` (or of e2e where the parts lie outside it) before and after
    removing ``parts`` from each request."""
    held = {
        "slot_wait": "queue",
        "kv_wait": "queue",
        "budget_wait": "queue",
        "preempted": "decode",
        "suffered": "decode",
    }
    m = metric if all(held[p] in HOLDS[metric] for p in parts) else "e2e"
    before = p90([r[f"{m}_s"] for r in suffering])
    after = p90([_less(r, m, sum(r[f"{p}_s"] or 0.0 for p in parts)) for r in suffering])
    if before is None or after is None or after >= before:
        return None
    return f"{NAMES[m]} p90 of {who}", before, after


# the items that remove a measured part of each suffering request's latency: the mechanism's shares that call for
# them, the parts removed, then (bottleneck, setting, action, formula)
PART_ITEMS = (
    (
        ("interference",),
        ("suffered",),
        "interference",
        "long_prefill_token_threshold",
        "Cap the prompt tokens one request may take in a step (a per-request prompt-chunk cap), or a smaller token "
        "budget (max_num_batched_tokens): long prompts' prefills filled the steps the others decoded in",
        "p90 over the suffering requests of (latency - the decode time each lost to mixed steps): the interference "
        "removed, at best",
    ),
    (
        ("slot_wait",),
        ("slot_wait",),
        "slots",
        "max_num_seqs",
        "Raise max_num_seqs (more sequence slots): requests waited for a slot while the KV cache had room",
        "p90 over the suffering requests of (latency - slot_wait): the slot wait removed, at best",
    ),
    (
        ("kv_wait", "preempted"),
        ("kv_wait", "preempted"),
        "room",
        "gpu_memory_utilization",
        "Give the KV cache more room (more KV blocks: gpu_memory_utilization, an FP8 KV cache), or admit fewer "
        "requests at once: requests waited for KV room and were preempted",
        "p90 over the suffering requests of (latency - kv_wait - preempted): both removed, at best",
    ),
    (
        ("budget_wait",),
        ("budget_wait",),
        "budget",
        "max_num_batched_tokens",
        "Raise max_num_batched_tokens: steps used the whole token budget while requests waited with a slot and KV "
        "room free",
        "p90 over the suffering requests of (latency - budget_wait): the budget wait removed, at best",
    ),
)


def incident_advice(
    i: dict[str, Any], inside: list[dict[str, Any]], level: float | None, engine: str | None
) -> list[dict[str, Any]]:
    """Advice for incident ``i`` (its document entry so far), ranked by seconds saved on its requests (``inside``,
    those that arrived in it); ``level`` is the p90 of its metric outside it over the requests not of the causing
    client."""
    metric = i["metric"]
    cause = i["caused_by"][0]["client"] if i["caused_by"] else None
    suffering = [r for r in inside if cause is None or r["client_id"] != cause]
    if not suffering:
        return []
    who = "the incident's requests" if cause is None else f"the requests not of client {cause}"
    now = p90([r[f"{metric}_s"] for r in suffering])
    back = (
        (f"{NAMES[metric]} p90 of {who}", now, level) if now is not None and level is not None and level < now else None
    )
    items = _whole_items(i, cause, back, who, engine)
    need = thresholds()["queue_part_share_for_advice"]
    shares = i["mechanism"]["shares"]
    for keys, parts, bottleneck, setting, action, formula in PART_ITEMS:
        if sum(shares.get(k) or 0 for k in keys) >= need and (g := _removing(suffering, metric, parts, who)):
            items.append(_item(bottleneck, setting, engine, action, *g, formula))
    items.sort(key=lambda x: -(x["expected_gain"]["from"] - x["expected_gain"]["to"]))
    return items


def _whole_items(
    i: dict[str, Any], cause: str | None, back: tuple[str, float, float] | None, who: str, engine: str | None
) -> list[dict[str, Any]]:
    """The items that bring the suffering requests back to their level outside the incident: the causing client
    kept apart, the host found, or admission control against a rate jump."""
    if back is None:
        return []
    metric, trig = i["metric"], i["trigger"]
    to_level = f"the {metric} p90 of {who} in the incident -> their p90 outside it"
    if cause is not None:
        action = (
            f"Keep client {cause}'s requests from the others: a pool (replicas) of their own, or a lower priority than "
            f"the rest (priority scheduling), or admission control on client {cause} at its rate before the "
            "incident: its requests took the engine the others needed"
        )
        why = f"{to_level} (their own level without client {cause}'s requests)"
        return [_item(_bottleneck(i["mechanism"]["dominant"]), "scheduling_policy", engine, action, *back, why)]
    if trig["kind"] == "engine_slowdown":
        action = (
            f"Find what slowed the engine: its decode-only steps took {trig['step_time_ratio']:.2g}x as long as "
            "outside the incident at the same batch size, with no new load: other work on the host, CPU or GPU "
            "throttling, a noisy neighbour"
        )
        return [_item("host", None, engine, action, *back, f"{to_level} (the engine at its own speed)")]
    if trig["kind"] == "arrival_rate":
        action = "Admission control or more replicas: arrivals jumped beyond what the engine serves at its level"
        return [_item("queue", None, engine, action, *back, to_level)]
    return []


def _bottleneck(dominant: str | None) -> str:
    return {
        "slot_wait": "slots",
        "budget_wait": "budget",
        "kv_wait": "room",
        "preempted": "room",
        "interference": "interference",
    }.get(dominant or "", "queue")

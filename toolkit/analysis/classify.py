"""Classification of a workload: the label rule, written once, and the three readings it is applied to.

The rule (``label``), with the thresholds of ``queries/thresholds.csv``, shown in every output:

- a component whose share of the summed end-to-end latency is at least ``dominant_share`` names the run:
  queue first (``queue-bound``), then prefill (``prefill-dominant``), then decode (``decode-dominant``);
- a queue-bound run is ``capacity-bound`` when at least ``capacity_part_of_queue`` of its queue time was
  spent while the engine had no KV room for the queue head (``kv_wait``: KV room only; a queue held by the
  sequence limit or the token budget stays ``queue-bound``, its why naming that limit);
- otherwise the run is ``balanced``.

It reads a run's measured attribution (``classify``), an arrival trace's token mix through the latency model
(``classify_token_mix``, estimated), a profiler trace's steps (``classify_steps``), and the weekly windows'
share of prefill-dominant requests.
"""

from __future__ import annotations

from typing import Any

import duckdb

from lltrace.ingest.engine import engine_setting
from lltrace.physics.estimate import estimate
from lltrace.queries import thresholds

ORDER = ["queue", "prefill", "decode"]


def _limits() -> tuple[float, float]:
    t = thresholds()
    return t["dominant_share"], t["capacity_part_of_queue"]


def thresholds_shown() -> dict[str, Any]:
    """The thresholds as the documents show them."""
    dominant, capacity = _limits()
    return {"dominant_share": dominant, "capacity_part_of_queue": capacity, "order": ORDER}


def label(
    *,
    prefill_share: float,
    decode_share: float,
    queue_share: float | None = None,
    kv_part_of_queue: float | None = None,
) -> str:
    """The workload's label from its shares (queue share None: queueing unknown, e.g. an arrival trace)."""
    dominant, capacity = _limits()
    if queue_share is not None and queue_share >= dominant:
        return "capacity-bound" if kv_part_of_queue is not None and kv_part_of_queue >= capacity else "queue-bound"
    if prefill_share >= dominant:
        return "prefill-dominant"
    if decode_share >= dominant:
        return "decode-dominant"
    return "balanced"


_PART_WORDS = {
    "kv_wait": ("waiting for KV room", None),
    "slot_wait": ("waiting for a sequence slot", "max_num_seqs"),
    "budget_wait": ("waiting for token budget", "max_num_batched_tokens"),
    "load_wait": ("waiting behind other work with no limit binding", None),
}


def _part_words(part: str, engine: str | None) -> str:
    """A part of queueing in words, with the limit behind it as the run's engine names it."""
    words, setting = _PART_WORDS[part]
    return f"{words} ({engine_setting(setting, engine)})" if setting else words


def classify(
    att: dict[str, Any],
    kv_wait_s: float | None,
    queue_parts: dict[str, Any] | None = None,
    engine_causes: dict[str, Any] | None = None,
    engine: str | None = None,
) -> dict[str, Any]:
    """The run's label and why, from ``attribution_run`` figures; ``queue_parts`` (the attribution's kv_wait,
    slot_wait, budget_wait and load_wait) name the largest part of a queue-bound run's queue. Where no request's
    queue could be split (no engine queue interval: a client's estimated queue), KV room's part comes from the
    engine's own timeline (``engine_causes``: ``engine_queue_causes``, its waiting requests' time), labelled so."""
    q, p, d = att["queue_share"], att["prefill_share"], att["decode_share"]
    kv_part = (kv_wait_s / att["queue_s"]) if kv_wait_s is not None and att["queue_s"] else None
    from_engine = kv_part is None and (engine_causes or {}).get("kv_share") is not None
    if from_engine:
        kv_part = engine_causes["kv_share"]
    dominant, capacity = _limits()
    name = label(queue_share=q, prefill_share=p, decode_share=d, kv_part_of_queue=kv_part)
    if name == "capacity-bound":
        why = (
            f"queueing is {q:.0%} of end-to-end latency and {kv_part:.0%} of that queueing happened while "
            f"requests were waiting for KV-cache room (thresholds: {dominant:.0%}, {capacity:.0%})"
        )
        if from_engine:
            why += (
                "; KV room's part from the engine's own record of its waiting requests (no request's queue could be "
                "placed on it; estimated)"
            )
    elif name == "queue-bound":
        why = f"queueing is {q:.0%} of end-to-end latency (threshold {dominant:.0%})"
        known = {k: v["total_s"] for k, v in (queue_parts or {}).items() if v and v.get("total_s") is not None}
        if known and att["queue_s"]:
            top = max(known, key=lambda k: known[k])
            why += f"; {known[top] / att['queue_s']:.0%} of it {_part_words(top, engine)}"
            if top != "kv_wait" and kv_part is not None:
                why += f", {kv_part:.0%} waiting for KV room"
        elif kv_part is not None:
            why += f"; only {kv_part:.0%} of it waiting for KV room"
    elif name == "prefill-dominant":
        why = f"prefill is {p:.0%} of end-to-end latency (threshold {dominant:.0%})"
    elif name == "decode-dominant":
        why = f"decode is {d:.0%} of end-to-end latency (threshold {dominant:.0%})"
    else:
        why = f"no component reaches {dominant:.0%} (queue {q:.0%}, prefill {p:.0%}, decode {d:.0%})"
    tps, spt, lout = att.get("prefill_tokens_per_s"), att.get("decode_s_per_token"), att.get("mean_output_tokens")
    crossover = tps * lout * spt if tps and spt and lout else None
    return {
        "label": name,
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
        "thresholds": thresholds_shown(),
    }


def classify_token_mix(con: duckdb.DuckDBPyConnection, model: str, gpu: str) -> dict[str, Any] | None:
    """Arrivals and sizes only: prefill and decode time of every counted request from the latency model (estimated)."""
    found = con.execute("SELECT requests, input_mean, output_mean, input_total, output_total FROM requests_sizes")
    n, mean_in, mean_out, total_in, total_out = found.fetchone() or (0, None, None, None, None)
    if not n:
        return None
    rates = estimate(model=model, gpu=gpu, input_tokens=round(mean_in), output_tokens=round(mean_out))
    tps, spt = rates["prefill_tokens_per_s"], rates["decode_s_per_token"]
    pre, dec = float(total_in) / tps, float(total_out) * spt
    p, d = pre / (pre + dec), dec / (pre + dec)
    return {
        "label": label(prefill_share=p, decode_share=d),
        "why": f"estimated from the token mix of {n:,} requests on {rates['inputs']['gpu']['name']} with "
        f"{rates['inputs']['model']['name']}: prefill {p:.0%} and decode {d:.0%} of the modelled service time "
        f"(queueing cannot be known from arrivals alone)",
        "prefill_share": p,
        "decode_share": d,
        "queue_share": None,
        "crossover_input_tokens": tps * mean_out * spt,
        "crossover_formula": "L* = modelled prefill_tokens_per_s x mean_output_tokens x modelled decode_s_per_token",
        "basis": "estimated",
        "assumption": {"model": model, "gpu": gpu, "prefill_tokens_per_s": tps, "decode_s_per_token": spt},
        "thresholds": thresholds_shown(),
    }


def classify_histograms(hist: dict[str, Any], causes: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """A Prometheus export alone: the engine's own histogram sums of queue, prefill and decode time over its
    e2e sum (``engine_latency_histograms``), the same rule as a measured attribution; what the queue waited for
    from the gauges (``engine_queue_causes``: KV room's share of the waiting requests' time), where they tell
    it, so a KV-bound queue is capacity-bound here too."""
    q, p, d = hist.get("queue_share"), hist.get("prefill_share"), hist.get("decode_share")
    if p is None or d is None:
        return None
    kv_part = (causes or {}).get("kv_share")
    why = (
        f"from the engine's own histograms ({hist['basis']}, {hist['e2e_requests']:,.0f} requests): queue "
        f"{'-' if q is None else f'{q:.0%}'}, prefill {p:.0%}, decode {d:.0%} of the summed e2e (no request-level "
        "source in this run)"
    )
    if kv_part is not None:
        why += f"; the gauges put {kv_part:.0%} of the waiting requests' time at full KV (estimated from samples)"
    return {
        "label": label(prefill_share=p, decode_share=d, queue_share=q, kv_part_of_queue=kv_part),
        "why": why,
        "prefill_share": p,
        "decode_share": d,
        "queue_share": q,
        "crossover_input_tokens": None,
        "basis": "engine histograms",
        "thresholds": thresholds_shown(),
    }


def has_phases(share: dict[str, Any] | None) -> bool:
    """Whether any step time is known to be prefill, decode or mixed (a training or non-LLM trace has none:
    no prefill/decode verdict is drawn from it)."""
    return bool(share) and any((share.get(k) or 0) > 0 for k in ("prefill_share", "decode_share", "mixed_share"))


def classify_steps(
    share: dict[str, Any], detection: list[str] | None = None, causes: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A profiler trace, or an engine's step log, alone: prefill vs decode share of its step time (``detection``:
    what the steps were read from, as ``steps.detection`` names it). Where the engine's own timeline tells how
    long requests waited and ran (``engine_queue_causes``: a step log with its stats lines), the queue's share of
    the requests' time in the engine by Little's law, and KV room's part of it, can make the run queue- or
    capacity-bound, as the same rule does with measured requests."""
    p, d = share["prefill_share"], share["decode_share"]
    basis = "GPU busy time" if share["basis"] == "gpu_busy" else "step wall time"
    logged = bool(detection) and all(x.endswith(" log") for x in detection)
    q = (causes or {}).get("queue_share")
    kv_part = (causes or {}).get("kv_share")
    # GPU work no step holds is no part of the shares: say how much of the GPU's busy time they cover
    held = f" in steps ({share['steps_hold']:.0%} of the GPU's)" if share.get("steps_hold") is not None else ""
    why = (
        f"from the {'engine log' if logged else 'profiler'}'s engine steps: prefill {p:.0%}, decode {d:.0%}, "
        f"mixed {share['mixed_share']:.0%} of {basis}{held} (no request latencies in this run)"
    )
    if q is not None:
        why = (
            f"queue {q:.0%} of the requests' time in the engine (its log's waiting and running requests over time, "
            f"Little's law; estimated)"
            + (f", {kv_part:.0%} of the waiting while the queue head had no KV room" if kv_part is not None else "")
            + "; "
            + why
        )
    return {
        "label": label(prefill_share=p, decode_share=d, queue_share=q, kv_part_of_queue=kv_part),
        "why": why,
        "prefill_share": p,
        "decode_share": d,
        "queue_share": q,
        "crossover_input_tokens": None,
        "basis": "engine log steps" if logged else "profiler steps",
        "thresholds": thresholds_shown(),
    }


def classify_queue(causes: dict[str, Any] | None) -> dict[str, Any] | None:
    """An engine's gauges alone, with no step time and no latency histograms (a server log of stats lines): a
    verdict only where the queue decides it. The queue's share of the requests' time in the engine by Little's
    law (``engine_queue_causes.queue_share``) at or above the dominant share makes the run queue-bound, or
    capacity-bound where KV room holds its part of the waiting; below it, prefill against decode is not known
    from load samples, so no verdict (None)."""
    q = (causes or {}).get("queue_share")
    dominant, _ = _limits()
    if q is None or q < dominant:
        return None
    kv_part = causes.get("kv_share")
    name = label(prefill_share=0.0, decode_share=0.0, queue_share=q, kv_part_of_queue=kv_part)
    why = (
        f"queue {q:.0%} of the requests' time in the engine (its waiting and running requests over time, Little's "
        "law; estimated from samples)"
        + (f", {kv_part:.0%} of the waiting while the queue head had no KV room" if kv_part is not None else "")
        + "; prefill against decode is not known from load samples"
    )
    return {
        "label": name,
        "why": why,
        "prefill_share": None,
        "decode_share": None,
        "queue_share": q,
        "crossover_input_tokens": None,
        "basis": "engine samples",
        "thresholds": thresholds_shown(),
    }

"""The slowest tenth of a run's requests against the rest (``attribution_tail``): which part of the latency makes
the gap, and how much of it longer prompts or answers explain (the rest's rate applied to the tail's sizes)."""

from __future__ import annotations

from typing import Any

from lltrace.documents.vocabulary import Component

# the additive parts of a request's e2e (docs/latency-model.md), in the order the tables show them
E2E_PARTS = tuple(c.value for c in Component)
_CAUSES = (("kv_wait", "KV room"), ("slot_wait", "a sequence slot"), ("budget_wait", "the token budget"))


def tail_section(rows: list[dict[str, Any]], basis: dict[str, str | None]) -> dict[str, Any] | None:
    """The tail section of the analysis document from ``attribution_tail``'s two rows: both rows, the gap in mean
    e2e and per part (slowest minus rest, seconds), the part with the largest gap and one sentence on it (saying so
    where that part is an estimate: ``basis``, each part's basis in the run's attribution). None when the run has
    no requests on one side (under ten requests, or all of one latency)."""
    by = {r["part"]: r for r in rows}
    slow, rest = by.get("slowest"), by.get("rest")
    if not slow or not rest or not slow["requests"] or not rest["requests"]:
        return None
    gaps = {p: slow[f"{p}_s"] - rest[f"{p}_s"] for p in E2E_PARTS}
    lead = max(gaps, key=lambda p: gaps[p])
    gap = slow["e2e_s"] - rest["e2e_s"]
    text = (
        f"The slowest 10% ({slow['requests']:,} requests, e2e from {slow['e2e_from_s']:,.3f} s) take "
        f"{slow['e2e_s']:,.3f} s against the rest's {rest['e2e_s']:,.3f} s; {lead} makes {gaps[lead]:+,.3f} s of the "
        f"{gap:+,.3f} s"
    )
    text += _why(lead, gaps[lead], slow, rest)
    if basis.get(lead) in ("estimated", "mixed"):
        text += f" ({lead} is {basis[lead]} here, not measured for every request)"
    return {
        "slowest": slow,
        "rest": rest,
        "gap_s": gap,
        "gap_by_part_s": gaps,
        "lead": lead,
        "verdict": text + ".",
    }


def _why(lead: str, gap: float, slow: dict[str, Any], rest: dict[str, Any]) -> str:
    """What the lead part's gap is made of, where the run's figures say."""
    if lead == "queue":
        known = {label: slow[f"{k}_s"] - rest[f"{k}_s"] for k, label in _CAUSES if slow[f"{k}_s"] is not None}
        if known:
            label = max(known, key=lambda k: known[k])
            if known[label] > 0:
                return f", {known[label]:+,.3f} s of it waiting for {label}"
        return ""
    if lead == "decode":
        per = rest["decode_s_per_token"]
        if per is None or slow["mean_output_tokens"] is None or rest["mean_output_tokens"] is None:
            return ""
        longer = (slow["mean_output_tokens"] - rest["mean_output_tokens"]) * per
        return (
            f": answers of {slow['mean_output_tokens']:,.0f} against {rest['mean_output_tokens']:,.0f} tokens make "
            f"{longer:+,.3f} s at the rest's {per * 1e3:,.2f} ms per token, the rest ({gap - longer:+,.3f} s) a slower "
            f"decode per token ({(slow['decode_s_per_token'] or 0) * 1e3:,.2f} ms)"
        )
    if lead == "prefill" and slow["mean_input_tokens"] is not None and rest["mean_input_tokens"] is not None:
        return f": prompts of {slow['mean_input_tokens']:,.0f} against {rest['mean_input_tokens']:,.0f} tokens"
    if lead == "overhead":
        return ": time outside the engine's queue, prefill and decode (client, network, the server's frontend)"
    return ""

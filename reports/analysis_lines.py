"""Sentences of the analysis document that the terminal and the HTML report both say, written once: the KV cache
and prefix cache, speculative decoding, what the engine's queue waited for, the causes of the requests left out,
and what the API server answered. They format typed sections; they compute nothing."""

from __future__ import annotations

from lltrace.documents.analysis import AnalysisDocument, KvSection
from lltrace.documents.attribution import Excluded
from lltrace.documents.rows import EngineLatencyHistogramsRow, EngineSpeculativeRow
from lltrace.documents.vocabulary import LIMIT_PARTS, QueuePart
from lltrace.reports.numbers import count_noun, pct, whole


def queue_split_known(doc: AnalysisDocument) -> bool:
    """Whether any request's queue was split by what the engine was out of."""
    att = doc.attribution
    return att is not None and any(att.part(p).total_s is not None for p in (*LIMIT_PARTS, QueuePart.LOAD_WAIT))


def engine_queue_note(doc: AnalysisDocument) -> str | None:
    """What the queue waited for by the engine's own record (``engine_queue_causes``), where no request's queue
    was placed on it (the requests' own split says it where it can)."""
    causes = doc.engine_queue_causes
    if causes is None or not causes.waiting_request_s or queue_split_known(doc):
        return None
    known = {"KV room": causes.kv_share, "a sequence slot": causes.slot_share, "the token budget": causes.budget_share}
    said = [f"{name} {pct(v)}" for name, v in known.items() if v is not None]
    unknown = [name for name, v in known.items() if v is None]
    steps = causes.basis == "steps"
    return (
        f"What the queue waited for, from the engine's {'step log' if steps else 'gauges'} "
        f"({whole(causes.samples)} {'steps' if steps else 'sample intervals'}, "
        f"{causes.waiting_request_s:,.1f} request-seconds waiting; estimates): "
        + (" · ".join(said) if said else "nothing they can tell")
        + (f" · not knowable from them: {', '.join(unknown)}" if unknown else "")
    )


def _prefix_line(kv: KvSection) -> str | None:
    prefix = []
    if kv.prefix_cache_hit_rate is not None:
        prefix.append(
            f"hit rate {pct(kv.prefix_cache_hit_rate)} ({whole(kv.prefix_cache_hit_tokens)} of "
            f"{whole(kv.prefix_cache_queried_tokens)} queried tokens, {kv.prefix_cache_hit_basis})"
        )
    if kv.prefix_cached_share is not None:
        prefix.append(f"prompt tokens cached {pct(kv.prefix_cached_share)} ({kv.prefix_cached_basis})")
    if kv.prefix_cached_requests:
        prefix.append(
            f"cached tokens per request for {count_noun(kv.prefix_cached_requests, 'request')} "
            f"({kv.prefix_cached_requests_basis})"
        )
    return "prefix cache: " + " · ".join(prefix) if prefix else None


def kv_lines(kv: KvSection | None, spec: EngineSpeculativeRow | None) -> str | None:
    """The KV cache's line (peak usage, preemptions, waiting), the prefix cache's and speculative decoding's, where
    the run has them."""
    lines = []
    if kv is not None and any(getattr(kv, f) is not None for f in kv.__struct_fields__):
        line = (
            f"KV cache: peak usage {pct(kv.peak_usage)} · preemptions {whole(kv.preemptions)} · "
            f"peak requests waiting {whole(kv.peak_waiting)}"
            + (
                f" ({whole(kv.peak_waiting_capacity)} for scheduling capacity)"
                if kv.peak_waiting_capacity is not None
                else ""
            )
            + (f" · queue time waiting for KV room {kv.kv_wait_s:,.2f} s" if kv.kv_wait_s is not None else "")
        )
        if prefix := _prefix_line(kv):
            line += "\n" + prefix
        lines.append(line)
    if spec is not None:
        lines.append(speculative_line(spec))
    return "\n".join(lines) or None


def speculative_line(spec: EngineSpeculativeRow) -> str:
    """What speculative decoding gained: the share of draft tokens kept and the tokens a decoding request took a
    step, with where the counts come from."""
    k = spec.speculative_tokens
    head = "speculative decoding" + (f" (up to {whole(k)} draft tokens a step)" if k else "")
    if spec.draft_tokens is None:
        if spec.acceptance_length:  # SGLang counts no drafts: its accept length per interval
            return f"{head}: {spec.acceptance_length:.2f} tokens a request gained per verify step ({spec.basis})"
        return f"{head}: on, its drafts not counted (no spec-decode counters or SpecDecoding log lines in the run)"
    if not spec.draft_tokens:
        return f"{head}: on, no draft proposed ({spec.basis})"
    said = [f"{pct(spec.acceptance_rate)} of {whole(spec.draft_tokens)} draft tokens accepted"]
    basis = str(spec.basis)
    if spec.tokens_per_decode_step:
        said.append(f"{spec.tokens_per_decode_step:.2f} tokens a step per decoding request")
        basis += "; the steps from the iteration log"
    elif spec.acceptance_length:
        said.append(f"{spec.acceptance_length:.2f} tokens per drafting step (vLLM's mean acceptance length)")
    return f"{head}: " + " · ".join(said) + f" ({basis})"


def cause_lines(excluded: Excluded) -> list[str]:
    """An outcome's causes as its sources state them, a line each: the count, the cause, the error text where it
    says more than the cause (not a status's own reason phrase), and when the requests arrived, where the sources
    place them."""
    out = []
    for c in excluded.causes:
        text = c.error
        more = f", and {c.texts - 1:,} other texts" if (c.texts or 0) > 1 else ""
        said = f' ("{text}"{more})' if text and text not in c.cause else ""
        when = ""
        if c.first_arrival_s is not None and c.last_arrival_s is not None:
            when = (
                f", arrived {c.first_arrival_s:,.1f} s"
                if c.requests == 1
                else f", arrived {c.first_arrival_s:,.1f} to {c.last_arrival_s:,.1f} s"
            )
            when += " into the run"
        out.append(f"{c.requests:,} {c.cause}{said}{when}")
    if excluded.other_causes:
        out.append(f"{excluded.other_causes:,} of other causes")
    if excluded.causes and excluded.no_cause_given:
        out.append(f"{excluded.no_cause_given:,} with no cause given")
    return out


def api_responses_line(hist: EngineLatencyHistogramsRow) -> str:
    """What the API server answered over the scrapes' span, by status class (vLLM's ``http_requests_total``), with
    the share of the answers that were refusals (4xx) and failures (5xx)."""
    said = " · ".join(
        f"{whole(v or 0)} {k}" for k, v in (("2xx", hist.http_2xx), ("4xx", hist.http_4xx), ("5xx", hist.http_5xx))
    )
    share = f": {pct(hist.http_failed_share)} refused or failed" if hist.http_failed_share else ""
    return f"API server's responses ({hist.basis}, its http_requests_total): {said}{share}"

"""The figures behind the answer on the terminal: the requests' latencies and the ones left out, the engine's steps
by kind, and the profiler's GPU time by kernel class. One renderer per section, each taking that section's type.
It formats; it computes nothing."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from lltrace.documents.attribution import RequestsSection
from lltrace.documents.base import given
from lltrace.documents.rows import EngineSpeculativeRow, ProfilerStepsByKindRow
from lltrace.documents.steps import ProfileSection, StepsSection
from lltrace.documents.vocabulary import KindFrom
from lltrace.reports.analysis_lines import cause_lines
from lltrace.reports.console import Text
from lltrace.reports.numbers import count_noun, pct, whole
from lltrace.reports.numbers import ms as _ms


def requests_parts(req: RequestsSection) -> list[Any]:
    """The requests' latency percentiles (or why there are none), then each outcome left out and its causes."""
    left_out = ", ".join(f"{e.requests:,} {e.outcome}" for e in req.excluded)
    counted = f"{req.counted:,} counted, {left_out} left out" if left_out else "all counted"
    basis = f"latencies measured by the {req.basis}" if req.basis else "no latencies"
    t = Table(title=f"Requests: {req.count:,} ({counted}; {basis})")
    for col in ("metric", "p50 ms", "p90 ms", "p99 ms", "mean ms"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for d, label in ((req.ttft_s, "TTFT"), (req.tpot_s, "TPOT"), (req.e2e_s, "e2e"), (req.queue_s, "engine queue")):
        if d is not None:
            t.add_row(label, _ms(d.p50), _ms(d.p90), _ms(d.p99), _ms(d.mean))
    parts: list[Any] = (
        [t] if t.row_count else [Text(f"Requests: {req.count:,} ({counted}): the sources give no latencies")]
    )
    for e in req.excluded:
        parts.append(Text(f"  left out: {e.requests:,} {e.outcome}: {e.why}"))
        parts.extend(Text(f"    {line}") for line in cause_lines(e))
    return parts


def _token_sums(row: ProfilerStepsByKindRow) -> tuple[str, str]:
    """A kind's prefill and decode token sums, saying over how many of its steps where not every step gives them
    (steps whose kind came from their kernels have no counts)."""
    some = row.token_steps is not None and 0 < row.token_steps < (row.steps or 0)
    tail = f" ({whole(row.token_steps)} of {whole(row.steps)} steps)" if some else ""
    return tuple(whole(v) + (tail if v else "") for v in (row.prefill_tokens, row.decode_tokens))


def steps_table(steps: StepsSection) -> Table:
    """The engine's steps by kind: time, GPU busy time, tokens and CUDA graphs."""
    t = Table(title=f"Engine steps: {steps.count:,} (detected from: {', '.join(steps.detection) or 'none'})")
    for col in (
        "kind",
        "steps",
        "mean ms",
        "p50 ms",
        "p99 ms",
        "total ms",
        "GPU busy ms",
        "prefill tok",
        "decode tok",
        "CUDA graph",
    ):
        t.add_column(col, justify="left" if col == "kind" else "right")
    for row in steps.by_kind:
        t.add_row(
            row.kind or "unknown",
            whole(row.steps),
            _ms(row.wall_s_mean),
            _ms(row.wall_s_p50),
            _ms(row.wall_s_p99),
            _ms(row.wall_s_total),
            _ms(row.gpu_busy_s),
            *_token_sums(row),
            whole(row.cuda_graph_steps),
        )
    if not steps.count:
        t.caption = "no engine step markers, ProfilerStep, execute_model or CUDA graph launches found"
    return t


def steps_parts(steps: StepsSection, spec: EngineSpeculativeRow | None) -> list[Any]:
    """The steps table, then what to know when reading it: draft tokens, GPU work outlasting CPU spans, kinds
    inferred from kernels or not decided, ranks that disagree, the phases' shares and the roofline's bounds."""
    parts: list[Any] = [steps_table(steps)]
    beyond = steps.decode_tokens_beyond_requests
    if spec is not None and spec.draft_tokens:
        parts.append(Text("decode tok: the tokens the steps verified, each request's draft tokens included"))
    elif beyond is not None:
        parts.append(
            Text(
                f"decode tok: {whole(beyond.tokens)} beyond one a decoding request, in {whole(beyond.steps)} "
                f"of {whole(beyond.decode_steps)} decode steps: speculative decoding's draft tokens verified, "
                "or requests resumed after preemption recomputing theirs"
            )
        )
    outlasted = [r for r in steps.by_kind if r.gpu_longer_steps]
    if outlasted:
        parts.append(Text(_gpu_outlasted(outlasted)))
    if by_kernels := steps.count_by_kind_from.get(KindFrom.KERNELS):
        parts.append(
            Text(
                f"step kinds of {count_noun(by_kernels, 'step')} inferred from their kernels (no marker, no input "
                "shapes: parsers/step_kinds.csv); their token and request counts are unknown"
            )
        )
    for u in steps.undecided:
        parts.append(Text(f"{count_noun(u.steps, 'step')} without a kind: {u.why}", style="yellow"))
    if steps.ranks is not None and not steps.ranks.agree:
        parts.append(
            Text(
                f"ranks disagree: steps per rank {steps.ranks.steps_per_rank}; parts {steps.ranks.disagree_parts} "
                "differ from the first rank in count or kinds",
                style="yellow",
            )
        )
    if steps.phase_share is not None:
        parts.append(_phase_line(steps))
    bounds = [it.bound for it in steps.items if it.bound]
    if bounds:
        parts.append(
            Text(f"Roofline: {bounds.count('compute')} compute-bound, {bounds.count('memory')} memory-bound steps")
        )
    elif steps.bound_note and steps.count:
        parts.append(Text(steps.bound_note, style="dim"))
    return parts


def _phase_line(steps: StepsSection) -> Text:
    share = steps.phase_share
    basis = "GPU busy time" if share.basis == "gpu_busy" else "step wall time (no GPU data)"
    shown = given(share.steps_hold) is not None
    return Text(
        f"Share of {basis}{' in steps' if shown else ''}: prefill {pct(share.prefill_share)} · "
        f"decode {pct(share.decode_share)} · mixed {pct(share.mixed_share)} · other {pct(share.other_share)}"
        + (
            f" · outside any step: {_ms(given(share.outside_steps_s))} of the GPU's "
            f"{_ms(given(share.gpu_busy_s))} ms busy"
            if shown
            else ""
        )
    )


def _gpu_outlasted(rows: list[ProfilerStepsByKindRow]) -> str:
    """The line for steps whose GPU busy time exceeds their CPU span (the table's ms columns are CPU spans)."""
    kinds = ", ".join(f"{whole(r.gpu_longer_steps)} of {whole(r.steps)} {r.kind or 'unknown'}" for r in rows)
    means = "; ".join(
        f"{r.kind or 'unknown'} {_ms(r.gpu_longer_busy_s_mean)} ms, its first kernel "
        f"{_ms(r.gpu_longer_start_s_mean)} ms after the step began"
        for r in rows
    )
    return (
        f"The GPU was busy longer than the CPU span of {kinds} steps: launched without waiting for their kernels "
        f"(CUDA graphs, asynchronous scheduling), so the ms columns (CPU spans) are not their time. GPU busy per "
        f"step, mean: {means}"
    )


def profile_parts(prof: ProfileSection) -> list[Any]:
    """GPU time by kernel class, the GPU's busy time, attention kernels and ops launched before the trace."""
    if not prof.gpu_ops:
        return [
            Text(
                "No GPU kernels in this trace: a CPU-only profile, or a device whose activity lltrace does not read "
                "(MTIA's, HPU's: only CUDA and ROCm kernels, copies and sets)",
                style="dim",
            )
        ]
    t = Table(title=f"GPU time by kernel class ({prof.gpu_ops:,} GPU ops)")
    for col in ("class", "ops", "total ms", "share"):
        t.add_column(col, justify="left" if col == "class" else "right")
    for row in prof.kernel_time:
        t.add_row(row.kernel_class, whole(row.kernels), _ms(row.total_s), pct(row.share))
    busy = ", ".join(
        f"device {b.device}: {_ms(b.busy_s)} ms = {pct(b.traced_fraction)} of the "
        f"{_ms(b.traced_s)} ms traced ({pct(b.busy_fraction)} between its first and last op)"
        for b in prof.gpu_busy
    )
    parts: list[Any] = [t, Text(f"GPU busy: {busy}")]
    summed = sum(r.total_s or 0 for r in prof.kernel_time)
    union = sum(b.busy_s or 0 for b in prof.gpu_busy)
    if summed > union and _ms(summed) != _ms(union):  # the two figures on screen disagree: say why
        parts.append(
            Text(
                f"The classes sum to {_ms(summed)} ms, more than the {_ms(union)} ms the GPU was busy: GPU ops ran "
                "at the same time (on concurrent streams, or on one stream with programmatic dependent launch), "
                "each counted in full above and the overlap once in the busy time",
                style="dim",
            )
        )
    variants = ", ".join(f"{v.variant or 'phase not in name'} {_ms(v.total_s)} ms" for v in prof.attention_variants)
    if variants:
        parts.append(Text(f"Attention kernels: {variants}"))
    if prof.orphans:
        parts.append(
            Text(
                f"{prof.orphans:,} GPU ops were launched before the trace window opened "
                "(no launch event; kept and flagged `orphan`)",
                style="yellow",
            )
        )
    return parts

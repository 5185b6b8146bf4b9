"""A replay document as the rows the terminal and the report show: measured, replayed and each what-if side
by side, the notes, and the validation table. They read the typed document; they compute nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lltrace.documents.base import given
from lltrace.documents.replay import (
    Calibration,
    DecodeMatch,
    Figures,
    Metrics,
    Quantities,
    ReplayDocument,
    Scores,
)


@dataclass(frozen=True)
class Case:
    """One row of the replay's comparison: measured, replayed, or a what-if (estimated)."""

    case: str
    basis: str
    queue_p50_s: float | None
    ttft_mean_s: float | None
    tpot_mean_s: float | None
    e2e_mean_s: float | None
    e2e_p90_s: float | None
    preemptions: float | int | None


@dataclass(frozen=True)
class Score:
    """One latency of a validation: replayed against measured, and how it is scored (MAPE, or the absolute error of
    a figure measured under the floor)."""

    metric: str
    replayed: Quantities
    measured: Quantities
    mape: Figures
    abs_error: Figures
    scored_by: Figures


def what_if_label(what_if: dict[str, Any]) -> str:
    """``kv_blocks=80``-style name of a what-if's settings."""
    return " ".join(f"{k}={x:g}" if isinstance(x, float) else f"{k}={x}" for k, x in what_if.items())


def _case(case: str, basis: str, s: Metrics, preemptions: float | int | None) -> Case:
    return Case(case, basis, s.queue_s.p50, s.ttft_s.mean, s.tpot_s.mean, s.e2e_s.mean, s.e2e_s.p90, preemptions)


def replay_cases(doc: ReplayDocument) -> list[Case]:
    """The rows the terminal and the report show for a replay document: measured, replayed, each what-if."""
    base = doc.baseline
    return [
        _case("measured", "measured", base.measured, base.measured_preemptions),
        _case("replayed", "replayed", base.summary, base.preemptions),
        *(_case(what_if_label(w.what_if), "estimated", w.summary, w.preemptions) for w in doc.whatifs),
    ]


def replay_notes(doc: ReplayDocument) -> list[tuple[str, str]]:
    """(case, note) for every note of the baseline and the what-ifs (overload, a stalled scheduler); a what-if's note
    the baseline has too (how the replay reads the run, speculative decoding's) is said once, of the baseline."""
    said = set(doc.baseline.notes)
    cases = [("replayed", doc.baseline.notes)] + [(what_if_label(w.what_if), w.notes) for w in doc.whatifs]
    return [(name, note) for name, notes in cases for note in notes if name == "replayed" or note not in said]


def scores(s: Scores) -> list[Score]:
    """Per latency: replayed and measured figures and how each is scored."""
    return [
        Score(
            metric,
            getattr(s.replayed, metric),
            getattr(s.measured, metric),
            *(getattr(r, metric) for r in (s.mape, s.abs_error_s, s.scored_by)),
        )
        for metric in Metrics.__struct_fields__
    ]


def hit_term(calibration: Calibration) -> str:
    """The step cost's prefix-hit term as the terminal and the report write it after the per-token terms ("" where
    it is 0)."""
    c_hit = calibration.c_hit_s_per_hit_prefill or 0.0
    return f" + {c_hit * 1e3:.2f} ms per prefill started on a prefix-cache hit" if c_hit > 0 else ""


def match_note(match: DecodeMatch | None, whose: str) -> str | None:
    """The sentence on how a step cost's level was set against the run's measured decode time (a ``decode_match``
    of the calibration or the validation; ``whose``: which cost), or None where no match was tried."""
    if match is None:
        return None
    return f"{whose} matched to the measured decode time: {match.basis}"


def speed_change_note(doc: ReplayDocument) -> str | None:
    """The sentence under the validation table on how the engine's own steps changed speed in the scored window
    (``validation.speed_change``), or None where the run has no step log to tell."""
    change = given(doc.validation.speed_change) if doc.validation is not None else None
    if change is None:
        return None
    return (
        f"same-batch step time: in the scored window the engine's own decode-only steps took x{change.ratio:.2f} "
        f"their time before it at the same batches ({change.steps_after:,} steps after, {change.batches} "
        "batch sizes); a cost fitted before the split cannot know such a change (a busier or quieter host, a "
        "frontend busy with arrivals)"
    )


_OUTSIDE = (("frontend", "frontend (arrival to queued)"), ("client_first_token", "client's share of TTFT"))


def outside_change_note(doc: ReplayDocument) -> str | None:
    """The sentence under the validation table on how the time outside the engine changed in the scored window
    (``validation.outside_change``: medians, the frontend's and the client's share of TTFT), or None."""
    change = (given(doc.validation.outside_change) if doc.validation is not None else None) or {}
    said = [
        f"the {name} {c.before_s * 1e3:,.2f} -> {c.after_s * 1e3:,.2f} ms (x{c.ratio:.2f})"
        for key, name in _OUTSIDE
        if (c := change.get(key)) is not None and c.ratio is not None
    ]
    if not said:
        return None
    return (
        "outside the engine, median per request before the split -> in the scored window: " + ", ".join(said) + "; "
        "the replay takes them as measured before it, its frontend term growing with the requests the engine holds "
        "(queued while it runs steps): a change the load does not explain is the host's"
    )


@dataclass(frozen=True)
class SweepRow:
    """One case of a sweep: the sweep's text, the swept value (a number where one numeric key varies, else the
    settings' label) and the case's figures."""

    sweep: str
    value: Any
    case: Case


def sweep_rows(doc: ReplayDocument) -> list[SweepRow]:
    """One row per case of each sweep, in the sweep's order."""
    cases = replay_cases(doc)[2:]  # measured and replayed first
    out = []
    for sweep in doc.sweeps:
        for i in sweep.cases:
            setting = doc.whatifs[i].what_if
            one = setting[sweep.keys[0]] if len(sweep.keys) == 1 else None
            value = one if isinstance(one, (int, float)) else what_if_label({k: setting[k] for k in sweep.keys})
            out.append(SweepRow(sweep.what_if, value, cases[i]))
    return out

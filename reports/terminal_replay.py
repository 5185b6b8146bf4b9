"""The replay document as the terminal shows it: calibration, validation first, then the what-ifs. One renderer
per section, each taking that section's type. It formats; it computes nothing."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table

from lltrace.documents.base import given
from lltrace.documents.replay import (
    Calibration,
    CrossValidation,
    ReplayDocument,
    SchedulerCheck,
    Validation,
    WhatIfCheck,
)
from lltrace.reports.console import Text
from lltrace.reports.numbers import pct, whole
from lltrace.reports.replay_rows import (
    hit_term,
    match_note,
    outside_change_note,
    replay_cases,
    replay_notes,
    scores,
    speed_change_note,
    sweep_rows,
    what_if_label,
)


def _seconds(v: float | None, metric: str = "") -> str:
    if v is None:
        return "-"
    return f"{v * 1e3:.2f} ms" if metric.startswith("tpot") else f"{v:.3f}"


def _score(scored_by: Any, abs_error: Any, mape: Any) -> str:
    """A validation cell: the MAPE, or the absolute error of a figure measured under 1 ms."""
    if scored_by == "abs_error" and given(abs_error) is not None:
        return f"±{abs(abs_error) * 1e3:.2f} ms"
    return pct(given(mape))


def _calibration_parts(doc: ReplayDocument) -> list[Any]:
    """What was replayed, and the step cost: where it came from, its terms, its fit by kind, its rates."""
    c: Calibration = doc.calibration
    fit = "" if c.step_mape is None else f" (fit MAPE {c.step_mape:.0%})"
    o = c.outside_engine_s
    n = doc.requests
    left = f"; {n.left_out:,} left out ({n.why_left_out})" if n.left_out else ""
    parts: list[Any] = [
        Text(f"{n.replayed:,} requests replayed{left}"),
        Text(
            f"calibration from {c.source}: step = {c.c0_s * 1e3:.2f} ms + overhead {c.overhead_s * 1e3:.2f} ms"
            f" + {c.c_prefill_s_per_token * 1e6:.1f} us/prefill token + {c.c_decode_s_per_token * 1e6:.1f} us/"
            f"decode token{hit_term(c)}{fit}; outside the engine: frontend {o.frontend * 1e3:.1f} ms "
            f"+ {o.frontend_per_request_in_engine * 1e3:.2f} ms per request the engine holds, client "
            f"+{o.client_first_token * 1e3:.1f} ms to the first token, +{o.client_last_token * 1e3:.1f} ms "
            "to the last (measured)"
        ),
    ]
    if matched := match_note(c.decode_match, "the step cost (the terms above)"):
        parts.append(Text(matched))
    if c.fit_by_kind:
        parts.append(
            Text(
                "step fit by kind (MAPE, predicted/measured): "
                + ", ".join(f"{k} {v.mape:.0%} ({v.bias:.2f}, {v.steps:,} steps)" for k, v in c.fit_by_kind.items())
            )
        )
    if c.rates.prefill_tokens_per_s:
        parts.append(
            Text(
                f"read as rates: decode {c.rates.decode_s_per_token_batch1 * 1e3:.2f} ms per token at batch 1, "
                f"prefill {c.rates.prefill_tokens_per_s:,.0f} tokens/s"
            )
        )
    return parts


def _validation_parts(doc: ReplayDocument, v: Validation | None) -> list[Any]:
    """The validation on the held-out window, its own error first, and what to know when reading it."""
    if v is None:
        return [Text("validation: none — the run has no measured latencies to score against")]
    t = Table(title=f"validation: {v.method}")
    heads = ["metric", "replayed mean", "measured mean", "MAPE mean", "replayed p90", "measured p90", "MAPE p90"]
    drift, ratio = given(v.drift_corrected), given(v.drift)
    if drift is not None and ratio is not None:
        heads += [f"MAPE mean at x{ratio:.2f}", f"MAPE p90 at x{ratio:.2f}"]
        t.caption = (
            f"at x{ratio:.2f}: the scored window replayed at its own speed level (its same-batch decode steps "
            "over the calibration window's): the cost model's error with the host's change taken out"
        )
    corrected = {s.metric: s for s in scores(drift)} if drift is not None and ratio is not None else {}
    for col in heads:
        t.add_column(col, justify="left" if col == "metric" else "right")
    for s in scores(v):
        row = _score_row(s)
        if (c := corrected.get(s.metric)) is not None:
            row += [
                _score(_by(c.scored_by.mean), c.abs_error.mean, c.mape.mean),
                _score(_by(c.scored_by.p90), c.abs_error.p90, c.mape.p90),
            ]
        t.add_row(*row)
    parts: list[Any] = [t]
    if v.left_out is not None:
        parts.append(Text(f"left out of the score: {v.left_out.requests} requests, {v.left_out.why}"))
    for note in (speed_change_note(doc), outside_change_note(doc)):
        if note:
            parts.append(Text(note))
    if matched := match_note(given(v.decode_match), "the validation's step cost, fitted before the split,"):
        parts.append(Text(matched))
    return parts


def _scheduler_parts(x: SchedulerCheck | None) -> list[Any]:
    """The scheduler check: the replay with the engine's own step times against its spans, and the first request
    to part from them."""
    if x is None:
        return []
    t = Table(
        title=f"scheduler check: the replay with the engine's own step times, each request entering when the core took"
        f" it; against its spans ({x.steps_replayed:,} steps replayed, {x.steps_logged:,} logged): the error left is "
        "the scheduler's"
    )
    for col in ("metric", "replayed mean", "spans mean", "MAPE mean", "replayed p90", "spans p90", "MAPE p90"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for s in scores(x):
        t.add_row(*_score_row(s))
    parts: list[Any] = [t]
    d = x.first_divergence
    if d is not None:
        said = ", ".join(
            f"{k.removesuffix('_s')} {_ms(d.measured.get(k))} measured, {_ms(d.replayed.get(k))} replayed"
            for k in d.measured
        )
        parts.append(
            Text(
                f"first request to part (by more than 5 % and one step): {d.request_id} at {d.arrival_s:.3f} s: "
                f"{said}; {d.requests_parted:,} of {x.requests:,} part so"
            )
        )
    return parts


def check_line(label: str, c: WhatIfCheck) -> str:
    """A what-if against the real run that answers it: the speed taken out, each mean's error, the directions."""
    speed = "at the base run's speed (no step log)" if c.speed_ratio is None else f"at its speed, x{c.speed_ratio:.2f}"
    errs = ", ".join(
        f"{name} {err:+.0%}"
        for name, err in (
            ("queue", c.queue_mean_err),
            ("TTFT", c.ttft_mean_err),
            ("TPOT", c.tpot_mean_err),
            ("e2e", c.e2e_mean_err),
        )
        if err is not None
    )
    moved = "; ".join(f"{m.removesuffix('_s')} {d.real} (predicted {d.predicted})" for m, d in c.directions.items())
    verdict = "every direction right" if c.direction_ok else "a direction WRONG"
    return (
        f"{label} against {c.run} (replayed {speed}): means predicted/real - 1: {errs}; moved from the base run: "
        f"{moved or 'none by more than 5 %'}: {verdict}"
    )


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:,.2f} ms"


def _score_row(s: Any) -> list[str]:
    """One metric's cells: replayed and measured mean, its score, then the same for the p90."""
    m = s.metric
    return [
        m,
        _seconds(s.replayed.mean, m),
        _seconds(s.measured.mean, m),
        _score(_by(s.scored_by.mean), s.abs_error.mean, s.mape.mean),
        _seconds(s.replayed.p90, m),
        _seconds(s.measured.p90, m),
        _score(_by(s.scored_by.p90), s.abs_error.p90, s.mape.p90),
    ]


def _by(scored_by: Any) -> str:
    """How a figure is scored ("mape" where the document does not say)."""
    return "mape" if given(scored_by) is None else str(scored_by)


def _cross_table(x: CrossValidation) -> Table:
    """This run replayed with a cost fitted on another run: mean and median of each latency, and preemptions."""
    t = Table(title=f"cross-run validation: {x.method}")
    t.add_column("metric")
    for q in ("mean", "p50"):
        for what in ("replayed", "measured", "MAPE"):
            t.add_column(f"{what} {q}", justify="right")
    for s in scores(x):
        cells = []
        for replayed, measured, by, err, mape in (
            (s.replayed.mean, s.measured.mean, s.scored_by.mean, s.abs_error.mean, s.mape.mean),
            (s.replayed.p50, s.measured.p50, s.scored_by.p50, s.abs_error.p50, s.mape.p50),
        ):
            cells += [_seconds(replayed, s.metric), _seconds(measured, s.metric), _score(_by(by), err, mape)]
        t.add_row(s.metric, *cells)
    p = x.preemptions
    measured = "-" if p.measured is None else f"{p.measured:.0f}"
    t.caption = f"preemptions: replayed {p.replayed}, measured {measured}"
    return t


def _cases_parts(doc: ReplayDocument) -> list[Any]:
    """Measured, replayed and each what-if side by side, with each hardware what-if's roofline speedup."""
    b = doc.baseline
    counted = "not counted" if b.measured_preemptions is None else f"{b.measured_preemptions:.0f} counted"
    t = Table(title=f"baseline replay: {b.preemptions} preemptions ({counted}); what-ifs are estimates")
    for col in ("case", "queue p50", "ttft mean", "tpot mean", "e2e mean", "e2e p90", "preemptions"):
        t.add_column(col, justify="left" if col == "case" else "right")
    for r in replay_cases(doc):
        t.add_row(
            r.case,
            _seconds(r.queue_p50_s),
            _seconds(r.ttft_mean_s),
            _seconds(r.tpot_mean_s, "tpot"),
            _seconds(r.e2e_mean_s),
            _seconds(r.e2e_p90_s),
            whole(r.preemptions),
        )
    parts: list[Any] = [t]
    for w in doc.whatifs:
        if (check := given(w.check)) is not None:
            parts.append(Text(check_line(what_if_label(w.what_if), check)))
        up = given(w.speedup)
        if up is not None:
            prefill = "-" if up.prefill is None else f"{up.prefill:.2f}x"
            parts.append(
                Text(
                    f"{what_if_label(w.what_if)}: roofline speedup (estimate) decode {up.decode_batch1:.2f}x "
                    f"per token at batch 1, prefill {prefill}"
                )
            )
    return parts


def render_replay(doc: ReplayDocument) -> Group:
    """The replay document as the terminal shows it: calibration, validation first, then the what-ifs."""
    parts = _calibration_parts(doc) + _scheduler_parts(doc.scheduler_check) + _validation_parts(doc, doc.validation)
    if doc.cross_validation is not None:
        parts.append(_cross_table(doc.cross_validation))
    parts += _cases_parts(doc) + _sweep_tables(doc)
    parts += [Text(f"{label}: {note}", style="yellow") for label, note in replay_notes(doc)]
    return Group(*parts)


def _bar(value: float | None, top: float, width: int = 24) -> str:
    if value is None or top <= 0:
        return ""
    return "█" * max(1, round(width * value / top)) if value > 0 else ""


def _sweep_tables(doc: ReplayDocument) -> list[Table]:
    """Each sweep as a table, one row per value, with e2e p90 drawn as a bar (where it falls over)."""
    rows = sweep_rows(doc)
    tables = []
    for sweep in dict.fromkeys(r.sweep for r in rows):
        mine = [r for r in rows if r.sweep == sweep]
        top = max((r.case.e2e_p90_s or 0.0 for r in mine), default=0.0)
        t = Table(title=f"sweep {sweep} (estimates)")
        for col in ("value", "queue p50", "ttft mean", "e2e mean", "e2e p90", "preemptions", ""):
            t.add_column(col, justify="left" if col in ("value", "") else "right")
        for r in mine:
            c = r.case
            t.add_row(
                f"{r.value:g}" if isinstance(r.value, float) else str(r.value),
                _seconds(c.queue_p50_s),
                _seconds(c.ttft_mean_s),
                _seconds(c.e2e_mean_s),
                _seconds(c.e2e_p90_s),
                whole(c.preemptions),
                _bar(c.e2e_p90_s, top),
            )
        tables.append(t)
    return tables

"""The replay document as the terminal shows it: calibration, validation first, then the what-ifs. It formats;
it computes nothing."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from lltrace.reports.numbers import pct, whole
from lltrace.reports.replay_rows import (
    hit_term,
    match_note,
    outside_change_note,
    replay_cases,
    replay_notes,
    speed_change_note,
    sweep_rows,
    validation_rows,
    what_if_label,
)


def _seconds(v: float | None, metric: str = "") -> str:
    if v is None:
        return "-"
    return f"{v * 1e3:.2f} ms" if metric.startswith("tpot") else f"{v:.3f}"


def _score(row: dict[str, Any], q: str) -> str:
    """A validation cell: the MAPE, or the absolute error of a figure measured under 1 ms."""
    if row[f"by_{q}"] == "abs_error" and row[f"abs_{q}"] is not None:
        return f"±{abs(row[f'abs_{q}']) * 1e3:.2f} ms"
    return pct(row[f"mape_{q}"])


def render_replay(doc: dict[str, Any]) -> Group:
    """The replay document as the terminal shows it: calibration, validation first, then the what-ifs."""
    c = doc["calibration"]
    fit = "" if c["step_mape"] is None else f" (fit MAPE {c['step_mape']:.0%})"
    o = c["outside_engine_s"]
    n = doc.get("requests") or {}
    left = f"; {n['left_out']:,} left out ({n['why_left_out']})" if n.get("left_out") else ""
    parts: list[Any] = [
        Text(f"{n.get('replayed', 0):,} requests replayed{left}"),
        Text(
            f"calibration from {c['source']}: step = {c['c0_s'] * 1e3:.2f} ms + overhead {c['overhead_s'] * 1e3:.2f} ms"
            f" + {c['c_prefill_s_per_token'] * 1e6:.1f} us/prefill token + {c['c_decode_s_per_token'] * 1e6:.1f} us/"
            f"decode token{hit_term(c)}{fit}; outside the engine: frontend {o['frontend'] * 1e3:.1f} ms "
            f"+ {o['frontend_per_request_in_engine'] * 1e3:.2f} ms per request the engine holds, client "
            f"+{o['client_first_token'] * 1e3:.1f} ms to the first token, +{o['client_last_token'] * 1e3:.1f} ms "
            "to the last (measured)"
        ),
    ]
    matched = match_note(c.get("decode_match"), "the step cost (the terms above)")
    if matched:
        parts.append(Text(matched))
    kinds = c.get("fit_by_kind") or {}
    if kinds:
        parts.append(
            Text(
                "step fit by kind (MAPE, predicted/measured): "
                + ", ".join(f"{k} {v['mape']:.0%} ({v['bias']:.2f}, {v['steps']:,} steps)" for k, v in kinds.items())
            )
        )
    rates = c.get("rates") or {}
    if rates.get("prefill_tokens_per_s"):
        parts.append(
            Text(
                f"read as rates: decode {rates['decode_s_per_token_batch1'] * 1e3:.2f} ms per token at batch 1, "
                f"prefill {rates['prefill_tokens_per_s']:,.0f} tokens/s"
            )
        )
    rows = validation_rows(doc)
    if not rows:
        parts.append(Text("validation: none — the run has no measured latencies to score against"))
    else:
        t = Table(title=f"validation: {doc['validation']['method']}")
        heads = ("metric", "replayed mean", "measured mean", "MAPE mean", "replayed p90", "measured p90", "MAPE p90")
        for col in heads:
            t.add_column(col, justify="left" if col == "metric" else "right")
        for r in rows:
            m = r["metric"]
            t.add_row(
                m,
                _seconds(r["replayed_mean"], m),
                _seconds(r["measured_mean"], m),
                _score(r, "mean"),
                _seconds(r["replayed_p90"], m),
                _seconds(r["measured_p90"], m),
                _score(r, "p90"),
            )
        parts.append(t)
        left = doc["validation"].get("left_out")
        if left:
            parts.append(Text(f"left out of the score: {left['requests']} requests, {left['why']}"))
        for note in (speed_change_note(doc), outside_change_note(doc)):
            if note:
                parts.append(Text(note))
        matched = match_note(
            doc["validation"].get("decode_match"), "the validation's step cost, fitted before the split,"
        )
        if matched:
            parts.append(Text(matched))
    x = doc.get("cross_validation")
    if x:
        t = Table(title=f"cross-run validation: {x['method']}")
        t.add_column("metric")
        for q in ("mean", "p50"):
            for what in ("replayed", "measured", "MAPE"):
                t.add_column(f"{what} {q}", justify="right")
        for m in ("queue_s", "ttft_s", "tpot_s", "e2e_s"):
            cells = []
            for q in ("mean", "p50"):
                row = {
                    f"by_{q}": x["scored_by"][m][q],
                    f"abs_{q}": x["abs_error_s"][m][q],
                    f"mape_{q}": x["mape"][m][q],
                }
                cells += [_seconds(x["replayed"][m][q], m), _seconds(x["measured"][m][q], m), _score(row, q)]
            t.add_row(m, *cells)
        p = x["preemptions"]
        measured = "-" if p["measured"] is None else f"{p['measured']:.0f}"
        t.caption = f"preemptions: replayed {p['replayed']}, measured {measured}"
        parts.append(t)
    b = doc["baseline"]
    counted = "not counted" if b["measured_preemptions"] is None else f"{b['measured_preemptions']:.0f} counted"
    t = Table(title=f"baseline replay: {b['preemptions']} preemptions ({counted}); what-ifs are estimates")
    for col in ("case", "queue p50", "ttft mean", "tpot mean", "e2e mean", "e2e p90", "preemptions"):
        t.add_column(col, justify="left" if col == "case" else "right")
    for r in replay_cases(doc):
        t.add_row(
            r["case"],
            _seconds(r["queue_p50_s"]),
            _seconds(r["ttft_mean_s"]),
            _seconds(r["tpot_mean_s"], "tpot"),
            _seconds(r["e2e_mean_s"]),
            _seconds(r["e2e_p90_s"]),
            whole(r["preemptions"]),
        )
    parts.append(t)
    for w in doc["whatifs"]:
        up = w.get("speedup")
        if up:
            prefill = "-" if up["prefill"] is None else f"{up['prefill']:.2f}x"
            parts.append(
                Text(
                    f"{what_if_label(w['what_if'])}: roofline speedup (estimate) decode {up['decode_batch1']:.2f}x "
                    f"per token at batch 1, prefill {prefill}"
                )
            )
    parts += _sweep_tables(doc)
    for label, note in replay_notes(doc):
        parts.append(Text(f"{label}: {note}", style="yellow"))
    return Group(*parts)


def _bar(value: float | None, top: float, width: int = 24) -> str:
    if value is None or top <= 0:
        return ""
    return "█" * max(1, round(width * value / top)) if value > 0 else ""


def _sweep_tables(doc: dict[str, Any]) -> list[Table]:
    """Each sweep as a table, one row per value, with e2e p90 drawn as a bar (where it falls over)."""
    rows = sweep_rows(doc)
    tables = []
    for sweep in dict.fromkeys(r["sweep"] for r in rows):
        mine = [r for r in rows if r["sweep"] == sweep]
        top = max((r["e2e_p90_s"] or 0.0 for r in mine), default=0.0)
        t = Table(title=f"sweep {sweep} (estimates)")
        for col in ("value", "queue p50", "ttft mean", "e2e mean", "e2e p90", "preemptions", ""):
            t.add_column(col, justify="left" if col in ("value", "") else "right")
        for r in mine:
            value = r["value"]
            t.add_row(
                f"{value:g}" if isinstance(value, float) else str(value),
                _seconds(r["queue_p50_s"]),
                _seconds(r["ttft_mean_s"]),
                _seconds(r["e2e_mean_s"]),
                _seconds(r["e2e_p90_s"]),
                whole(r["preemptions"]),
                _bar(r["e2e_p90_s"], top),
            )
        tables.append(t)
    return tables

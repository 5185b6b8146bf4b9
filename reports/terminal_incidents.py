"""The incidents on the terminal, first: each one's sentence, then when, to whom, what the engine did, why, and
what to change for it (``lltrace.documents.incidents``). It formats; it computes nothing."""

from __future__ import annotations

from typing import Any

from rich.panel import Panel

from lltrace.documents.incidents import EngineInside, Incident, IncidentAdvice, IncidentReplayed, Timeline
from lltrace.reports.console import Text

SHOWN = 3
"""Advice items shown per incident (the document holds them all)."""


def _ms(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x * 1e3:,.3g} ms" if abs(x) < 1 else f"{x:,.3g} s"


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _num(x: float | None, fmt: str = ",.3g") -> str:
    return "-" if x is None else format(x, fmt)


def engine_line(e: EngineInside) -> str:
    """The engine inside the incident against outside it, on one line."""
    i, o = e.inside, e.outside
    said = [
        f"step {_ms(i.step_time_mean_s)} vs {_ms(o.step_time_mean_s)}",
        f"prompt tokens/step {_num(i.prompt_tokens_per_step)} vs {_num(o.prompt_tokens_per_step)}",
    ]
    if i.at_slot_cap is not None or o.at_slot_cap is not None:
        said.append(f"slots full {_share(i.at_slot_cap)} vs {_share(o.at_slot_cap)}")
    if i.at_budget is not None or o.at_budget is not None:
        said.append(f"budget full {_share(i.at_budget)} vs {_share(o.at_budget)}")
    if i.kv_peak is not None:
        said.append(f"KV peak {_share(i.kv_peak)} vs {_share(o.kv_peak)}")
    if i.preemptions:
        said.append(f"preemptions {i.preemptions:,.0f} vs {_num(o.preemptions, ',.0f')}")
    if i.waiting_mean is not None:
        said.append(f"waiting {_num(i.waiting_mean, '.2g')} vs {_num(o.waiting_mean, '.2g')}")
    if e.step_time_ratio is not None:
        said.append(f"same-batch decode step x{e.step_time_ratio:.2g}")
    return "Engine inside vs outside: " + " · ".join(said)


def advice_lines(advice: list[IncidentAdvice]) -> Text:
    """The incident's advice, most valuable first (``SHOWN`` of it), each with its gain on the incident's requests."""
    t = Text("What to change for it (estimated on its own requests, most valuable first):", style="bold")
    for k, a in enumerate(advice[:SHOWN], 1):
        g = a.expected_gain
        t.append(f"\n {k}. [{a.bottleneck.value}] {a.engine_setting or a.setting or 'no engine setting'}: ")
        t.append(a.action)
        t.append(f" -> {g.metric}: {_ms(g.from_)} -> {_ms(g.to)}", style="bold")
        if a.replayed is not None:
            t.append("\n    " + replayed_words(a.replayed))
    return t


def replayed_words(r: IncidentReplayed) -> str:
    """An advice's replay in words: the figure it gives with the change, the replay's own figure for the window as
    the run was set and the measured one."""
    return (
        f"replayed (estimated): {_ms(r.replayed)} -> {_ms(r.to)} with {r.change} "
        f"(as set {_ms(r.replayed)}, measured {_ms(r.measured)})"
    )


def _mechanism(i: Incident) -> str:
    m = i.mechanism
    said = [
        f"{name} {m.shares[key]:.0%}"
        for key, name in (
            ("slot_wait", "slot wait"),
            ("budget_wait", "budget wait"),
            ("kv_wait", "KV wait"),
            ("load", "load"),
            ("interference", "interference"),
            ("preempted", "preempted"),
        )
        if (m.shares.get(key) or 0) >= 0.005
    ]
    if m.preemptions:
        said.append(f"{m.preemptions:,} preemptions")
    return f"{', '.join(said) or 'no part measured'} of their e2e"


def no_incident_line(tl: Timeline) -> Text:
    """A run with a timeline and no incident says so first, with what was set aside and why."""
    if tl.degraded_throughout:
        said = f"No incident: latency was above its threshold in most windows of {tl.width_s:g} s (the whole run)"
    else:
        said = f"No incident: no window of {tl.width_s:g} s (by {tl.by}) left the run's typical latency"
        if tl.set_aside:
            said += "; set aside: " + "; ".join(f"{a.start_s:g}-{a.end_s:g} s ({a.why})" for a in tl.set_aside)
    return Text(said, style="bold")


def incident_parts(incidents: list[Incident], tl: Timeline | None = None) -> list[Any]:
    """The worst incident in full, the others one line each; without one, a line saying so (where judged)."""
    if not incidents:
        return [no_incident_line(tl)] if tl is not None else []
    first = incidents[0]
    body = Text()
    body.append(first.verdict, style="bold red")
    when = f"\nWhen: {first.start_s:.1f} s to {first.end_s:.1f} s after the first arrival"
    if first.start_utc:
        when += f" ({first.start_utc} to {first.end_utc})"
    body.append(when + f"; degraded: {', '.join(first.metrics)}")
    who = "; ".join(
        f"client {a.client}: {a.over} of {a.requests} over" + (f" (prompt classes {a.size_classes})" if a.over else "")
        for a in first.affected
    )
    body.append(f"\nWho: {who}")
    why = f"\nWhy: {first.trigger.kind.replace('_', ' ')}; inside, {_mechanism(first)}"
    for c in first.caused_by:
        why += (
            f"; client {c.client}'s {c.requests} requests held {_num(c.slot_s, ',.1f')} slot-seconds, "
            f"{_num(c.prompt_tokens, ',.0f')} prompt tokens, and added {_ms(c.step_time_s)} to others' decode steps"
        )
    body.append(why)
    if first.engine is not None:
        body.append("\n" + engine_line(first.engine))
    parts: list[Any] = [Panel(body, title=f"Incident (1 of {len(incidents)})", expand=False)]
    if first.advice:
        parts.append(advice_lines(first.advice))
    for other in incidents[1:]:
        parts.append(Text(f"Also: {other.verdict}"))
    return parts

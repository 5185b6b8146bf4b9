"""An incident's advice replayed: its window under the setting each item names (docs/incidents.md, "What to change
for it"), where the replay can (the run has engine timings, the item a setting the replay models).

The setting's value is the run's own, moved as the item says: the triggering client's requests on an engine of their
own (a pool of their own: the others replayed without them), twice the sequence slots, twice the KV blocks (an FP8
KV cache holds twice the tokens in the same memory), twice the token budget, or a per-request prompt-chunk cap at the
p90 prompt of the requests that suffered (their own prompts pass whole, longer ones are chunked). Each item gets
``replayed``: the p90 of its metric over the incident's suffering requests, measured, replayed as the run was set,
and replayed with the change; the first two side by side are the replay's own error on this window. The items are
then ranked by what the replay took off where it has a figure (``saved``): a bound the replay does not reach (more
slots that still leave the others behind the long prompts) falls behind one it does.
"""

from __future__ import annotations

from typing import Any

import duckdb

from lltrace.documents.incidents import METRIC_NAMES
from lltrace.errors import AnalysisError
from lltrace.replay.calibration import engine_config_for
from lltrace.replay.window import WindowCase, WindowReplay, replay_window
from lltrace.store import Run

# the settings whose value the replay doubles, with why that step (a setting people move by powers of two)
DOUBLED = {
    "max_num_seqs": ("max_num_seqs", "max_num_seqs", "twice the sequence slots"),
    "max_num_batched_tokens": ("max_num_batched_tokens", "max_num_batched_tokens", "twice the token budget"),
    "gpu_memory_utilization": ("kv_blocks", "KV blocks", "twice the blocks: what an FP8 KV cache holds in the memory"),
}


def _case(
    item: dict[str, Any], cause: str | None, settings: dict[str, dict[str, Any]], prompt_p90: int | None
) -> tuple[WindowCase, tuple[str, str]] | None:
    """The replayed change for one advice item, in words and why that value, or None where the replay does not
    model it."""
    setting = item["setting"]
    if setting == "scheduling_policy" and cause is not None:
        return WindowCase(without_client=cause), (f"client {cause} on an engine of its own", "a pool of its own")
    if setting in DOUBLED:
        key, name, why = DOUBLED[setting]
        now = settings.get(key, {}).get("value")
        if now is None:
            return None
        return WindowCase({key: 2 * int(now)}), (f"{name} {int(now):,} -> {2 * int(now):,}", why)
    if setting == "long_prefill_token_threshold" and prompt_p90:
        overrides: dict[str, Any] = {"long_prefill_token_threshold": prompt_p90, "chunked_prefill": True}
        now = int(settings.get(setting, {}).get("value") or 0)
        why = (
            "the p90 prompt of the requests that suffered: theirs pass whole, longer ones are chunked (chunked prefill)"
        )
        return WindowCase(overrides), (f"long_prefill_token_threshold {now:,} -> {prompt_p90:,}", why)
    return None


def _metric(item: dict[str, Any]) -> str:
    """The metric key of an item's gain (its words begin with the metric's name)."""
    words = item["expected_gain"]["metric"]
    return next(m for m, name in METRIC_NAMES.items() if words.startswith(name))


def _entry(w: WindowReplay, k: int, metric: str, change: tuple[str, str], origin: float) -> dict[str, Any] | None:
    to, base, real = w.cases[k][metric], w.replayed[metric], w.measured[metric]
    if to is None or base is None:
        return None
    start = "the engine idle then" if w.from_idle else "on an empty engine: it was never idle in the incident's length"
    return {
        "change": change[0],
        "why": change[1],
        "metric": metric,
        "requests": w.requests,
        "measured": real,
        "replayed": base,
        "to": to,
        "unit": "s",
        "basis": "estimated",
        "how": f"the {w.replayed_requests} requests arriving from {w.replayed_from - origin:.1f} s ({start}) to "
        f"{w.replayed_to - origin:.1f} s replayed, the step cost fitted on {w.calibration}",
    }


def replay_incident_advice(run: Run, con: duckdb.DuckDBPyConnection, incidents: list[dict[str, Any]]) -> None:
    """Give each advice item of ``incidents`` (judged by arrival) that the replay can answer its ``replayed``
    figures; the others ``replayed`` None. ``con``: the analysis's connection over ``run``."""
    for i in incidents:
        for item in i["advice"]:
            item["replayed"] = None
    found = con.execute("SELECT min(arrival_s) FROM incident_arrivals").fetchall() if incidents else None
    if not found or found[0][0] is None:
        return
    origin = found[0][0]
    with run.held(con):
        settings = engine_config_for(run)
        for i in incidents:
            _replay_one(run, con, i, origin, settings)


def _replay_one(
    run: Run, con: duckdb.DuckDBPyConnection, i: dict[str, Any], origin: float, settings: dict[str, dict[str, Any]]
) -> None:
    cause = i["caused_by"][0]["client"] if i["caused_by"] else None
    found = con.execute(
        "SELECT quantile_disc(input_tokens, 0.9) FROM incident_arrivals WHERE t_s >= $1 AND t_s < $2 "
        "AND ($3 IS NULL OR client_id IS DISTINCT FROM $3)",
        [i["start_s"], i["end_s"], cause],
    ).fetchall()
    prompt_p90 = int(found[0][0]) if found and found[0][0] is not None else None
    asked = [(item, c) for item in i["advice"] if (c := _case(item, cause, settings, prompt_p90))]
    if not asked:
        return
    try:
        w = replay_window(run, origin + i["start_s"], origin + i["end_s"], cause, [c for _, (c, _) in asked])
    except AnalysisError:
        return  # nothing to calibrate on: the gains stay the attribution's bounds alone
    for k, (item, (_, change)) in enumerate(asked):
        item["replayed"] = _entry(w, k, _metric(item), change, origin)
    i["advice"].sort(key=lambda item: -saved(item))


def saved(item: dict[str, Any]) -> float:
    """The seconds an item saves its metric's p90, by which the advice is ranked: the attribution's bound, or where
    the item was replayed, that bound's starting figure times the share the replay took off (the replay's own
    level as the run was set being its reference)."""
    g, r = item["expected_gain"], item.get("replayed")
    if r is None or not r["replayed"]:
        return g["from"] - g["to"]
    return g["from"] * (1 - r["to"] / r["replayed"])

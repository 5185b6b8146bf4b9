"""A replay document as the rows the terminal and the report show: measured, replayed and each what-if side
by side, the notes, and the validation table."""

from __future__ import annotations

from typing import Any

METRICS = ("queue_s", "ttft_s", "tpot_s", "e2e_s")


def what_if_label(what_if: dict[str, Any]) -> str:
    """``kv_blocks=80``-style name of a what-if's settings."""
    return " ".join(f"{k}={x:g}" if isinstance(x, float) else f"{k}={x}" for k, x in what_if.items())


def replay_cases(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows the terminal and the report show for a replay document: measured, replayed, each what-if.

    Each row: ``case``, ``basis`` (measured / replayed / estimated), ``queue_p50_s``, ``ttft_mean_s``,
    ``tpot_mean_s``, ``e2e_mean_s``, ``e2e_p90_s`` and ``preemptions`` (None where unknown).
    """
    base = doc["baseline"]
    rows = [("measured", "measured", base["measured"], base["measured_preemptions"])]
    rows.append(("replayed", "replayed", base["summary"], base["preemptions"]))
    rows += [(what_if_label(w["what_if"]), "estimated", w["summary"], w["preemptions"]) for w in doc["whatifs"]]
    return [
        {
            "case": case,
            "basis": basis,
            "queue_p50_s": s["queue_s"]["p50"],
            "ttft_mean_s": s["ttft_s"]["mean"],
            "tpot_mean_s": s["tpot_s"]["mean"],
            "e2e_mean_s": s["e2e_s"]["mean"],
            "e2e_p90_s": s["e2e_s"]["p90"],
            "preemptions": preemptions,
        }
        for case, basis, s, preemptions in rows
    ]


def replay_notes(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(case, note) for every note of the baseline and the what-ifs (overload, a stalled scheduler); a what-if's note
    the baseline has too (how the replay reads the run, speculative decoding's) is said once, of the baseline."""
    said = set(doc["baseline"].get("notes") or [])
    cases = [("replayed", doc["baseline"])] + [(what_if_label(w["what_if"]), w) for w in doc["whatifs"]]
    return [
        (name, note)
        for name, case in cases
        for note in case.get("notes") or []
        if name == "replayed" or note not in said
    ]


def validation_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per metric: replayed and measured mean and p90 of the held-out requests, and the MAPE of each."""
    v = doc.get("validation")
    if not v:
        return []
    return [
        {
            "metric": m,
            **{f"replayed_{q}": v["replayed"][m][q] for q in ("mean", "p90")},
            **{f"measured_{q}": v["measured"][m][q] for q in ("mean", "p90")},
            **{f"mape_{q}": v["mape"][m][q] for q in ("mean", "p90")},
            **{f"abs_{q}": (v.get("abs_error_s") or {}).get(m, {}).get(q) for q in ("mean", "p90")},
            **{f"by_{q}": (v.get("scored_by") or {}).get(m, {}).get(q, "mape") for q in ("mean", "p90")},
        }
        for m in METRICS
    ]


def hit_term(calibration: dict[str, Any]) -> str:
    """The step cost's prefix-hit term as the terminal and the report write it after the per-token terms ("" where
    it is 0 or absent)."""
    c_hit = calibration.get("c_hit_s_per_hit_prefill") or 0.0
    return f" + {c_hit * 1e3:.2f} ms per prefill started on a prefix-cache hit" if c_hit > 0 else ""


def match_note(match: dict[str, Any] | None, whose: str) -> str | None:
    """The sentence on how a step cost's level was set against the run's measured decode time (a ``decode_match``
    of the calibration or the validation; ``whose``: which cost), or None where no match was tried."""
    if not match:
        return None
    return f"{whose} matched to the measured decode time: {match['basis']}"


def speed_change_note(doc: dict[str, Any]) -> str | None:
    """The sentence under the validation table on how the engine's own steps changed speed in the scored window
    (``validation.speed_change``), or None where the run has no step log to tell."""
    change = (doc.get("validation") or {}).get("speed_change")
    if not change:
        return None
    return (
        f"same-batch step time: in the scored window the engine's own decode-only steps took x{change['ratio']:.2f} "
        f"their time before it at the same batches ({change['steps_after']:,} steps after, {change['batches']} "
        "batch sizes); a cost fitted before the split cannot know such a change (a busier or quieter host, a "
        "frontend busy with arrivals)"
    )


def outside_change_note(doc: dict[str, Any]) -> str | None:
    """The sentence under the validation table on how the time outside the engine changed in the scored window
    (``validation.outside_change``: medians, the frontend's and the client's share of TTFT), or None."""
    change = (doc.get("validation") or {}).get("outside_change") or {}
    said = [
        f"the {name} {c['before_s'] * 1e3:,.2f} -> {c['after_s'] * 1e3:,.2f} ms (x{c['ratio']:.2f})"
        for key, name in (
            ("frontend", "frontend (arrival to queued)"),
            ("client_first_token", "client's share of TTFT"),
        )
        if (c := change.get(key)) and c.get("ratio") is not None
    ]
    if not said:
        return None
    return (
        "outside the engine, median per request before the split -> in the scored window: " + ", ".join(said) + "; "
        "the replay takes them as measured before it, its frontend term growing with the requests the engine holds "
        "(queued while it runs steps): a change the load does not explain is the host's"
    )


def sweep_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per case of each sweep (``doc["sweeps"]``): ``sweep`` (its ``--what-if`` text), ``value`` (the swept
    setting: a number where one numeric key varies, else the settings' label), the rows' figures as
    :func:`replay_cases` gives them, in the sweep's order."""
    cases = replay_cases(doc)[2:]  # measured and replayed first
    out = []
    for sweep in doc.get("sweeps") or []:
        keys = sweep["keys"]
        for i in sweep["cases"]:
            setting = doc["whatifs"][i]["what_if"]
            one = setting[keys[0]] if len(keys) == 1 else None
            value = one if isinstance(one, (int, float)) else what_if_label({k: setting[k] for k in keys})
            out.append({"sweep": sweep["what_if"], "value": value} | cases[i])
    return out

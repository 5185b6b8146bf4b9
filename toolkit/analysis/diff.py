"""``diff``: what changed between two runs, with the request mix normalised.

Requests fall into buckets of prompt and output length (powers of two). Where the two runs share most of
their traffic's buckets, each component's mean per request is compared on the baseline's mix (the
incident's bucket means re-weighted by the baseline's bucket shares), so "the traffic got longer" is
separated from "the system got slower". Where the mixes overlap too little, the diff says so and compares
plain means.
"""

from __future__ import annotations

import os
from typing import Any

from lltrace.ingest.targets import Target, as_store, open_run
from lltrace.queries import thresholds
from lltrace.store import Store

COMPONENTS = ("overhead", "queue", "kv_wait", "slot_wait", "budget_wait", "prefill", "decode", "preempted")
ADDITIVE = ("overhead", "queue", "prefill", "decode", "preempted")

_BUCKETS = """
SELECT a.run_id,
       CAST(floor(log2(greatest(a.input_tokens, 1))) AS INTEGER) AS ib,
       CAST(floor(log2(greatest(a.output_tokens, 1))) AS INTEGER) AS ob,
       count(*) AS n,
       avg(a.overhead_s) AS overhead, avg(a.queue_s) AS queue, avg(coalesce(k.kv_wait_s, 0)) AS kv_wait,
       avg(coalesce(k.slot_wait_s, 0)) AS slot_wait, avg(coalesce(k.budget_wait_s, 0)) AS budget_wait,
       avg(a.prefill_s) AS prefill, avg(a.decode_s) AS decode, avg(a.preempted_s) AS preempted
FROM attribution_request a
LEFT JOIN attribution_queue_causes k ON k.run_id = a.run_id AND k.request_id = a.request_id
WHERE a.e2e_s IS NOT NULL AND a.queue_s IS NOT NULL AND a.prefill_s IS NOT NULL AND a.decode_s IS NOT NULL
  AND a.input_tokens IS NOT NULL AND a.output_tokens IS NOT NULL
GROUP BY ALL
"""


def diff(baseline: Target, incident: Target, *, store: Store | str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The diff document of DESIGN.md (``lltrace diff --json``): each run a ``Run``, a stored run's id, or the
    file or folder of one run."""
    st = as_store(store)
    base, inc = open_run(baseline, st), open_run(incident, st)
    min_overlap = thresholds()["diff_min_overlap"]
    con = st.connect([base.id, inc.id])
    try:
        cur = con.execute(_BUCKETS)
        cols = [d[0] for d in cur.description]
        rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
        preempt = dict(con.execute("SELECT run_id, preemptions FROM engine_preemptions").fetchall())
    finally:
        con.close()
    b = {(r["ib"], r["ob"]): r for r in rows if r["run_id"] == base.id}
    i = {(r["ib"], r["ob"]): r for r in rows if r["run_id"] == inc.id}
    nb, ni = sum(r["n"] for r in b.values()), sum(r["n"] for r in i.values())
    shared = set(b) & set(i)
    overlap = (sum(b[k]["n"] for k in shared) + sum(i[k]["n"] for k in shared)) / (nb + ni) if nb + ni else 0.0
    normalised = bool(shared) and overlap >= min_overlap
    comps: dict[str, dict[str, float]] = {}
    for c in COMPONENTS:
        if normalised:
            w = {k: b[k]["n"] for k in shared}
            tot = sum(w.values())
            bv = sum(w[k] * b[k][c] for k in shared) / tot
            iv = sum(w[k] * i[k][c] for k in shared) / tot
        else:
            bv = sum(r["n"] * r[c] for r in b.values()) / nb if nb else float("nan")
            iv = sum(r["n"] * r[c] for r in i.values()) / ni if ni else float("nan")
        comps[c] = {"baseline_s": bv, "incident_s": iv, "delta_s": iv - bv}
    total = sum(comps[c]["delta_s"] for c in ADDITIVE)
    for c in COMPONENTS:
        comps[c]["share_of_change"] = comps[c]["delta_s"] / total if total else None
    lead = max(ADDITIVE, key=lambda c: abs(comps[c]["delta_s"]))
    direction = "faster" if total < 0 else "slower"
    verdict = (
        f"The incident is {abs(total):.3f} s per request {direction} on "
        f"{'the baseline' if normalised else 'its own'} request mix; most of the change is {lead} "
        f"({comps[lead]['delta_s']:+.3f} s, {abs(comps[lead]['share_of_change'] or 0):.0%} of it)"
    )
    if lead == "queue" and comps["queue"]["delta_s"]:
        waits = {"kv_wait": "KV-cache room", "slot_wait": "a sequence slot", "budget_wait": "the token budget"}
        main = max(waits, key=lambda w: comps[w]["delta_s"] / comps["queue"]["delta_s"])
        part = comps[main]["delta_s"] / comps["queue"]["delta_s"]
        verdict += f", of which {part:.0%} is waiting for {waits[main]}"
    if not normalised:
        verdict += f". The two runs' mixes overlap only {overlap:.0%}, so they were not normalised"
    verdict += "."
    return {
        "baseline": {"run": base.id, "requests": nb, "preemptions": preempt.get(base.id)},
        "incident": {"run": inc.id, "requests": ni, "preemptions": preempt.get(inc.id)},
        "mix": {
            "overlap": overlap,
            "normalised": normalised,
            "buckets_shared": len(shared),
            "bucketing": "log2 of prompt and output tokens",
            "min_overlap": min_overlap,
        },
        "components": comps,
        "verdict": verdict,
    }

"""The same benchmark result read from two files of one run, kept once.

``vllm bench sweep serve`` writes each run of a combination to ``run=N.json`` and then all of them again, as a
JSON array, to the combination's ``summary.json`` (vllm/benchmarks/sweep/serve.py ``run_comb``); a folder holding
both would count every request and every client figure twice. A result is known by its fingerprint (every key and
value the client wrote, ``parsers.vllm.result_fingerprint``); the copy kept is the one in the file holding the
fewest results (a run's own file), the others are left out of the run's rows and summaries and listed in their
source's ``repeated_results``. Never a silent double count, never a silent drop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def drop_repeated_results(stage: Path, sources: list[dict[str, Any]]) -> list[str]:
    """Keep each bench result once among the run's ``sources`` (their ``bench`` lists, edited in place) and
    its per-request rows once in ``stage/_bench``; returns one warning per source that repeated another's."""
    first: dict[str, str] = {}  # fingerprint -> where it is kept ("file" or "file#k")
    order = sorted(range(len(sources)), key=lambda i: (len(sources[i].get("bench") or []), i))
    dropped: dict[int, set[str]] = {}  # part -> client ids whose rows go
    for i in order:
        src = sources[i]
        kept = []
        for b in src.get("bench") or []:
            fp = b.get("fingerprint")
            if fp is None or fp not in first:
                if fp is not None:
                    first[fp] = b["client_id"]
                kept.append(b)
                continue
            dropped.setdefault(src["part"], set()).add(b["client_id"])
            src.setdefault("repeated_results", []).append({"client_id": b["client_id"], "same_as": first[fp]})
        if src.get("bench"):
            src["bench"] = kept
    for part, ids in dropped.items():
        path = stage / "_bench" / f"part-{part:05d}.parquet"
        if path.exists():
            table = pq.read_table(path)
            gone = pc.is_in(table["client_id"], value_set=pa.array(sorted(ids), pa.string()))
            pq.write_table(table.filter(pc.invert(gone)), path)
    out = []
    for src in sources:
        repeats = src.get("repeated_results")
        if repeats:
            same = sorted({r["same_as"] for r in repeats})
            out.append(
                f"{src['path']}: {len(repeats)} result(s) the run already has from {', '.join(same[:3])}"
                + (f" and {len(same) - 3} more" if len(same) > 3 else "")
                + " (a sweep's summary of its runs): read once"
            )
    return out

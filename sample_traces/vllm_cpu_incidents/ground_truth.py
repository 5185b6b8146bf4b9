"""Ground truth of the incident runs, from their raw files alone (not lltrace): the engine's `llm_request` spans,
the disturbance times `make_runs.sh` wrote as they happened, and the server's iteration log.

For each run: the disturbance (what, when, on the clock lltrace reports: seconds since the run's first request
arrival), the window of arrivals it can have touched (its start to the moment the engine had finished the last
request it brought, for a burst; to the moment it stopped, for the host), the clients, and the chat requests' TTFT
p90 before, during and after that window, with the median decode-only step time at batch 1 and 2 in each part.

    python ground_truth.py RUN_DIR [RUN_DIR ...]      (prints one JSON object per run)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from statistics import median


def spans(run: Path) -> list[dict]:
    """The run's llm_request spans: id, client (the id's prefix), arrival and finish (Unix s), TTFT (s)."""
    out = []
    for line in (run / "otlp" / "traces.otlp.jsonl").read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    if sp["name"] != "llm_request":
                        continue
                    a = {x["key"]: next(iter(x["value"].values())) for x in sp["attributes"]}
                    rid = a["gen_ai.request.id"]
                    client = re.sub(r"^cmpl-", "", rid).split("-")[0]
                    out.append(
                        {
                            "id": rid,
                            "client": client,
                            "arrival": int(sp["startTimeUnixNano"]) / 1e9,
                            "finish": int(sp["endTimeUnixNano"]) / 1e9,
                            "ttft": float(a["gen_ai.latency.time_to_first_token"]),
                        }
                    )
    return sorted(out, key=lambda r: r["arrival"])


def p90(xs: list[float]) -> float | None:
    xs = sorted(xs)
    if not xs:
        return None
    k = 0.9 * (len(xs) - 1)
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


ITER = re.compile(
    r"INFO (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) .*Iteration\(\d+\): (\d+) context requests, (\d+) context tokens, "
    r"(\d+) generation requests, (\d+) generation tokens, iteration elapsed time: ([\d.]+) ms"
)


def decode_steps(run: Path) -> list[tuple[int, int, float]]:
    """(second of the day the line was stamped, generation requests, elapsed ms) of decode-only iterations."""
    out = []
    for line in (run / "server.log").read_text(errors="replace").splitlines():
        m = ITER.search(line)
        if m and m.group(6) == "0":
            h, mi, s = int(m.group(3)), int(m.group(4)), int(m.group(5))
            out.append((h * 3600 + mi * 60 + s, int(m.group(8)), float(m.group(10))))
    return out


def truth(run: Path) -> dict:
    rs = spans(run)
    t0 = rs[0]["arrival"]
    marks = {}
    for line in (run / "disturbance.txt").read_text().splitlines():
        what, ts = line.split()[:2]
        marks[what] = float(ts)
    clients = sorted({r["client"] for r in rs})
    out: dict = {"run": run.name, "requests": len(rs), "clients": {c: sum(r["client"] == c for r in rs) for c in clients}}
    if not marks:
        out["disturbance"] = None
        return out
    others = [r for r in rs if r["client"] != "chat"]
    if others:  # a burst: from its first arrival to its last request's finish
        start, end = others[0]["arrival"], max(r["finish"] for r in others)
        cause = others[0]["client"]
    else:  # the host: from the hogs' start to their stop
        start, end, cause = marks["start"], marks["end"], None
    chat = [r for r in rs if r["client"] == "chat"]
    parts = {
        "before": [r["ttft"] for r in chat if r["arrival"] < start],
        "during": [r["ttft"] for r in chat if start <= r["arrival"] < end],
        "after": [r["ttft"] for r in chat if r["arrival"] >= end],
    }
    # the log's stamps are local wall-clock seconds of the same host: the disturbance's in that clock
    day = lambda ts: (ts % 86400)  # noqa: E731  (UTC host: the log is stamped in UTC)
    steps = decode_steps(run)
    speed = {}
    for name, (lo, hi) in {"before": (0, day(start)), "during": (day(start), day(end)), "after": (day(end), 1e9)}.items():
        for batch in (1, 2):
            xs = [ms for sec, n, ms in steps if n == batch and lo <= sec < hi]
            speed[f"{name}_batch{batch}_ms"] = round(median(xs), 3) if xs else None
    out |= {
        "disturbance": {
            "marks_s": {k: round(v - t0, 3) for k, v in marks.items()},
            "start_s": round(start - t0, 3),
            "end_s": round(end - t0, 3),
            "caused_by": cause,
            "affected": "chat",
        },
        "chat_ttft_p90_s": {k: (round(p90(v), 4) if v else None) for k, v in parts.items()},
        "chat_requests": {k: len(v) for k, v in parts.items()},
        "decode_step_median": speed,
    }
    return out


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(json.dumps(truth(Path(arg))))

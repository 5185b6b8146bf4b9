"""Write a Dynamo forward-pass metrics trace (dynamo.fpm.trace.v1, full mode) from a real vLLM run's iteration log,
by the trace's rules, so lltrace's reading of the trace can be checked against its reading of the log.

    python convert_iteration_log.py RUN_FOLDER OUT.jsonl.gz [OUT_LOG]

Per ``Iteration(k)`` line of RUN_FOLDER/server.log (vLLM 0.32 ``--enable-logging-iteration-details``), one record:
``scheduled_requests`` from the line's counts (context requests and tokens: the prefill requests and the prompt
tokens computed in the step, as dynamo.vllm.instrumented_scheduler counts them; generation requests: the decode
requests), ``wall_time`` the line's elapsed time, ``observed_at_unix_ms`` the step's end. The line is stamped to the
second, so the end is placed as lltrace places it (its engine_steps of the log, read here through lltrace); the
waiting queue after scheduling (``queued_requests``) from the run's OTLP request spans: the requests queued before
the step began and scheduled after it. Fields the log does not give (the variances, the KV-token sums) are left
out, as msgspec leaves a default; no idle heartbeats (the log does not mark the engine going idle). OUT_LOG, when
given, is server.log without its Iteration lines (the rest of the run's evidence, unchanged).
"""

from __future__ import annotations

import gzip
import json
import re
import sys
import tempfile
from pathlib import Path

import lltrace

ITERATION = re.compile(
    r"Iteration\((\d+)\): (\d+) context requests, (\d+) context tokens, (\d+) generation requests, "
    r"(\d+) generation tokens, iteration elapsed time: ([\d.]+) ms"
)


def main(folder: Path, out: Path, out_log: Path | None) -> None:
    log = (folder / "server.log").read_text()
    lines = {int(m.group(1)): m for m in ITERATION.finditer(log)}
    with tempfile.TemporaryDirectory() as tmp:
        run = lltrace.ingest([folder / "server.log", folder / "otlp"], store=tmp)
        placed = {
            r["step_id"]: r
            for r in run.sql(
                "SELECT step_id, start_s, end_s FROM engine_steps WHERE detection = 'vllm iteration log'"
            ).to_dicts()
        }
        requests = run.sql("SELECT queued_s, scheduled_s FROM requests WHERE queued_s IS NOT NULL").to_dicts()
    first = min(p["end_s"] for p in placed.values())
    with gzip.open(out, "wt") as f:
        for k in sorted(lines):
            m, p = lines[k], placed[k]
            start = p["start_s"]
            waiting = sum(1 for r in requests if r["queued_s"] <= start and (r["scheduled_s"] or 1e18) > start)
            record = {
                "timestamp": round((p["end_s"] - first) * 1e3),
                "event": {
                    "schema": "dynamo.fpm.trace.v1",
                    "source": {"namespace": "default", "component": "backend", "producer_id": "7587"},
                    "capture_mode": "full",
                    "observed_at_unix_ms": round(p["end_s"] * 1e3),
                    "fpm": {
                        "version": 1,
                        "worker_id": "7587",
                        "dp_rank": 0,
                        "counter_id": k,
                        "wall_time": float(m.group(6)) / 1e3,
                        "scheduled_requests": {
                            "num_prefill_requests": int(m.group(2)),
                            "sum_prefill_tokens": int(m.group(3)),
                            "num_decode_requests": int(m.group(4)),
                        },
                        "queued_requests": {"num_prefill_requests": waiting, "num_decode_requests": 0},
                    },
                },
            }
            f.write(json.dumps(record) + "\n")
    if out_log is not None:
        out_log.write_text("".join(ln for ln in log.splitlines(keepends=True) if not ITERATION.search(ln)))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]) if len(sys.argv) > 3 else None)

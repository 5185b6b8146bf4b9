"""SGLang scheduler log lines of every version in the sample, counted independently from the raw text."""

from __future__ import annotations

import re

from conftest import shared_file

import lltrace


def test_scheduler_log_versions(store):
    path = shared_file("serving", "log_excerpts", "sglang_scheduler_log_lines.txt")
    raw = path.read_text()
    prefill = [int(x) for x in re.findall(r"Prefill batch[.,] #new-seq: \d+, #new-token: (\d+)", raw)]
    decode = re.findall(r"Decode batch[.,] #running-req: \d+", raw)
    queues = [int(x) for x in re.findall(r"#queue-req: (\d+)", raw)]
    run = lltrace.ingest([path], store=store)
    steps = run.table("engine_steps")
    assert steps.height == len(prefill) and steps["prefill_tokens"].sum() == sum(prefill)
    assert set(steps["kind"]) == {"prefill"}
    stats = run.table("engine_stats")
    batch_stats = stats.filter(stats["waiting"].is_not_null())
    assert batch_stats.height == len(prefill) + len(decode)
    assert batch_stats["waiting"].max() == max(queues)
    assert stats["preemptions_total"].max() == 1  # one "Retract requests. #retracted_reqs: 1" line
    # "full token usage" (hybrid models) is read as the KV usage when "token usage" is absent
    assert stats.filter(stats["ts_s"] == 1783139484.0)["kv_usage"].to_list() == [0.14]
    req = run.table("requests").to_dicts()
    assert [(r["request_id"], r["input_tokens"], r["output_tokens"]) for r in req] == [
        ("23b2f003434b476aa6d3bf6706e710c0", 38, 484)
    ]
    assert "epoch" in run.metadata["sources"][0]["warnings"][0]

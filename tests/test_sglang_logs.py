"""SGLang scheduler log lines of every version in the sample, counted independently from the raw text."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest
from conftest import data_file

import lltrace
from lltrace.parsers._io import COLLECTOR_CLOCK


def test_scheduler_log_versions(store):
    path = data_file("serving", "log_excerpts", "sglang_scheduler_log_lines.txt")
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


def test_sglang_prefix_cache_hit_rate_and_an_unknown_running_limit(store):
    """The real excerpt: SGLang's own hit rate from #cached-token over cached + new tokens of its prefill batches;
    no start-up line, so the running limit is unknown and the slot part of queue says so."""
    path = data_file("serving", "log_excerpts", "sglang_scheduler_log_lines.txt")
    raw = path.read_text()
    batches = re.findall(r"Prefill batch[.,] #new-seq: \d+, #new-token: (\d+), #cached-token: (\d+)", raw)
    new, cached = sum(int(n) for n, _ in batches), sum(int(c) for _, c in batches)
    run = lltrace.ingest([path], store=store)
    cache = run.sql("SELECT hit_rate, hit_tokens, queried_tokens, hit_basis FROM engine_prefix_cache").row(0)
    assert cache == (cached / (cached + new), cached, cached + new, "sglang prefill batches")
    assert run.table("engine_config").height == 0
    state = run.sql("SELECT count(*), count(slots_full), count(budget_full) FROM engine_state").row(0)
    assert state[0] > 0 and state[1:] == (0, 0)  # load samples, but no limit to hold them against


def test_sglang_start_up_line_states_the_running_limit_and_the_kv_pool(store, tmp_path):
    """The scheduler's start-up line (its format in SGLang's scheduler.py since 2024) with real batch lines."""
    log = tmp_path / "sglang.log"
    log.write_text(
        "[2025-03-24 02:56:10 TP0] max_total_num_tokens=200000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=32, context_len=131072, available_gpu_mem=12.50 GB\n"
        "[2025-03-24 02:56:26 TP0] Prefill batch. #new-seq: 30, #new-token: 3810, #cached-token: 60, token usage: "
        "0.00, #running-req: 2, #queue-req: 68, \n"
        "[2025-03-24 02:56:41 TP0] Decode batch. #running-req: 32, #token: 7352, token usage: 0.01, accept len: 2.54, "
        "gen throughput (token/s): 39.33, largest-len: 0, #queue-req: 68, \n"
        "[2025-03-24 02:56:43 TP0] Prefill batch. #new-seq: 2, #new-token: 253, #cached-token: 5, token usage: 0.01, "
        "#running-req: 30, #queue-req: 66, \n"
    )
    run = lltrace.ingest([log], store=store)
    config = {r["setting"]: (r["value"], r["basis"], r["origin"]) for r in run.table("engine_config").to_dicts()}
    assert config["max_num_seqs"] == (32, "stated", "SGLang scheduler start-up line (max_running_requests)")
    assert config["kv_cache_tokens"] == (200000, "stated", "SGLang scheduler start-up line (max_total_num_tokens)")
    causes = run.sql("SELECT cause FROM engine_state ORDER BY start_s")["cause"].to_list()
    assert causes == [None, "slot", None]  # 32 running at the 02:56:41 sample


def test_a_gap_in_the_record_is_not_one_long_state(store):
    """The excerpt's lines come from servers months apart. Each engine (its data-parallel and pipeline ranks: "DP1",
    "PP0"; the tensor, expert and context-parallel ranks of " TP0", " TP0 EP0" run one engine's batches, and a
    header without ranks is one engine) is its own timeline; a sample holds until the next one of its timeline, but
    never past Prometheus's staleness (5 min), so the waiting requests' time is the raw lines' queue counts times
    their spacing capped at 300 s (the months between are a hole, not 68 requests waiting all along). Lines of one
    second (the log's resolution) are one sample, their mean: their order within it is not kept."""
    from collections import defaultdict
    from datetime import datetime, timezone
    from statistics import mean

    path = data_file("serving", "log_excerpts", "sglang_scheduler_log_lines.txt")
    line = r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)([^\]]*)\] (?:Prefill|Decode) batch.*#queue-req: (\d+)"
    lines: dict[str, dict[float, list[int]]] = defaultdict(lambda: defaultdict(list))
    for ts, rank, q in re.findall(line, path.read_text(), re.M):
        t = datetime.strptime(ts, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
        lines[" ".join(r for r in rank.split() if r.startswith(("DP", "PP"))) or "0"][t].append(int(q))
    want = 0.0
    for per_second in lines.values():
        times = sorted(per_second)
        want += sum(mean(per_second[a]) * min(b - a, 300.0) for a, b in zip(times, times[1:], strict=False))
    run = lltrace.ingest([path], store=store)
    got, timelines = run.sql("SELECT waiting_request_s, replicas FROM engine_queue_causes").row(0)
    assert timelines == len(lines) == 1 and got == pytest.approx(want, rel=1e-9)


def test_a_log_collectors_stamps_give_the_zone_and_the_fraction(tmp_path):
    """The real excerpt kept by ``kubectl logs --timestamps`` in a zone two hours east of UTC: each batch line at
    its collector's stamp (SGLang's own stamp read in that zone, plus the fraction), not at its own read as UTC."""
    path = data_file("serving", "log_excerpts", "sglang_scheduler_log_lines.txt")
    lines, moments = [], {}
    for line in path.read_text().splitlines():
        m = re.match(r"\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)", line)
        when = datetime(*(int(g) for g in m.groups()), tzinfo=timezone.utc) if m else datetime(2025, 1, 1)
        ms = int(when.timestamp()) * 7 % 1000  # (lines of one second were printed within it: one fraction each)
        lines.append(f"{when:%Y-%m-%dT%H:%M:%S}.{ms:03d}250+02:00 {line}")
        if m:
            moments[when.timestamp()] = when.timestamp() - 7200 + ms / 1e3 + 250e-6
    log = tmp_path / "pod.log"
    log.write_text("\n".join(lines) + "\n")
    own = lltrace.ingest([path], store=tmp_path / "own")
    kept = lltrace.ingest([log], store=tmp_path / "kept")
    q = "SELECT ts_s, running, waiting, kv_usage FROM engine_stats WHERE ts_s IS NOT NULL ORDER BY ts_s, running"
    want = sorted(((moments[t], r, w, kv) for t, r, w, kv in own.sql(q).rows()), key=str)
    got = sorted(kept.sql(q).rows(), key=str)
    assert len(got) == len(want) >= 30
    assert [g[1:] for g in got] == [w[1:] for w in want]
    assert max(abs(g[0] - w[0]) for g, w in zip(got, want, strict=True)) < 1e-6
    assert kept.metadata["sources"][0]["clock"]["origin"] == COLLECTOR_CLOCK


def test_an_exception_and_failed_responses_are_said(tmp_path):
    """SGLang's records carry no level: an exception is its traceback (the message before it, the error it ends
    with), counted once; uvicorn's failed responses are counted by status, as in vLLM's log."""
    path = tmp_path / "server.log"
    path.write_text(
        "[2026-03-01 10:00:00 TP0] Decode batch, #running-req: 3, #token: 900, token usage: 0.10, #queue-req: 0\n"
        '[2026-03-01 10:00:01] INFO:     127.0.0.1:5000 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error\n'
        "[2026-03-01 10:00:02 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl/scheduler.py", line 10, in run_event_loop\n'
        "    self.run_batch(batch)\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        "[2026-03-01 10:00:02] Received sigquit from a child process. It usually means the child failed.\n"
    )
    with pytest.warns(UserWarning) as said:
        run = lltrace.ingest([path], store=tmp_path / "s")
    (src,) = run.metadata["sources"]
    first = src["errors"]["first"][0]
    assert src["errors"]["records"] == 1 and first["line"] == 3
    assert first["message"] == (
        "Scheduler hit an exception: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    )
    assert src["http"]["failed"] == [{"method": "POST", "path": "/v1/completions", "status": 500, "responses": 1}]
    assert sum("ERROR record" in str(w.message) or "HTTP error" in str(w.message) for w in said) == 2


def test_ranks_of_one_engine_are_read_once_and_data_parallel_engines_apart(tmp_path):
    """SGLang logs from each attention TP group's first rank: every context-parallel rank prints the same batch and
    retraction (read once), while data-parallel ranks are engines of their own, each with its own retraction count."""
    lines = []
    for cp in (1, 0):
        lines.append(
            f"[2026-03-01 10:00:00 DP0 ATTN_CP{cp} TP{cp}] Retract requests. #retracted_reqs: 2, #new_token_ratio: 0.5"
        )
        lines.append(
            f"[2026-03-01 10:00:00 DP0 ATTN_CP{cp} TP{cp}] Prefill batch, #new-seq: 1, #new-token: 64, "
            "#cached-token: 0, token usage: 0.50, #running-req: 3, #queue-req: 1"
        )
    lines.append("[2026-03-01 10:00:01 DP1 ATTN_CP0 TP2] Retract requests. #retracted_reqs: 5, #new_token_ratio: 0.5")
    lines.append("[2026-03-01 10:00:02 DP0 ATTN_CP0 TP0] Retract requests. #retracted_reqs: 1, #new_token_ratio: 0.5")
    path = tmp_path / "server.log"
    path.write_text("\n".join(lines) + "\n")
    run = lltrace.ingest([path], store=tmp_path / "s")
    assert run.sql("SELECT engine, prefill_tokens FROM engine_steps").rows() == [("DP0", 64)]
    got = run.sql(
        "SELECT engine, preemptions_total FROM engine_stats WHERE preemptions_total IS NOT NULL ORDER BY ts_s"
    ).rows()
    assert got == [("DP0", 2.0), ("DP1", 5.0), ("DP0", 3.0)]
    (src,) = run.metadata["sources"]
    assert src["log_lines"]["rank_copies"] == 2 and src["log_lines"]["retracted"] == 8

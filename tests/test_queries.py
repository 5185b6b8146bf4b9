"""Each view of queries/*.sql on tiny exact inputs (inline rows in an in-memory DuckDB)."""

from __future__ import annotations

import duckdb
import pytest
from conftest import canonical_tables

from lltrace.queries import install_views


def tiny(*statements: str) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with every canonical table (empty, as the store's views have them), the rows these
    statements insert, and every view installed over them."""
    c = duckdb.connect()
    canonical_tables(c)
    for sql in statements:
        c.execute(sql)
    install_views(c)
    return c


def by_first(c: duckdb.DuckDBPyConnection, sql: str) -> dict:
    """A query's rows keyed by their first column."""
    return {r[0]: r[1:] for r in c.execute(sql).fetchall()}


KERNELS = """
INSERT INTO kernels (run_id, part, device, ts_ns, dur_ns, kernel_class, attention_variant) VALUES
    -- run a: two overlapping gemm kernels on two streams, one attention, one zero-length, one sync
    ('a', 0, 0, 1000, 500, 'gemm', NULL),
    ('a', 0, 0, 1200, 600, 'gemm', NULL),
    ('a', 0, 0, 3000, 1000, 'attention', 'decode'),
    ('a', 0, 0, 5000, 0, 'elementwise', NULL),
    ('a', 0, 0, 6000, 9999, 'sync', NULL),
    -- run b: one kernel
    ('b', 0, 1, 0, 100, 'attention', NULL)
"""

CPU = """
INSERT INTO ops (run_id, part, ts_ns, dur_ns) VALUES ('a', 0, 0, 20000)  -- run a traced 20 µs; run b GPU work only
"""

STEPS = """
INSERT INTO engine_steps (run_id, source, kind, wall_s, gpu_busy_s, prefill_tokens, decode_tokens, cuda_graph) VALUES
    ('a', 'profiler', 'prefill', 0.010, 0.008, 100, 0, false),
    ('a', 'profiler', 'decode', 0.002, 0.001, 0, 4, true),
    ('a', 'profiler', 'decode', 0.004, 0.002, 0, 4, true),
    ('a', 'profiler', 'mixed', 0.006, 0.004, 50, 2, false),
    ('b', 'profiler', NULL, 0.001, NULL, NULL, NULL, NULL),
    ('b', 'profiler', 'decode', 0.003, NULL, 0, 1, false)
"""


@pytest.fixture
def con():
    return tiny(KERNELS, CPU, STEPS)


def test_kernel_time(con):
    rows = con.execute("SELECT * FROM profiler_kernel_time ORDER BY run_id, kernel_class").fetchall()
    # run a: non-sync total = 500 + 600 + 1000 + 0 = 2100 ns
    assert rows == [
        ("a", "attention", 1, 1000e-9, pytest.approx(1000 / 2100)),
        ("a", "elementwise", 1, 0.0, 0.0),
        ("a", "gemm", 2, 1100e-9, pytest.approx(1100 / 2100)),
        ("a", "sync", 1, 9999e-9, None),
        ("b", "attention", 1, 100e-9, 1.0),
    ]


def test_gpu_busy_counts_overlap_once_and_ignores_sync(con):
    rows = con.execute("SELECT * FROM profiler_gpu_busy ORDER BY run_id").fetchall()
    # run a: [1000,1800) ∪ [3000,4000) ∪ [5000,5000) = 1800 ns busy over a 4000 ns span, of 20000 ns traced
    a = ("a", 0, 0, 1800e-9, 4000e-9, 0.45, 20000e-9, 0.09)
    assert rows[0] == tuple(pytest.approx(x) if isinstance(x, float) else x for x in a)
    b = ("b", 0, 1, 100e-9, 100e-9, 1.0, 100e-9, 1.0)  # traced window = its one kernel
    assert rows[1] == tuple(pytest.approx(x) if isinstance(x, float) else x for x in b)


def test_empty_input_gives_no_rows():
    c = tiny()  # the tables, no rows
    assert c.execute("SELECT count(*) FROM profiler_gpu_busy").fetchone() == (0,)
    assert c.execute("SELECT count(*) FROM profiler_kernel_time").fetchone() == (0,)


def test_steps_by_kind(con):
    rows = con.execute(
        "SELECT kind, steps, wall_s_total, wall_s_p50, gpu_busy_s, prefill_tokens, decode_tokens, cuda_graph_steps "
        "FROM profiler_steps_by_kind WHERE run_id = 'a' ORDER BY kind"
    ).fetchall()
    assert rows == [
        ("decode", 2, pytest.approx(0.006), pytest.approx(0.003), pytest.approx(0.003), 0, 8, 2),
        ("mixed", 1, pytest.approx(0.006), pytest.approx(0.006), pytest.approx(0.004), 50, 2, 0),
        ("prefill", 1, pytest.approx(0.010), pytest.approx(0.010), pytest.approx(0.008), 100, 0, 0),
    ]
    b = con.execute(
        "SELECT kind, steps, gpu_busy_s, cuda_graph_steps FROM profiler_steps_by_kind WHERE run_id = 'b' ORDER BY kind"
    )
    # a step with no GPU data says nothing about CUDA graphs: NULL, not 0
    assert b.fetchall() == [("decode", 1, None, 0), (None, 1, None, None)]


def test_phase_share_uses_gpu_time_when_there_is_some_else_wall_time(con):
    a = con.execute("SELECT * EXCLUDE (source) FROM profiler_phase_share WHERE run_id = 'a'").fetchone()
    assert a == (
        "a",
        "gpu_busy",
        pytest.approx(0.015),
        pytest.approx(0.008 / 0.015),
        pytest.approx(0.003 / 0.015),
        pytest.approx(0.004 / 0.015),
        0.0,
    )
    b = con.execute("SELECT * EXCLUDE (source) FROM profiler_phase_share WHERE run_id = 'b'").fetchone()
    assert b == ("b", "wall", pytest.approx(0.004), 0.0, pytest.approx(0.75), 0.0, pytest.approx(0.25))


def test_attention_variant(con):
    rows = con.execute("SELECT * FROM profiler_attention_variant ORDER BY run_id").fetchall()
    assert rows == [("a", "decode", 1, 1000e-9), ("b", None, 1, 100e-9)]


REQUESTS = """
INSERT INTO requests (run_id, request_id, status, ttft_s, server_ttft_s, e2e_s, server_e2e_s, output_tokens, queue_s)
VALUES
    ('r', 'a', 'ok', 0.1, 0.09, 1.1, 1.0, 11, 0.01),      -- client figures win: tpot = (1.1 - 0.1) / 10
    ('r', 'b', 'finished', NULL, 0.2, NULL, 0.5, 4, 0.02), -- server only: tpot = (0.5 - 0.2) / 3
    ('r', 'c', 'ok', 0.3, NULL, 0.3, NULL, 1, NULL),        -- one output token: no tpot; no engine data
    ('r', 'd', 'error', NULL, NULL, NULL, NULL, NULL, NULL) -- failed: counted, not in the latencies
"""


def test_requests_latency_and_summary():
    c = tiny(REQUESTS)
    lat = c.execute(
        "SELECT request_id, basis, ttft_basis, e2e_basis, ttft_s, e2e_s, tpot_s, queue_s, failed "
        "FROM requests_latency ORDER BY 1"
    )
    assert lat.fetchall() == [
        ("a", "client", "client", "client", 0.1, 1.1, pytest.approx(0.1), 0.01, False),
        ("b", "server", "server", "server", 0.2, 0.5, pytest.approx(0.1), 0.02, False),
        ("c", "client", "client", "client", 0.3, 0.3, None, None, False),
        ("d", None, None, None, None, None, None, None, True),  # failed: kept, flagged
    ]
    s = c.execute("SELECT requests, errors, basis, ttft_p50, tpot_mean, e2e_p50, queue_p50 FROM requests_summary")
    assert s.fetchone() == (
        4,
        1,
        "mixed",
        pytest.approx(0.2),
        pytest.approx(0.1),
        pytest.approx(0.5),
        pytest.approx(0.015),
    )


ATTRIB_REQUESTS = """
INSERT INTO requests (run_id, request_id, client_id, arrival_s, status, input_tokens, output_tokens, num_preemptions,
    e2e_s, server_e2e_s, ttft_s, queue_s, queue_s_est, prefill_s, prefill_s_est, decode_s, queued_s, scheduled_s)
VALUES
 -- measured by the engine, client e2e as reference: overhead = 2.0 - (0.5 + 0.25 + 1.0) = 0.25
 ('r', 'a', 'c', 0.0, 'ok', 100, 11, NULL, 2.0, 1.9, 0.8, 0.5, NULL, 0.25, NULL, 1.0, 10.0, 10.5),
 -- a preempted request: its preemption stays inside decode (preempted_s 0), count kept
 ('r', 'b', 'c', 1.0, 'ok', 200, 21, 2, 3.0, NULL, NULL, 1.0, NULL, 0.5, NULL, 1.5, 11.0, 12.0),
 -- client only: queue/prefill estimated, decode derived from the client's e2e - ttft
 ('r', 'c', 'c', 2.0, 'ok', 300, 1, NULL, 1.0, NULL, 0.6, NULL, 0.5, NULL, 0.1, NULL, NULL, NULL),
 -- zero output tokens still attributed (decode 0)
 ('r', 'd', 'c', 3.0, 'ok', 50, 0, NULL, 0.3, NULL, NULL, 0.1, NULL, 0.2, NULL, 0.0, NULL, NULL),
 -- clocks misaligned: components exceed e2e by more than max(1 ms, 1 %)
 ('r', 'e', 'c', 4.0, 'ok', 10, 2, NULL, 1.0, NULL, NULL, 0.5, NULL, 0.3, NULL, 0.3, NULL, NULL),
 -- still running at the end of the trace: no e2e, so not attributed (counted as incomplete)
 ('r', 'f', 'c', 5.0, 'running', 10, NULL, NULL, NULL, NULL, NULL, 0.2, NULL, NULL, NULL, NULL, NULL, NULL),
 -- failed: left out
 ('r', 'g', 'c', 6.0, 'error', 10, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
"""
ATTRIB_STATS = """
INSERT INTO engine_stats (run_id, ts_s, waiting_capacity) VALUES
    ('r', 9.0, 0), ('r', 10.2, 3), ('r', 10.4, 0), ('r', 11.5, 5), ('r', 20.0, 0),
    ('r', NULL, 7);  -- a sample without a time is ignored
"""


def test_attribution_request_edge_rows():
    c = tiny(ATTRIB_REQUESTS, ATTRIB_STATS)
    rows = by_first(
        c,
        "SELECT request_id, e2e_basis, queue_basis, prefill_basis, decode_basis, decode_s, preempted_s, "
        "overhead_s, num_preemptions, clock_error FROM attribution_request",
    )
    assert set(rows) == {"a", "b", "c", "d", "e", "f"}  # the failed request is left out
    assert rows["a"] == ("client", "measured", "measured", "measured", 1.0, 0.0, pytest.approx(0.25), None, False)
    assert rows["b"][5:] == (0.0, pytest.approx(0.0), 2, False)
    assert rows["c"][:4] == ("client", "estimated", "estimated", "derived")
    assert rows["c"][4] == pytest.approx(0.4) and rows["c"][6] == pytest.approx(0.0)
    assert rows["d"][4] == 0.0
    assert rows["e"][6] == pytest.approx(-0.1) and rows["e"][8] is True  # reported, not clipped
    assert rows["f"][0] is None and rows["f"][6] is None
    run = c.execute("SELECT requests, requests_incomplete, clock_errors, queue_basis FROM attribution_run").fetchone()
    assert run == (5, 1, 1, "mixed")
    shares = c.execute(
        "SELECT queue_share + prefill_share + decode_share + preempted_share + overhead_share FROM attribution_run"
    ).fetchone()[0]
    assert shares == pytest.approx(1.0)


LIMITS = """
INSERT INTO engine_config (run_id, engine, setting, value, basis, origin) VALUES
    ('r', 'vllm', 'max_num_seqs', 4, 'stated', 'log'), ('r', 'vllm', 'max_num_batched_tokens', 100, 'stated', 'log'),
    ('r', 'vllm', 'kv_cache_tokens', 1000, 'stated', 'log'), ('r', 'vllm', 'block_size', 10, 'stated', 'log'),
    ('r', 'vllm', 'chunked_prefill', 1, 'stated', 'log'),
    -- run u: a limit inferred from its own steps is never used (it cannot tell whether it bound)
    ('u', 'vllm', 'max_num_batched_tokens', 64, 'inferred', 'steps')
"""

# run r's iteration log: (start, scheduled requests, scheduled tokens, KV usage) -> what it was out of
STATE_STEPS = """
INSERT INTO engine_steps (run_id, source, detection, step_id, start_s, end_s, prefill_reqs, prefill_tokens,
                          decode_reqs, decode_tokens, kv_usage) VALUES
    ('r', 'log', 'vllm iteration log', 0, 0.0, 0.1, 1, 50, 1, 1, 0.1),   -- 2 of 4 slots, 51 of 100 tokens: none
    ('r', 'log', 'vllm iteration log', 1, 1.0, 1.1, 0, 0, 4, 4, 0.2),    -- every slot taken, KV room: slot
    ('r', 'log', 'vllm iteration log', 2, 2.0, 2.1, 1, 99, 1, 1, 0.2),   -- the whole budget, slots free: budget
    ('r', 'log', 'vllm iteration log', 3, 3.0, 3.1, 1, 97, 3, 3, 0.99),  -- 10 tokens free < a 100-token chunk: kv
    ('r', 'log', 'vllm iteration log', 4, 4.0, 4.1, 1, 96, 3, 4, 0.2),   -- slots and budget full: slot first
    ('r', 'log', 'vllm iteration log', 5, 5.0, 6.0, 0, 0, 1, 1, 0.1),    -- the last step ends at its own end
    -- run u: no limits known, no KV size: usage alone (never near full here) tells KV room
    ('u', 'log', 'vllm iteration log', 0, 0.0, 0.5, 1, 64, 0, 0, 0.5),
    ('u', 'log', 'vllm iteration log', 1, 0.5, 1.0, 0, 0, 1, 1, 0.5)
"""

STATE_REQUESTS = """
INSERT INTO requests (run_id, request_id, status, input_tokens, queued_s, scheduled_s) VALUES
    ('r', 'q1', 'ok', 200, 0.5, 5.5),  -- waits through every segment
    ('r', 'q2', 'ok', 30, 2.5, 2.5),   -- no queue at all
    ('r', 'q3', 'ok', 40, 6.5, 7.0),   -- queued after the log ends: no engine state, all load
    ('r', 'q4', 'ok', 40, 1.0, NULL),  -- never scheduled: no queue interval
    ('u', 'v1', 'ok', 64, 0.2, 0.9)
"""


def test_engine_state_is_a_step_function_of_what_the_engine_was_out_of():
    c = tiny(LIMITS, STATE_STEPS, STATE_REQUESTS)
    got = c.execute(
        "SELECT start_s, end_s, kv_free_tokens, head_need_tokens, kv_out, slots_full, budget_full, cause "
        "FROM engine_state WHERE run_id = 'r' ORDER BY start_s"
    ).fetchall()
    assert [(g[0], g[1]) for g in got] == [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0), (3.0, 4.0), (4.0, 5.0), (5.0, 6.0)]
    assert [g[7] for g in got] == [None, "slot", "budget", "kv", "slot", None]
    # the head of the queue is the next request scheduled: q2 (30 tokens, 49 left in the budget: 3 blocks) at 0.0,
    # then q1 (200 tokens, chunked to what the step leaves, the whole budget when the step used it all)
    assert got[0][2:4] == (pytest.approx(900.0), 30.0)
    assert got[3][2:4] == (pytest.approx(10.0), 100.0) and got[3][4:7] == (True, True, True)
    assert got[4][4:7] == (False, True, True)
    unknown = c.execute("SELECT kv_out, slots_full, budget_full, cause FROM engine_state WHERE run_id = 'u'").fetchall()
    assert unknown == [(False, None, None, None), (False, None, None, None)]


def test_queue_split_is_exact_and_never_exceeds_the_queue():
    c = tiny(LIMITS, STATE_STEPS, STATE_REQUESTS)
    got = by_first(
        c,
        "SELECT request_id, queue_s, kv_wait_s, slot_wait_s, budget_wait_s, load_wait_s FROM attribution_queue_causes",
    )
    assert set(got) == {"q1", "q2", "q3", "v1"}  # q4 has no queue interval
    # q1 queued 0.5-5.5: [0.5, 1) none, [1, 2) slot, [2, 3) budget, [3, 4) kv, [4, 5) slot, [5, 5.5) none
    assert got["q1"] == pytest.approx((5.0, 1.0, 2.0, 1.0, 1.0))
    assert got["q2"] == (0.0, 0.0, 0.0, 0.0, 0.0)
    assert got["q3"] == pytest.approx((0.5, 0.0, 0.0, 0.0, 0.5))
    # run u: KV room known (usage), slots and budget not: NULL parts, the rest load
    assert got["v1"][1:] == (0.0, None, None, pytest.approx(0.7))
    for queue, *parts in got.values():
        assert sum(p or 0 for p in parts) == pytest.approx(queue)
        assert all(p is None or 0 <= p <= queue + 1e-12 for p in parts)


def test_queue_split_on_a_timeline_of_samples():
    """Without an iteration log: scrapes and stats lines, running against max_num_seqs, swapped requests and
    preemptions counted since the previous scrape (V0, SGLang, TensorRT-LLM, a plain metrics scrape)."""
    c = tiny(
        "INSERT INTO engine_config (run_id, engine, setting, value, basis, origin) "
        "VALUES ('s', 'vllm', 'max_num_seqs', 2, 'stated', 'log')",
        "INSERT INTO engine_stats (run_id, source, ts_s, running, kv_usage, swapped, preemptions_total) VALUES "
        "('s', 'm', 0.0, 2, 0.3, 0, 0), ('s', 'm', 1.0, 1, 0.3, 1, 0), ('s', 'm', 2.0, 1, 0.3, 0, 0), "
        "('s', 'm', 3.0, 1, 0.3, 0, 3), ('s', 'm', 4.0, 1, 0.3, 0, 3)",
        "INSERT INTO requests (run_id, request_id, status, queued_s, scheduled_s) VALUES ('s', 'a', 'ok', 0.5, 3.5)",
    )
    causes = [r[0] for r in c.execute("SELECT cause FROM engine_state ORDER BY start_s").fetchall()]
    # [0,1) slots full; [1,2) one swapped out; [2,3) preempted before the 3.0 scrape; [3,4) none; last open
    assert causes == ["slot", "kv", "kv", None, None]
    row = c.execute(
        "SELECT kv_wait_s, slot_wait_s, budget_wait_s, load_wait_s FROM attribution_queue_causes"
    ).fetchone()
    assert row == (pytest.approx(2.0), pytest.approx(0.5), None, pytest.approx(0.5))


def test_kv_usage_near_full_is_kv_out_where_the_cache_size_is_unknown():
    c = tiny(
        "INSERT INTO engine_stats (run_id, source, ts_s, kv_usage) VALUES ('k', 'm', 0.0, 0.97), ('k', 'm', 1.0, 0.5), "
        "('k', 'm', 2.0, 0.5)",
        "INSERT INTO requests (run_id, request_id, status, queued_s, scheduled_s) VALUES ('k', 'a', 'ok', 0.2, 1.7)",
    )
    row = c.execute("SELECT kv_wait_s, slot_wait_s, load_wait_s FROM attribution_queue_causes").fetchone()
    assert row == (pytest.approx(0.8), None, pytest.approx(0.7))


def test_prefix_cache_hit_rate_and_cached_share():
    c = tiny(
        # two scrapes of one source: the counters' change between them; a second source counting fewer is not added
        "INSERT INTO engine_stats (run_id, source, engine, ts_s, prefix_cache_hits_total, prefix_cache_queries_total, "
        "prompt_tokens_total) VALUES ('p', 'prom', '0', 1.0, 100, 400, 400), ('p', 'prom', '0', 9.0, 700, 1400, 1400), "
        "('p', 'log', '0', 5.0, 10, 20, NULL)",
        "INSERT INTO engine_steps (run_id, source, detection, step_id, prefill_tokens) VALUES "
        "('p', 'log', 'vllm iteration log', 0, 300), ('p', 'log', 'vllm iteration log', 1, 250), "
        # a log that does not start at iteration 0 cannot be set against the prompt counter
        "('q', 'log', 'vllm iteration log', 5, 300)",
        "INSERT INTO engine_stats (run_id, source, ts_s, prompt_tokens_total) VALUES ('q', 'prom', 1.0, 1000)",
        # SGLang: cached and new tokens per prefill batch
        "INSERT INTO engine_steps (run_id, source, detection, prefill_tokens, cached_tokens) VALUES "
        "('g', 'log', 'sglang prefill batch log', 300, 100), ('g', 'log', 'sglang prefill batch log', 100, 100)",
        "INSERT INTO requests (run_id, request_id, status, input_tokens, cached_tokens) VALUES "
        "('g', 'a', 'ok', 400, 100), ('g', 'b', 'ok', 200, 100)",
    )
    got = {r[0]: r[1:] for r in c.execute("SELECT * FROM engine_prefix_cache").fetchall()}
    assert got["p"][:4] == (pytest.approx(0.6), 600, 1000, "engine counters")
    assert got["p"][4:] == (pytest.approx(1 - 550 / 1400), "iteration log context tokens vs the prompt-token counter")
    # SGLang: 200 cached of 200 + 400 new tokens looked up; the requests' own figures: 200 of 600 prompt tokens
    assert got["g"] == (
        pytest.approx(1 / 3),
        200,
        600,
        "sglang prefill batches",
        pytest.approx(1 / 3),
        "requests cached_tokens",
    )
    assert "q" not in got


def test_speculative_counts_gain_and_sglang_readings():
    c = tiny(
        # two scrapes of the counters: their change; the log's lines count fewer and are not added; the iteration
        # log's decoding requests from step 0 (3 + 5) against the accepted tokens since the server started (12)
        "INSERT INTO engine_stats (run_id, source, engine, ts_s, spec_drafts_total, spec_draft_tokens_total, "
        "spec_accepted_tokens_total) VALUES ('v', 'prometheus', '0', 1.0, 2, 6, 4), "
        "('v', 'prometheus', '0', 9.0, 6, 18, 12), ('v', 'log', '0', 5.0, NULL, 9, 5)",
        "INSERT INTO engine_steps (run_id, source, detection, step_id, decode_reqs) VALUES "
        "('v', 'log', 'vllm iteration log', 0, 3), ('v', 'log', 'vllm iteration log', 1, 5)",
        "INSERT INTO engine_config (run_id, engine, setting, value, basis, origin) VALUES "
        "('v', 'vllm', 'speculative_tokens', 3, 'stated', 'log'), "
        "('o', 'vllm', 'speculative_tokens', 0, 'stated', 'log')",
        # SGLang: accept length readings (0: an interval that verified nothing)
        "INSERT INTO engine_stats (run_id, source, ts_s, spec_accept_length) VALUES ('s', 'log', 1.0, 2.0), "
        "('s', 'log', 2.0, 3.0), ('s', 'log', 3.0, 0.0)",
    )
    got = by_first(c, "SELECT * FROM engine_speculative")
    assert got["v"] == (3, 4, 12, 8, pytest.approx(8 / 12), pytest.approx(1 + 8 / 4), 8, 1 + 12 / 8, "engine counters")
    assert got["s"] == (
        None,
        None,
        None,
        None,
        None,
        2.5,
        None,
        None,
        "the mean of SGLang's 2 accept-length readings (decode batch lines)",
    )
    assert "o" not in got  # off, and nothing drafted


CACHED_LOG = """
INSERT INTO engine_config (run_id, engine, setting, value, basis, origin) VALUES ('c', 'vllm', 'block_size', 16,
    'stated', 'log');
INSERT INTO engine_steps (run_id, source, detection, step_id, prefill_reqs, prefill_tokens) VALUES
    ('c', 'log', 'vllm iteration log', 0, 1, 100),  -- first request: all 100 computed, nothing cached
    ('c', 'log', 'vllm iteration log', 1, 0, 0),
    ('c', 'log', 'vllm iteration log', 2, 1, 4),    -- second: 68 - 64 cached (4 blocks) = 4 computed
    ('c', 'log', 'vllm iteration log', 3, 2, 40);   -- third and fourth together: 36 + 36 - 40 = 32 cached
"""


def _with_pair(x_tokens: int, y_tokens: int) -> duckdb.DuckDBPyConnection:
    """CACHED_LOG's four requests in the order scheduled, the last two with these prompt lengths."""
    return tiny(
        CACHED_LOG,
        "INSERT INTO requests (run_id, request_id, status, input_tokens, queued_s, scheduled_s) VALUES "
        f"('c', 'a', 'ok', 100, 0.0, 0.1), ('c', 'b', 'ok', 68, 0.1, 0.3), ('c', 'x', 'ok', {x_tokens}, 0.2, 0.5), "
        f"('c', 'y', 'ok', {y_tokens}, 0.2, 0.6)",
    )


def test_cached_tokens_per_request_derived_from_the_iteration_log():
    c = _with_pair(36, 36)
    got = dict(c.execute("SELECT request_id, cached_tokens FROM requests_cached_tokens").fetchall())
    # x and y: 36 + 36 - 40 = 32 cached tokens in 16-token blocks, each at most 35: 0/32, 16/16 and 32/0 all fit,
    # so the split is not unique and both stay NULL
    assert got == {"a": 0, "b": 64}
    basis = c.execute("SELECT DISTINCT cached_basis FROM requests_latency WHERE cached_tokens IS NOT NULL").fetchall()
    assert basis == [("derived",)]


def test_a_pair_of_prompts_split_into_whole_blocks_when_only_one_split_fits():
    # x + y = 56 prompt tokens, 40 computed: 16 cached; y (16 tokens) can hold none (at most 15), so x has 16
    got = dict(_with_pair(40, 16).execute("SELECT request_id, cached_tokens FROM requests_cached_tokens").fetchall())
    assert got == {"a": 0, "b": 64, "x": 16, "y": 0}


def test_cached_tokens_are_not_derived_where_the_pairing_is_not_provable():
    base = "INSERT INTO requests (run_id, request_id, status, input_tokens, queued_s, scheduled_s) VALUES "
    cases = {
        # a request more than the log's context requests: a prompt spread over steps, or a request missing
        "counts differ": base + "('c', 'a', 'ok', 100, 0, 0.1), ('c', 'b', 'ok', 68, 0, 0.3), "
        "('c', 'x', 'ok', 40, 0, 0.5), ('c', 'y', 'ok', 16, 0, 0.6), ('c', 'z', 'ok', 9, 0, 0.7)",
        # b's 68 - 4 = 64 is whole blocks; 70 - 4 = 66 is not: the pairing is wrong
        "not whole blocks": base + "('c', 'a', 'ok', 100, 0, 0.1), ('c', 'b', 'ok', 70, 0, 0.3), "
        "('c', 'x', 'ok', 40, 0, 0.5), ('c', 'y', 'ok', 16, 0, 0.6)",
        # a preempted request is computed again: the log counts it twice
        "preempted": base.replace("scheduled_s)", "scheduled_s, num_preemptions)")
        + "('c', 'a', 'ok', 100, 0, 0.1, 1), ('c', 'b', 'ok', 68, 0, 0.3, 0), ('c', 'x', 'ok', 40, 0, 0.5, 0), "
        "('c', 'y', 'ok', 16, 0, 0.6, 0)",
    }
    for why, rows in cases.items():
        c = tiny(CACHED_LOG, rows)
        assert c.execute("SELECT count(*) FROM requests_cached_tokens").fetchone() == (0,), why


def test_attribution_on_an_empty_run():
    c = tiny()
    assert c.execute("SELECT count(*) FROM attribution_run").fetchone() == (0,)
    for view in ("engine_state", "attribution_queue_causes", "engine_prefix_cache", "requests_cached_tokens"):
        assert c.execute(f"SELECT count(*) FROM {view}").fetchone() == (0,), view


def test_workload_mix_prefix_reuse_and_concurrency():
    c = tiny("""
        INSERT INTO requests (run_id, arrival_s, arrival_ns, input_tokens, output_tokens, prefix_block_ids, e2e_s,
                              server_e2e_s)
        VALUES
            ('m', 0.0, 0, 1024, 10, [1, 2], 2.0, NULL),
            ('m', 1.0, 1000000000, 1536, 20, [1, 2, 3], 1.0, NULL),   -- reuses blocks 1 and 2
            ('m', 2.0, 2000000000, 512, 30, [4], NULL, 1.0),          -- server e2e only
            ('m', 3.0, 3000000000, NULL, NULL, NULL, NULL, NULL)       -- no sizes: an arrival, out of the sizes
    """)
    row = c.execute(
        "SELECT requests, sized, input_p50, output_mean, span_s, rate_per_s, window_s, throughput_per_s, "
        "prefix_blocks, prefix_blocks_reused, prefix_reuse, mean_concurrency FROM workload_mix"
    ).fetchone()
    # four arrivals give no rate; the run window is first arrival (0) to last finish (3, both the unsized arrival
    # and 2 + 1)
    assert row == (4, 3, 1024.0, 20.0, 3.0, None, 3.0, 1.0, 6, 2, pytest.approx(1 / 3), pytest.approx(4 / 3))


@pytest.mark.parametrize(("span_s", "rate"), [(100.0, None), (200.0, 11 / 200.0)])
def test_workload_mix_rate_only_where_the_stamps_resolution_cannot_move_it(span_s: float, rate: float | None):
    """Arrivals stamped to the second (a vLLM log's request lines) over a span of 100 s could be 99 to 101 s apart:
    a rate 1 % uncertain is not given; over 200 s (0.5 %: the third figure it is printed to) it is."""
    rows = ", ".join(f"('m', {span_s * i / 10}, 1.0)" for i in range(11))
    c = tiny(f"INSERT INTO requests (run_id, arrival_s, arrival_resolution_s) VALUES {rows}")
    got = c.execute("SELECT requests, sized, span_s, rate_per_s, arrival_resolution_s FROM workload_mix").fetchone()
    assert got == (11, 0, span_s, rate if rate is None else pytest.approx(rate), 1.0)


def test_workload_mix_rate_needs_ten_arrivals_and_leaves_out_what_the_run_did_not_count():
    """Rate over the arrival span from threshold_rate_min_requests() arrivals; failed, cancelled and warm-up
    requests are not in the mix (an LLMPerf 429 row: 1 output token, zero latencies)."""
    ok = ", ".join(f"('w', {i}.0, 100, 50, 'ok', 2.0)" for i in range(10))
    c = tiny(f"""
        INSERT INTO requests (run_id, arrival_s, input_tokens, output_tokens, status, e2e_s) VALUES
            {ok}, ('w', 3.5, 100, 1, 'error', 0.0), ('w', 4.5, 100, 1, 'cancelled', NULL),
            ('w', 20.0, 100, 500, 'warmup', 9.0), ('w', 21.0, 100, 500, 'cooldown', 9.0)
    """)
    assert c.execute("SELECT requests, output_mean, span_s, window_s FROM workload_mix").fetchone() == (
        10,
        50.0,
        9.0,
        11.0,
    )
    rate, tput, inflight = c.execute(
        "SELECT rate_per_s, throughput_per_s, mean_concurrency FROM workload_mix"
    ).fetchone()
    assert (rate, tput, inflight) == (pytest.approx(10 / 9), pytest.approx(10 / 11), pytest.approx(20 / 11))
    counted = c.execute("SELECT counted, excluded, errors FROM requests_summary").fetchone()
    assert counted == (10, 4, 1)
    outcomes = dict(c.execute("SELECT outcome, count(*) FROM requests_latency GROUP BY outcome").fetchall())
    assert outcomes == {"ok": 10, "failed": 1, "cancelled": 1, "warmup": 1, "cooldown": 1}


def test_prefix_reuse_counts_leading_blocks_seen_strictly_earlier():
    c = tiny("""
        INSERT INTO requests (run_id, request_id, arrival_s, input_tokens, output_tokens, prefix_block_ids) VALUES
            ('m', 'a', 0.0, 1536, 1, [1, 2, 3]),
            ('m', 'b', 1.0, 2048, 1, [1, 2, 9, 3]),  -- 1, 2 reused; 9 is new, so 3 is not served from the cache
            ('m', 'c', 1.0, 1024, 1, [1, 9]),        -- same instant as b: b's block 9 is not yet there
            ('m', 'd', 2.0, 512, 1, [9]),            -- b's and c's 9, seen earlier: reused
            ('m', 'e', 2.0, 512, 1, [9]),            -- an identical request at the same instant: the same figures
            ('m', 'f', 3.0, 512, 1, []),             -- no blocks: nothing to reuse
            ('m', 'g', NULL, 512, 1, [1]),           -- no arrival time: reuse unknown
            ('m', 'h', 4.0, 512, 1, NULL),           -- no block ids
            ('n', 'i', 5.0, 512, 1, [1])             -- another run: its own cache
    """)
    rows = c.execute(
        "SELECT request_id, prefix_blocks, prefix_blocks_reused FROM requests_prefix_reuse ORDER BY request_id"
    ).fetchall()
    assert rows == [
        ("a", 3, 0),
        ("b", 4, 2),
        ("c", 2, 1),
        ("d", 1, 1),
        ("e", 1, 1),
        ("f", None, None),
        ("g", None, None),
        ("h", None, None),
        ("i", 1, 0),
    ]
    assert c.execute("SELECT prefix_blocks, prefix_blocks_reused FROM workload_mix WHERE run_id = 'm'").fetchone() == (
        11,
        5,
    )


def test_request_preemptions_pair_each_preemption_with_the_next_rescheduling():
    c = tiny("""
        INSERT INTO request_events (run_id, request_id, ts_s, event) VALUES
            ('r', 'a', 0.0, 'queued'), ('r', 'a', 1.0, 'scheduled'), ('r', 'a', 2.0, 'preempted'),
            ('r', 'a', 2.5, 'scheduled'), ('r', 'a', 3.0, 'first_token'), ('r', 'a', 4.0, 'preempted'),
            ('r', 'a', 4.2, 'preempted'),  -- preempted again before any rescheduling: supersedes the first
            ('r', 'a', 5.0, 'scheduled'), ('r', 'a', 6.0, 'finished'),
            ('r', 'b', 0.0, 'scheduled'), ('r', 'b', 1.0, 'preempted'),  -- never rescheduled: still preempted
            ('r', 'c', 0.0, 'scheduled'), ('r', 'c', 1.0, 'finished')    -- never preempted: no row
    """)
    rows = c.execute(
        "SELECT request_id, preempted_at_s, resumed_at_s, duration_s, before_first_token FROM request_preemptions "
        "ORDER BY request_id, preempted_at_s"
    ).fetchall()
    assert rows == [
        ("a", 2.0, 2.5, 0.5, True),
        ("a", 4.2, 5.0, pytest.approx(0.8), False),
        ("b", 1.0, None, None, True),
    ]


def test_interference_fit_and_charges():
    c = tiny("""
                -- decode-only steps: wall = 0.001 + 0.0001 x tokens exactly
        INSERT INTO engine_steps (run_id, source, step_id, kind, start_s, end_s, prefill_reqs, prefill_tokens,
                                  decode_reqs, decode_tokens, wall_s)
        SELECT 'r', 'log', i, 'decode', i, i + 0.01, 0, 0, t, t, 0.001 + 0.0001 * t
            FROM (SELECT i, 1 + i % 8 AS t FROM range(20) r(i));
        -- one mixed step with 4 decoding and 2 prefilling requests: predicted 0.0014, took 0.0054 -> extra 0.004
        INSERT INTO engine_steps (run_id, source, step_id, kind, start_s, end_s, prefill_reqs, prefill_tokens,
                                  decode_reqs, decode_tokens, wall_s)
        VALUES ('r', 'log', 100, 'mixed', 100.0, 100.0054, 2, 500, 4, 4, 0.0054);
        INSERT INTO requests (run_id, request_id, scheduled_s, first_token_s, last_token_s)
        VALUES ('r', 'dec', 50.0, 60.0, 200.0),      -- decoding through the mixed step
                                    ('r', 'pre', 99.99, 100.01, 150.0),   -- prefilling in it
                                    ('r', 'late', 300.0, 301.0, 302.0);   -- not involved
    """)
    step = c.execute("SELECT predicted_decode_s, extra_s, fit_steps FROM interference_steps").fetchone()
    assert step == (pytest.approx(0.0014), pytest.approx(0.004), 20)
    rows = {
        r[0]: r[1:]
        for r in c.execute("SELECT request_id, suffered_s, caused_s, mixed_steps FROM interference_request").fetchall()
    }
    assert rows["dec"] == (pytest.approx(0.004), 0.0, 1)
    assert rows["pre"] == (0.0, pytest.approx(0.004 * 4 / 2), 0)  # charged its share of the inflation
    assert rows["late"] == (0.0, 0.0, 0)


def test_interference_needs_decode_steps_of_two_sizes():
    """Decode-only steps all of one size give no slope: no prediction for a mixed step of another size, so no
    row (run D's profiler: 38 decode steps of 7 tokens, mixed steps of 2 and 6)."""
    c = tiny("""
        INSERT INTO engine_steps (run_id, source, step_id, kind, start_s, end_s, prefill_reqs, prefill_tokens,
                                  decode_reqs, decode_tokens, wall_s)
        SELECT 'r', 'profiler', i, 'decode', i, i + 0.01, 0, 0, 7, 7, 0.002
            FROM range(12) r(i);
        INSERT INTO engine_steps (run_id, source, step_id, kind, start_s, end_s, prefill_reqs, prefill_tokens,
                                  decode_reqs, decode_tokens, wall_s)
        VALUES ('r', 'profiler', 100, 'mixed', 100.0, 100.01, 1, 50, 2, 2, 0.01);
    """)
    assert c.execute("SELECT count(*) FROM interference_steps").fetchone() == (0,)


def test_report_views_on_tiny_inputs():
    update = "UPDATE engine_stats SET running = 1, waiting = waiting_capacity, kv_usage = 0.5, preemptions_total = 2"
    c = tiny(ATTRIB_REQUESTS, ATTRIB_STATS, update)
    # five attributable requests -> five bins of one request each, fastest first
    bins = c.execute("SELECT bin, requests, e2e_s FROM report_request_bins ORDER BY bin").fetchall()
    assert [(b, n) for b, n, _ in bins] == [(1, 1), (2, 1), (3, 1), (4, 1), (5, 1)]
    assert [e for _, _, e in bins] == sorted(e for _, _, e in bins)
    hist = c.execute("SELECT metric, sum(requests) FROM report_latency_hist GROUP BY 1 ORDER BY 1").fetchall()
    assert hist == [("e2e", 5), ("tpot", 1), ("ttft", 2)]  # a, b, c, d, e have e2e; only a has a TPOT
    tl = c.execute("SELECT count(*), min(t_s), max(kv_usage), max(preemptions_total) FROM report_timeline").fetchone()
    assert tl == (5, 0.0, 0.5, 2.0)  # five timed samples (the untimed one is left out), from t = 0
    mix = c.execute("SELECT input_bin, output_bin, requests FROM report_size_mix ORDER BY 1, 2").fetchall()
    assert mix == [(8, 2, 1), (32, 1, 1), (64, 8, 1), (128, 16, 1), (256, 1, 1)]  # zero output -> the 1 bin


def test_latency_stats_macro():
    c = tiny()
    stats = c.execute(
        "SELECT latency_stats(x) FROM (VALUES (1.0::DOUBLE), (2.0), (3.0), (4.0), (NULL)) t(x)"
    ).fetchone()[0]
    assert stats == {"p50": 2.5, "p90": pytest.approx(3.7), "p99": pytest.approx(3.97), "mean": 2.5}  # NULL left out
    assert c.execute("SELECT latency_stats(x) FROM (SELECT 1.0::DOUBLE AS x WHERE false)").fetchone()[0] == {
        "p50": None,
        "p90": None,
        "p99": None,
        "mean": None,
    }


def test_a_view_that_does_not_bind_is_an_error_naming_it_and_what_it_lacks():
    from lltrace.errors import QueryError

    c = duckdb.connect()
    with pytest.raises(
        QueryError,
        match=r"queries/requests_cached_tokens\.sql: needs requests, engine_steps, engine_stats, engine_config, "
        "which this connection does not have",
    ):
        install_views(c, ["requests_summary"])
    canonical_tables(c)
    c.execute("DROP TABLE requests")
    c.execute("CREATE TABLE requests (run_id VARCHAR, request_id VARCHAR)")  # a requests table lacking columns
    with pytest.raises(
        QueryError,
        match=r"queries/requests_cached_tokens\.sql: view requests_cached_tokens does not bind: .*(scheduled_s|cached)",
    ):
        install_views(c, ["requests_summary"])
    with pytest.raises(QueryError, match="no query named 'requests'"):
        install_views(c, ["requests"])

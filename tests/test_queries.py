"""Each view of queries/*.sql on tiny exact inputs (inline rows in an in-memory DuckDB)."""

from __future__ import annotations

import duckdb
import pytest

from lltrace.queries import install_views

KERNELS = """
CREATE TABLE kernels (run_id VARCHAR, part INTEGER, device BIGINT, ts_ns BIGINT, dur_ns BIGINT,
                      kernel_class VARCHAR, attention_variant VARCHAR);
INSERT INTO kernels VALUES
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
CREATE TABLE ops (run_id VARCHAR, part INTEGER, ts_ns BIGINT, dur_ns BIGINT);
CREATE TABLE annotations (run_id VARCHAR, part INTEGER, ts_ns BIGINT, dur_ns BIGINT);
INSERT INTO ops VALUES ('a', 0, 0, 20000)  -- run a was traced for 20 µs; run b has GPU work only
"""

STEPS = """
CREATE TABLE engine_steps (run_id VARCHAR, source VARCHAR, kind VARCHAR, wall_s DOUBLE, gpu_busy_s DOUBLE,
                           prefill_tokens BIGINT, decode_tokens BIGINT, cuda_graph BOOLEAN);
INSERT INTO engine_steps VALUES
    ('a', 'profiler', 'prefill', 0.010, 0.008, 100, 0, false),
    ('a', 'profiler', 'decode', 0.002, 0.001, 0, 4, true),
    ('a', 'profiler', 'decode', 0.004, 0.002, 0, 4, true),
    ('a', 'profiler', 'mixed', 0.006, 0.004, 50, 2, false),
    ('b', 'profiler', NULL, 0.001, NULL, NULL, NULL, NULL),
    ('b', 'profiler', 'decode', 0.003, NULL, 0, 1, false)
"""


@pytest.fixture
def con():
    c = duckdb.connect()
    c.execute(KERNELS)
    c.execute(CPU)
    c.execute(STEPS)
    install_views(c, ["kernels", "ops", "annotations", "engine_steps"])
    return c


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
    c = duckdb.connect()
    c.execute(KERNELS.split(";")[0])  # the tables, no rows
    c.execute(CPU.split(";")[0])
    c.execute(CPU.split(";")[1])
    install_views(c, ["kernels", "ops", "annotations"])
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
CREATE TABLE requests (run_id VARCHAR, request_id VARCHAR, status VARCHAR, ttft_s DOUBLE, server_ttft_s DOUBLE,
                       e2e_s DOUBLE, server_e2e_s DOUBLE, output_tokens BIGINT, queue_s DOUBLE);
INSERT INTO requests VALUES
    ('r', 'a', 'ok', 0.1, 0.09, 1.1, 1.0, 11, 0.01),      -- client figures win: tpot = (1.1 - 0.1) / 10
    ('r', 'b', 'finished', NULL, 0.2, NULL, 0.5, 4, 0.02), -- server only: tpot = (0.5 - 0.2) / 3
    ('r', 'c', 'ok', 0.3, NULL, 0.3, NULL, 1, NULL),        -- one output token: no tpot; no engine data
    ('r', 'd', 'error', NULL, NULL, NULL, NULL, NULL, NULL) -- failed: counted, not in the latencies
"""


def test_requests_latency_and_summary():
    c = duckdb.connect()
    c.execute(REQUESTS)
    install_views(c, ["requests"])
    lat = c.execute("SELECT request_id, basis, ttft_s, e2e_s, tpot_s, queue_s FROM requests_latency ORDER BY 1")
    assert lat.fetchall() == [
        ("a", "client", 0.1, 1.1, pytest.approx(0.1), 0.01),
        ("b", "server", 0.2, 0.5, pytest.approx(0.1), 0.02),
        ("c", "client", 0.3, 0.3, None, None),
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


ATTRIB = """
CREATE TABLE requests (run_id VARCHAR, request_id VARCHAR, client_id VARCHAR, arrival_s DOUBLE, status VARCHAR,
    input_tokens BIGINT, output_tokens BIGINT, num_preemptions BIGINT, e2e_s DOUBLE, server_e2e_s DOUBLE,
    ttft_s DOUBLE, queue_s DOUBLE, queue_s_est DOUBLE, prefill_s DOUBLE, prefill_s_est DOUBLE, decode_s DOUBLE,
    queued_s DOUBLE, scheduled_s DOUBLE, preempted_s DOUBLE, preempted_in_prefill_s DOUBLE, server_ttft_s DOUBLE);
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
CREATE TABLE engine_stats (run_id VARCHAR, ts_s DOUBLE, waiting_capacity DOUBLE, kv_usage DOUBLE, waiting DOUBLE,
                           swapped DOUBLE);
INSERT INTO engine_stats (run_id, ts_s, waiting_capacity) VALUES
    ('r', 9.0, 0), ('r', 10.2, 3), ('r', 10.4, 0), ('r', 11.5, 5), ('r', 20.0, 0),
    ('r', NULL, 7);  -- a sample without a time is ignored
"""


def test_attribution_request_edge_rows():
    c = duckdb.connect()
    c.execute(ATTRIB)
    install_views(c, ["requests", "engine_stats"])
    rows = {
        r[0]: r[1:]
        for r in c.execute(
            "SELECT request_id, e2e_basis, queue_basis, prefill_basis, decode_basis, decode_s, preempted_s, "
            "overhead_s, num_preemptions, clock_error FROM attribution_request"
        ).fetchall()
    }
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


def test_kv_wait_overlaps_queue_with_capacity_samples():
    c = duckdb.connect()
    c.execute(ATTRIB)
    # h: queued 9.1-9.9, entirely in a sample with nobody waiting for capacity -> 0 (not its whole queue)
    c.execute(
        "INSERT INTO requests (run_id, request_id, status, queued_s, scheduled_s) VALUES ('r', 'h', 'ok', 9.1, 9.9)"
    )
    install_views(c, ["requests", "engine_stats"])
    kv = dict(c.execute("SELECT request_id, kv_wait_s FROM attribution_kv_wait").fetchall())
    # a: queued 10.0-10.5; capacity waiting during [10.2, 10.4) -> 0.2 s
    # b: queued 11.0-12.0; capacity waiting during [11.5, 20.0) -> 0.5 s
    assert kv == {"a": pytest.approx(0.2), "b": pytest.approx(0.5), "h": 0.0}


def test_kv_wait_without_a_capacity_reason_uses_kv_usage_and_paused_requests():
    """V0 / SGLang / TensorRT-LLM samples: no waiting_capacity, so usage near full with a queue, or paused."""
    c = duckdb.connect()
    c.execute(ATTRIB.split("CREATE TABLE engine_stats")[0])
    c.execute(
        "CREATE TABLE engine_stats (run_id VARCHAR, ts_s DOUBLE, waiting_capacity DOUBLE, kv_usage DOUBLE, "
        "waiting DOUBLE, swapped DOUBLE)"
    )
    c.execute(
        "INSERT INTO engine_stats (run_id, ts_s, kv_usage, waiting, swapped) VALUES "
        "('r', 10.0, 0.97, 4, 0), ('r', 10.3, 0.80, 4, 0), ('r', 11.0, 0.5, 0, 2), ('r', 11.6, 0.5, 0, 0), "
        "('r', 30.0, 0.1, 0, 0)"
    )
    install_views(c, ["requests", "engine_stats"])
    kv = dict(c.execute("SELECT request_id, kv_wait_s FROM attribution_kv_wait").fetchall())
    # a: 10.0-10.5 -> [10.0, 10.3) near full with a queue = 0.3; b: 11.0-12.0 -> [11.0, 11.6) paused = 0.6
    assert kv == {"a": pytest.approx(0.3), "b": pytest.approx(0.6)}


def test_attribution_on_an_empty_run():
    c = duckdb.connect()
    c.execute(ATTRIB.split("INSERT INTO requests")[0])
    c.execute(
        "CREATE TABLE engine_stats (run_id VARCHAR, ts_s DOUBLE, waiting_capacity DOUBLE, kv_usage DOUBLE, "
        "waiting DOUBLE, swapped DOUBLE)"
    )
    install_views(c, ["requests", "engine_stats"])
    assert c.execute("SELECT count(*) FROM attribution_run").fetchone() == (0,)
    assert c.execute("SELECT count(*) FROM attribution_kv_wait").fetchone() == (0,)


def test_workload_mix_prefix_reuse_and_concurrency():
    c = duckdb.connect()
    c.execute("""
        CREATE TABLE requests (run_id VARCHAR, arrival_s DOUBLE, arrival_ns BIGINT, input_tokens BIGINT,
                               output_tokens BIGINT, prefix_block_ids BIGINT[], e2e_s DOUBLE, server_e2e_s DOUBLE);
        INSERT INTO requests VALUES
            ('m', 0.0, 0, 1024, 10, [1, 2], 2.0, NULL),
            ('m', 1.0, 1000000000, 1536, 20, [1, 2, 3], 1.0, NULL),   -- reuses blocks 1 and 2
            ('m', 2.0, 2000000000, 512, 30, [4], NULL, 1.0),          -- server e2e only
            ('m', 3.0, 3000000000, NULL, NULL, NULL, NULL, NULL)       -- no sizes: left out
    """)
    install_views(c, ["requests"])
    row = c.execute(
        "SELECT requests, input_p50, output_mean, span_s, rate_per_s, prefix_blocks, "
        "prefix_blocks_reused, prefix_reuse, mean_concurrency FROM workload_mix"
    ).fetchone()
    assert row == (3, 1024.0, 20.0, 2.0, 1.5, 6, 2, pytest.approx(1 / 3), 2.0)


def test_interference_fit_and_charges():
    c = duckdb.connect()
    c.execute("""
        CREATE TABLE engine_steps (run_id VARCHAR, source VARCHAR, step_id BIGINT, kind VARCHAR, start_s DOUBLE,
                                   end_s DOUBLE, prefill_reqs BIGINT, prefill_tokens BIGINT, decode_reqs BIGINT,
                                   decode_tokens BIGINT, wall_s DOUBLE);
        -- decode-only steps: wall = 0.001 + 0.0001 x tokens exactly
        INSERT INTO engine_steps SELECT 'r', 'log', i, 'decode', i, i + 0.01, 0, 0, t, t, 0.001 + 0.0001 * t
            FROM (SELECT i, 1 + i % 8 AS t FROM range(20) r(i));
        -- one mixed step with 4 decoding and 2 prefilling requests: predicted 0.0014, took 0.0054 -> extra 0.004
        INSERT INTO engine_steps VALUES ('r', 'log', 100, 'mixed', 100.0, 100.0054, 2, 500, 4, 4, 0.0054);
        CREATE TABLE requests (run_id VARCHAR, request_id VARCHAR, scheduled_s DOUBLE, first_token_s DOUBLE,
                               last_token_s DOUBLE);
        INSERT INTO requests VALUES ('r', 'dec', 50.0, 60.0, 200.0),      -- decoding through the mixed step
                                    ('r', 'pre', 99.99, 100.01, 150.0),   -- prefilling in it
                                    ('r', 'late', 300.0, 301.0, 302.0);   -- not involved
    """)
    install_views(c, ["engine_steps", "requests"])
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
    c = duckdb.connect()
    c.execute("""
        CREATE TABLE engine_steps (run_id VARCHAR, source VARCHAR, step_id BIGINT, kind VARCHAR, start_s DOUBLE,
                                   end_s DOUBLE, prefill_reqs BIGINT, prefill_tokens BIGINT, decode_reqs BIGINT,
                                   decode_tokens BIGINT, wall_s DOUBLE);
        INSERT INTO engine_steps SELECT 'r', 'profiler', i, 'decode', i, i + 0.01, 0, 0, 7, 7, 0.002
            FROM range(12) r(i);
        INSERT INTO engine_steps VALUES ('r', 'profiler', 100, 'mixed', 100.0, 100.01, 1, 50, 2, 2, 0.01);
    """)
    install_views(c, ["engine_steps"])
    assert c.execute("SELECT count(*) FROM interference_steps").fetchone() == (0,)


def test_report_views_on_tiny_inputs():
    c = duckdb.connect()
    c.execute(ATTRIB)
    c.execute(
        "ALTER TABLE engine_stats ADD COLUMN running DOUBLE; "
        "ALTER TABLE engine_stats ADD COLUMN preemptions_total DOUBLE"
    )
    c.execute("UPDATE engine_stats SET running = 1, waiting = waiting_capacity, kv_usage = 0.5, preemptions_total = 2")
    install_views(c, ["requests", "engine_stats"])
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

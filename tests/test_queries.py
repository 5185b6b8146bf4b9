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
    c.execute(STEPS)
    install_views(c, ["kernels", "engine_steps"])
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
    # run a: [1000,1800) ∪ [3000,4000) ∪ [5000,5000) = 1800 ns busy over a 4000 ns span
    assert rows[0] == ("a", 0, 0, pytest.approx(1800e-9), pytest.approx(4000e-9), pytest.approx(0.45))
    assert rows[1] == ("b", 0, 1, pytest.approx(100e-9), pytest.approx(100e-9), pytest.approx(1.0))


def test_empty_input_gives_no_rows():
    c = duckdb.connect()
    c.execute(KERNELS.split(";")[0])  # the table, no rows
    install_views(c, ["kernels"])
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

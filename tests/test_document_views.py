"""The views the analysis document's sections read (queries/*.sql), each on tiny exact inputs: the edge rows spelled
out (an empty run, a run without the table, two runs side by side)."""

from __future__ import annotations

import pytest
from test_queries import LIMITS, STATE_STEPS, by_first, tiny


def test_engine_kv_summary_sums_a_servers_engines_and_keeps_replicas_apart() -> None:
    c = tiny(
        "INSERT INTO engine_stats (run_id, source, instance, ts_s, engine, kv_usage, waiting, waiting_capacity) VALUES "
        # run a: two data-parallel engines of one server (their waiting summed at a moment), a stage row left out
        "('a', 'prometheus', NULL, 1.0, '0', 0.5, 3, 1), ('a', 'prometheus', NULL, 1.0, '1', 0.9, 4, 2), "
        "('a', 'prometheus', NULL, 2.0, '0', 0.2, 1, 0), ('a', 'stage', NULL, NULL, NULL, 1.0, 99, 99), "
        # run b: two replicas of a fleet (instances): never summed
        "('b', 'prometheus', 'x', 1.0, 'x', 0.3, 5, NULL), ('b', 'prometheus', 'y', 1.0, 'y', 0.4, 6, NULL)"
    )
    got = by_first(c, "SELECT * FROM engine_kv_summary ORDER BY run_id")
    assert got == {"a": (0.9, 7, 3, 3), "b": (0.4, 6, None, 2)}
    assert tiny().execute("SELECT count(*) FROM engine_kv_summary").fetchone() == (0,)


def test_requests_outcomes_counts_only_what_the_figures_leave_out() -> None:
    c = tiny(
        "INSERT INTO requests (run_id, request_id, status, arrival_s, e2e_s) VALUES "
        "('r', 'a', 'ok', 0.0, 1.0), ('r', 'b', 'error', 0.1, NULL), ('r', 'c', 'error', 0.2, NULL), "
        "('r', 'd', 'warmup', 0.3, 1.0)"
    )
    got = c.execute("SELECT outcome, requests FROM requests_outcomes ORDER BY outcome").fetchall()
    assert got == [("failed", 2), ("warmup", 1)]


def test_engine_stats_span_and_its_median_step() -> None:
    c = tiny(
        "INSERT INTO engine_stats (run_id, source, ts_s) VALUES ('s', 'm', 10.0), ('s', 'm', 12.0), ('s', 'm', 12.0), "
        "('s', 'm', 15.0), ('s', 'm', NULL), ('o', 'm', 3.0)"
    )
    got = by_first(c, "SELECT * FROM engine_stats_span ORDER BY run_id")
    assert got == {"o": (0.0, None), "s": (5.0, 2.5)}  # distinct times 10, 12, 15: gaps 2 and 3


def test_engine_steps_counts_and_items() -> None:
    c = tiny(
        "INSERT INTO engine_steps (run_id, part, step_id, source, kind, start_s, wall_s, decode_reqs) VALUES "
        "('r', 0, 0, 'log', 'decode', 1.0, 0.002, 4), ('r', 0, 1, 'log', 'decode', 1.1, 0.003, 4), "
        "('r', 0, 2, 'log', NULL, 1.2, 0.5, NULL), ('r', 1, 0, 'profiler', 'prefill', 1.0, 0.1, 0)"
    )
    got = c.execute("SELECT source, kind, steps FROM engine_steps_counts ORDER BY source, kind NULLS LAST").fetchall()
    assert got == [("log", "decode", 2), ("log", None, 1), ("profiler", "prefill", 1)]
    items = c.execute("SELECT step_id, dur_s FROM engine_steps_items WHERE source = 'log' ORDER BY step_id").fetchall()
    assert items == [(0, 0.002), (1, 0.003), (2, 0.5)]  # dur_s is the step's wall time


def test_profiler_counts() -> None:
    c = tiny(
        "INSERT INTO kernels (run_id, part, ts_ns, dur_ns, orphan, cuda_graph) VALUES "
        "('p', 0, 0, 10, false, true), ('p', 0, 20, 10, true, false), ('p', 0, 40, 10, false, NULL)"
    )
    assert c.execute("SELECT gpu_ops, orphans, cuda_graph_kernels FROM profiler_counts").fetchall() == [(3, 1, 1)]
    assert tiny().execute("SELECT count(*) FROM profiler_counts").fetchone() == (0,)


def test_interference_run_without_mixed_steps_is_no_row() -> None:
    assert tiny().execute("SELECT count(*) FROM interference_run").fetchone() == (0,)


def test_the_queue_split_summed_over_the_requests() -> None:
    """test_queries' timeline of run r: q1 waits 0.5-5.5 (1 s load, 2 s slot, 1 s budget, 1 s KV), q2 not at all, q3
    after the log ends (load); q4 has a queue time but no interval to place it (unplaced)."""
    requests = """
    INSERT INTO requests (run_id, request_id, status, input_tokens, arrival_s, e2e_s, queue_s, prefill_s, decode_s,
                          queued_s, scheduled_s) VALUES
        ('r', 'q1', 'ok', 200, 0.5, 5.4, 5.0, 0.1, 0.2, 0.5, 5.5),
        ('r', 'q2', 'ok', 30, 2.5, 0.4, 0.0, 0.1, 0.2, 2.5, 2.5),
        ('r', 'q3', 'ok', 40, 6.5, 0.9, 0.5, 0.1, 0.2, 6.5, 7.0),
        ('r', 'q4', 'ok', 40, 1.0, 1.4, 1.0, 0.1, 0.2, NULL, NULL)
    """
    c = tiny(LIMITS, STATE_STEPS, requests)
    got = by_first(c, "SELECT * FROM attribution_queue_split ORDER BY run_id")
    kv, slot, budget, split, unplaced, mixed = got["r"]
    assert (kv, slot, budget) == (pytest.approx(1.0), pytest.approx(2.0), pytest.approx(1.0))
    assert split == 3 and unplaced == pytest.approx(1.0) and mixed is None  # one engine: its states never differ
    causes = by_first(c, "SELECT cause, segments FROM engine_state_causes WHERE run_id = 'r' ORDER BY cause")
    assert causes == {"budget": (1,), "kv": (1,), "slot": (2,), None: (2,)}


def test_requests_sizes_of_the_counted_requests_with_both_sizes() -> None:
    c = tiny(
        "INSERT INTO requests (run_id, request_id, status, arrival_s, input_tokens, output_tokens) VALUES "
        "('r', 'a', 'ok', 0.0, 100, 10), ('r', 'b', 'ok', 1.0, 300, 30), ('r', 'c', 'ok', 2.0, 50, NULL), "
        "('r', 'd', 'error', 3.0, 999, 1)"
    )
    got = c.execute("SELECT requests, input_mean, output_mean, input_total, output_total FROM requests_sizes")
    assert got.fetchall() == [(2, 200.0, 20.0, 400, 40)]


def test_engine_windows_summed_over_runs_or_one_run_alone() -> None:
    c = tiny(
        "INSERT INTO engine_stats (run_id, source, ts_s, engine, running, waiting, kv_usage) VALUES "
        "('a', 'm', 0.0, '0', 2, 1, 0.5), ('a', 'm', 5.0, '0', 4, 3, 0.7), "
        "('b', 'm', 1.0, '0', 1, 0, 0.2), ('b', 'm', 6.0, '0', 1, 0, 0.9)"
    )
    both = c.execute(
        "SELECT window_start_s, runs, mean_running, mean_waiting, peak_kv_usage "
        "FROM engine_windows_summed(10.0, NULL, NULL, NULL)"
    ).fetchall()
    assert both == [(0.0, 2, 4.0, 2.0, 0.9)]  # a's mean 3 running, b's 1: summed as one fleet
    alone = c.execute("SELECT runs, mean_running FROM engine_windows_summed(10.0, NULL, NULL, 'a')").fetchall()
    assert alone == [(1, 3.0)]

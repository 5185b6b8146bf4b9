"""Data-parallel engines behind one API server: read, split and replayed per engine.

Checked on lltrace's real run ``sample_traces/vllm_cpu_limits/DP2_slots`` (vLLM 0.32, ``--data-parallel-size 2
--api-server-count 1``, four sequence slots each, 80 requests at 20 req/s), each figure against the raw files read
here with the test's own regular expressions: the two engines' ``Iteration(k)`` lines, the final scrape's per-engine
counters.
"""

from __future__ import annotations

import re

import pytest
from conftest import SAMPLES

import lltrace
from lltrace.replay.cost import StepCost
from lltrace.replay.scheduler import EngineConfig, simulate

DP = SAMPLES / "vllm_cpu_limits" / "DP2_slots"
_ITER = re.compile(r"Engine (\d+): Iteration\((\d+)\): (\d+) context requests, (\d+) context tokens, (\d+) generation")


def _counter(name: str) -> dict[str, float]:
    """The final scrape's ``name`` per engine label (summed over its other labels)."""
    out: dict[str, float] = {}
    for engine, value in re.findall(
        rf'^{name}\{{engine="(\d+)"[^}}]*\}} (\S+)$', (DP / "metrics_final.prom").read_text(), re.M
    ):
        out[engine] = out.get(engine, 0.0) + float(value)
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> lltrace.Run:
    return lltrace.ingest([DP], store=tmp_path_factory.mktemp("dp") / "store")


def test_the_settings_are_each_engines(run: lltrace.Run) -> None:
    config = dict(run.sql("SELECT setting, value FROM engine_config").rows())
    # the API server's argument (each engine core's own config line says 1), and each engine's KV blocks: its
    # cache's tokens over the block (the gauge's num_gpu_blocks, 32,768, counts both engines')
    assert "'data_parallel_size': 2" in (DP / "server.log").read_text()
    assert config["data_parallel_size"] == 2
    assert re.findall(r"CPU KV cache size: ([\d,]+) tokens", (DP / "server.log").read_text()) == ["2,097,152"] * 2
    assert config["kv_blocks"] == 2_097_152 // 128 and config["max_num_seqs"] == 4


def test_each_engines_steps_are_placed_on_their_own(run: lltrace.Run) -> None:
    lines = _ITER.findall((DP / "server.log").read_text())
    logged = {e: sum(1 for x in lines if x[0] == e) for e in ("000", "001")}
    steps = run.sql(
        "SELECT engine, count(*), count(*) FILTER (WHERE start_s < lag_end - 1e-9) FROM (SELECT engine, start_s, "
        "lag(end_s) OVER (PARTITION BY engine ORDER BY step_id) AS lag_end FROM engine_steps) GROUP BY engine "
        "ORDER BY engine"
    ).rows()
    # every iteration of each engine, none of an engine's steps starting before its previous one ended
    assert steps == [("0", logged["000"], 0), ("1", logged["001"], 0)]


def test_the_prefix_cache_counts_both_engines(run: lltrace.Run) -> None:
    got = run.sql("SELECT queried_tokens, cached_share FROM engine_prefix_cache").row(0)
    queried = _counter("vllm:prefix_cache_queries_total")
    assert got[0] == sum(queried.values()) == 5117 + 5063
    # no cache hits: both engines' logs computed every prompt token their counters counted
    context = sum(int(x[3]) for x in _ITER.findall((DP / "server.log").read_text()))
    assert context == sum(_counter("vllm:prompt_tokens_total").values()) and got[1] == pytest.approx(0.0, abs=1e-9)


def test_the_queue_waited_for_slots_in_both_engines(run: lltrace.Run) -> None:
    # the raw log: each engine ran 4 requests a step at most, and the engines' own queue times add up to the spans'
    lines = _ITER.findall((DP / "server.log").read_text())
    assert max(int(x[2]) + int(x[4]) for x in lines) == 4
    parts = lltrace.analyze(run).to_dict()["attribution"]
    queued = run.sql("SELECT sum(queue_s) FROM requests").item()
    assert queued == pytest.approx(sum(_counter("vllm:request_queue_time_seconds_sum").values()), rel=0.01)
    # whichever engine held a request, both had every slot taken while it waited (before: all of it "load")
    assert parts["slot_wait"]["share_of_parent"] > 0.95 and parts["load_wait"]["share_of_parent"] < 0.05


def test_the_replay_routes_as_vllms_load_balancer(run: lltrace.Run) -> None:
    doc = lltrace.replay(run, what_ifs=["data_parallel_size=1"])
    # held out, the last 30 % of the requests; one engine doing both engines' work queues 5x as long
    v = doc["validation"]
    assert v["ttft_mean_mape"] < 0.10 and v["queue_mean_mape"] < 0.15 and v["e2e_mean_mape"] < 0.10
    one = doc["whatifs"][0]["summary"]["queue_s"]["mean"]
    assert one > 3 * doc["baseline"]["measured"]["queue_s"]["mean"]
    # the engines' own request counts (the final scrape): 40 and 40, as the replay's router sends them
    done = _counter("vllm:request_success_total")
    assert done == {"0": 40.0, "1": 40.0}
    assert any("40 / 40 requests" in note for note in doc["baseline"]["notes"])


def test_a_request_goes_to_the_engine_with_the_fewest_in_flight() -> None:
    # two engines of one slot each, every step 1 ms: three requests at once go to engine 0, 1, then 0 (a tie, the
    # scan starting one engine further each time), so the third waits for the first's 5 steps
    cost = StepCost(c0=1e-3, c_prefill=0.0, c_decode=0.0)
    config = EngineConfig(num_blocks=1000, max_num_seqs=1, data_parallel_size=2)
    res = simulate([0.0, 0.0, 0.0], [10, 10, 10], [5, 5, 5], config, cost)
    assert res.requests["ttft_s"].to_list() == pytest.approx([1e-3, 1e-3, 6e-3])
    # one engine: one after another
    one = simulate([0.0, 0.0, 0.0], [10, 10, 10], [5, 5, 5], EngineConfig(num_blocks=1000, max_num_seqs=1), cost)
    assert one.requests["ttft_s"].to_list() == pytest.approx([1e-3, 6e-3, 11e-3])

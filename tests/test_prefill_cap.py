"""vLLM's cap on one request's prompt chunk a step (``--long-prefill-token-threshold``): read from the server log,
modelled by the replay's scheduler as vLLM 0.32's does it, and checked on lltrace's real pair
``sample_traces/vllm_cpu_limits/Z_cap_off`` and ``Z_cap64`` (one workload, one after the other on one machine,
without and with a cap of 64 tokens), whose chunk sizes are read here from the raw log with the test's own
regular expressions.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import SAMPLES

import lltrace
from lltrace.replay.cost import StepCost
from lltrace.replay.scheduler import EngineConfig, simulate

OFF = SAMPLES / "vllm_cpu_limits" / "Z_cap_off"
CAP = SAMPLES / "vllm_cpu_limits" / "Z_cap64"
STEP = StepCost(c0=1e-3, c_prefill=0.0, c_decode=0.0)  # every step 1 ms


def _ttft(config: EngineConfig, arrival: list[float], inp: list[int], out: list[int], fast: bool = True) -> list[float]:
    res = simulate(arrival, inp, out, config, STEP, fast_forward=fast)
    return res.requests["ttft_s"].to_list()


@pytest.mark.parametrize("fast", [True, False])
def test_a_long_prompt_beside_a_decoding_request_takes_the_cap_a_step(fast: bool) -> None:
    # a request decoding (10 in, 100 out) and a 1000-token prompt queued at the end of its first step (1 ms), a
    # 256-token budget: 255 tokens a step without the cap (4 steps), 64 with it (16 steps), and with the adaptive
    # floor the budget's share per request, 256 // 2 = 128 (8 steps); its first token at the end of the last
    def prompt(**cap: int | bool) -> float:
        config = EngineConfig(num_blocks=10_000, max_num_batched_tokens=256, **cap)
        return _ttft(config, [0.0, 0.0005], [10, 1000], [100, 2], fast)[1]

    assert prompt() == pytest.approx(4.5e-3)
    assert prompt(long_prefill_token_threshold=64) == pytest.approx(16.5e-3)
    assert prompt(long_prefill_token_threshold=64, long_prefill_adaptive=True) == pytest.approx(8.5e-3)


@pytest.mark.parametrize("fast", [True, False])
def test_a_prompt_alone_is_not_capped(fast: bool) -> None:
    # vLLM 0.32: the cap applies while more than one request is running or waiting (a request alone starves nobody)
    config = EngineConfig(num_blocks=10_000, max_num_batched_tokens=256, long_prefill_token_threshold=64)
    assert _ttft(config, [0.0], [1000], [2], fast) == [pytest.approx(4e-3)]
    # without chunked prefill there are no chunks to cap
    whole = EngineConfig(num_blocks=10_000, max_num_batched_tokens=2048, chunked_prefill=False)
    capped = EngineConfig(
        num_blocks=10_000, max_num_batched_tokens=2048, chunked_prefill=False, long_prefill_token_threshold=64
    )
    args = ([0.0, 0.0], [1000, 500], [2, 2], fast)
    assert _ttft(capped, *args) == _ttft(whole, *args)


_ITER = re.compile(r"Iteration\(\d+\): (\d+) context requests, (\d+) context tokens, (\d+) generation requests")


def _chunks(log: Path) -> tuple[int, int]:
    """(steps that computed prompt tokens, the most prompt tokens one request took in a step beside a decoding
    request) from the raw log's ``Iteration(k)`` lines."""
    steps, largest = 0, 0
    for ctx_reqs, ctx_tokens, gen_reqs in _ITER.findall(log.read_text()):
        if int(ctx_reqs):
            steps += 1
            if int(ctx_reqs) == 1 and int(gen_reqs):
                largest = max(largest, int(ctx_tokens))
    return steps, largest


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[lltrace.Run, lltrace.Run]:
    store = tmp_path_factory.mktemp("cap") / "store"
    return lltrace.ingest([OFF], store=store), lltrace.ingest([CAP], store=store)


def test_the_setting_is_read_from_the_log(runs: tuple[lltrace.Run, lltrace.Run]) -> None:
    off, cap = runs
    query = "SELECT value, basis, origin FROM engine_config WHERE setting = 'long_prefill_token_threshold'"
    assert cap.sql(query).row(0) == (64.0, "stated", "server log: non-default args (long_prefill_token_threshold)")
    assert off.sql(query).row(0)[:2] == (0.0, "default")  # vLLM 0.32's SchedulerConfig: 0, no cap


def test_the_replay_cuts_prompts_as_the_engine_did(runs: tuple[lltrace.Run, lltrace.Run]) -> None:
    # the raw logs: beside a decoding request no prompt took more than 64 tokens a step in the capped run (255
    # uncapped: the budget less the decode's token), and its prompts took 2.6x the steps (a prompt alone in the
    # engine is not capped)
    off_steps, off_largest = _chunks(OFF / "server.log")
    cap_steps, cap_largest = _chunks(CAP / "server.log")
    assert (off_steps, cap_steps, off_largest, cap_largest) == (254, 658, 255, 64)
    off, cap = runs
    cases = ["long_prefill_token_threshold=0", "long_prefill_token_threshold=64"]
    from_off, from_cap = (lltrace.replay(r, what_ifs=cases) for r in (off, cap))
    # each run's own replay, and each what-if against the run that really had the setting: the count of steps
    # computing prompt tokens is the scheduler's alone (no step cost in it beyond when requests arrive)
    assert from_off["baseline"]["prompt_steps"] == pytest.approx(off_steps, rel=0.05)
    assert from_cap["baseline"]["prompt_steps"] == pytest.approx(cap_steps, rel=0.05)
    assert from_off["whatifs"][1]["prompt_steps"] == pytest.approx(cap_steps, rel=0.05)
    assert from_cap["whatifs"][0]["prompt_steps"] == pytest.approx(off_steps, rel=0.05)
    # and the cap lengthens the first token's wait (measured: 16.5 -> 28.6 ms over both clients)
    ttft = [from_off["whatifs"][k]["summary"]["ttft_s"]["mean"] for k in (0, 1)]
    assert ttft[1] > 1.2 * ttft[0]


def test_the_adaptive_floor_is_read_where_the_log_states_it(tmp_path: Path) -> None:
    # Z_cap64's own log with the adaptive switch added to its non-default args, as vLLM 0.32 prints it when set
    text = (CAP / "server.log").read_text()
    line = "'long_prefill_token_threshold': 64}"
    assert text.count(line) == 1
    log = tmp_path / "server.log"
    log.write_text(
        text.replace(line, "'long_prefill_token_threshold': 64, 'long_prefill_token_threshold_adaptive': True}")
    )
    run = lltrace.ingest([log], store=tmp_path / "store")
    got = run.sql("SELECT setting, value FROM engine_config WHERE setting LIKE 'long_prefill%' ORDER BY setting").rows()
    assert got == [("long_prefill_adaptive", 1.0), ("long_prefill_token_threshold", 64.0)]

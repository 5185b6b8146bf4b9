"""The run's requests and engine replayed under a config, a step cost and the time outside the engine: what the
replay document (``lltrace.replay.document``) and a window's what-ifs (``lltrace.replay.window``) both run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from lltrace.errors import AnalysisError
from lltrace.replay.calibration import Outside, drafting, log_steps, outside_engine
from lltrace.replay.cost import StepCost, fit_step_cost_from_requests, fit_step_cost_without_stalls, open_at
from lltrace.replay.scheduler import OPTIONAL, EngineConfig, ReplayResult, simulate
from lltrace.store import Run


@dataclass
class Replayer:
    """The run's requests and engine, replayed under a config, a cost and the time outside the engine."""

    lengths: tuple[np.ndarray, np.ndarray]
    hits: np.ndarray | None
    settings: dict[str, dict[str, Any]]

    def config(self, overrides: dict[str, Any]) -> EngineConfig:
        """The engine's limits: the run's settings with ``overrides`` (a what-if's)."""
        v = {k: s["value"] for k, s in self.settings.items()} | overrides
        return EngineConfig(
            num_blocks=int(v["kv_blocks"]),
            block_size=int(v["block_size"]),
            max_num_seqs=int(v["max_num_seqs"]),
            max_num_batched_tokens=int(v["max_num_batched_tokens"]),
            chunked_prefill=bool(v["chunked_prefill"]),
            **{k: kind(v[k]) for k, kind in OPTIONAL.items() if v.get(k) is not None},
        )

    def run(
        self,
        arrival: np.ndarray,
        cfg: EngineConfig,
        cost: StepCost,
        out: Outside,
        cache: bool = True,
        stalled: pl.DataFrame | None = None,
    ) -> ReplayResult:
        """Replay the requests arriving at ``arrival``; latencies as the client sees them (outside-engine time
        added back)."""
        # a measured stall is replayed at its time: the engine starts no step for its excess
        pauses = (
            []
            if stalled is None
            else list(zip(stalled["start_s"], stalled["start_s"] + stalled["excess_s"], strict=True))
        )
        # the engine's core sees a request out.frontend after the frontend received it; the client sees its
        # first and last token out.client_first and out.client_last after the engine produced them
        hits = self.hits if cache else None
        res = simulate(arrival + out.frontend, *self.lengths, cfg, cost, cached_tokens=hits, pauses=pauses)
        f = res.requests
        # the frontend's slowdown with the requests the replayed engine holds when each arrives
        seen = f["arrival_s"].to_numpy()
        taken = seen + f["wait_s"].fill_null(np.inf).to_numpy()
        load = out.per_request_in_engine * open_at(seen, taken, seen + f["e2e_s"].fill_null(np.inf).to_numpy())
        res.requests = f.with_columns(
            (pl.col("arrival_s") - out.frontend).alias("arrival_s"),
            pl.col("ttft_s") + out.frontend + out.client_first + pl.Series(load),
            pl.col("e2e_s") + out.frontend + out.client_last + pl.Series(load),
        )
        return res


def measured_requests(run: Run) -> pl.DataFrame:
    """The run's successful requests that can be replayed (arrival time, prompt and output length), by arrival,
    with their measured figures from the one view of them."""
    frame = run.sql(
        "SELECT * FROM requests_prefix_reuse WHERE NOT failed AND arrival_s IS NOT NULL "
        "AND input_tokens IS NOT NULL AND output_tokens > 0 "
        "ORDER BY arrival_s, request_id NULLS LAST, client_id NULLS LAST, client_index NULLS LAST"
    )
    if frame.height == 0:
        raise AnalysisError("replay needs requests with arrival time, input and output tokens; this run has none")
    return frame


def busy_intervals(measured: pl.DataFrame) -> list[tuple[float, float]] | None:
    """The intervals in which the engine held each request (queued to finished, its spans), where known."""
    if not {"queued_s", "finished_s"} <= set(measured.columns):
        return None
    rows = measured.drop_nulls(["queued_s", "finished_s"])
    if rows.height == 0:
        return None
    return list(zip(rows["queued_s"].to_list(), rows["finished_s"].to_list(), strict=True))


def fit_run(run: Run, measured: pl.DataFrame) -> tuple[StepCost, pl.DataFrame | None, Outside]:
    """The step cost (its stalls left out) and the time outside the engine, fitted on all of a run."""
    steps = log_steps(run)
    if steps.height >= 3:
        cost, stalls = fit_step_cost_without_stalls(steps, busy_intervals(measured))
    else:
        cost, stalls = fit_step_cost_from_requests(measured, drafting(run)), None
    return cost, stalls, outside_engine(measured)

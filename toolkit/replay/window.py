"""A window of a run replayed under other settings: an incident's requests under the setting its advice names
(docs/incidents.md, "What to change for it"). Every figure is an estimate, and the replay's own figure for the
window under the run's settings stands beside the measured one, so its error is read first.

Only the requests around the window are replayed: from the last moment before it at which the engine held no
request (the replay then starts from the state the engine was in), else from one window length before it on an
empty engine (said so), to the arrival of the last request before the window's own requests had all finished.
The step cost is fitted on the run's whole step log (its stalls left out and replayed as pauses), else on the
requests' own prefill and decode times; the time outside the engine is measured (``outside_engine``), its load term
on the replayed requests (``frontend_load``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from lltrace.errors import AnalysisError
from lltrace.replay.calibration import engine_config_for, frontend_load, prefix_hits
from lltrace.replay.replayer import Replayer, fit_run, measured_requests
from lltrace.store import Run


@dataclass(frozen=True)
class WindowCase:
    """One setting to replay the window under: engine settings (``overrides``, the replay's names), or the
    requests of one client left out (``without_client``: the others on an engine of their own)."""

    overrides: dict[str, Any] = field(default_factory=dict)
    without_client: str | None = None


METRICS = ("ttft", "tpot", "e2e", "queue")


@dataclass(frozen=True)
class WindowReplay:
    """The window's scored requests (those arriving in it, not of the spared client): the p90 of each metric
    (``METRICS``) as measured, as replayed under the run's settings, and as replayed under each case (None where
    none has the metric)."""

    requests: int
    measured: dict[str, float | None]
    replayed: dict[str, float | None]
    cases: list[dict[str, float | None]]
    replayed_from: float  # the first replayed arrival, on the run's clock
    replayed_to: float  # the last replayed arrival
    replayed_requests: int
    from_idle: bool  # the replay starts where the engine held no request
    calibration: str


def _p90(values: np.ndarray) -> float | None:
    v = values[~np.isnan(values)]
    return float(np.quantile(v, 0.9)) if v.size else None


def _slice(arrival: np.ndarray, ends: np.ndarray, t0: float, t1: float) -> tuple[int, int, bool]:
    """The replayed requests' index range (arrivals sorted): from the last arrival at or before the window's first
    at which every earlier request had finished, within one window length before it (else the first arrival in
    that length, on an empty engine), to the last arrival before the window's own requests had all finished."""
    inside = np.flatnonzero((arrival >= t0) & (arrival < t1))
    first, last = int(inside[0]), int(inside[-1])
    done_before = np.maximum.accumulate(np.concatenate(([-np.inf], ends[:-1])))  # latest end of the earlier ones
    idle = np.flatnonzero((done_before[: first + 1] <= arrival[: first + 1]) & (arrival[: first + 1] >= t0 - (t1 - t0)))
    start = int(idle[-1]) if idle.size else int(np.searchsorted(arrival, t0 - (t1 - t0)))
    stop = int(np.searchsorted(arrival, float(np.nanmax(ends[first : last + 1])), side="right"))
    return start, max(stop, last + 1), bool(idle.size)


def replay_window(run: Run, t0: float, t1: float, spare_client: str | None, cases: list[WindowCase]) -> WindowReplay:
    """The requests arriving in ``[t0, t1)`` (the run's clock) replayed under the run's settings and under each of
    ``cases``; scored on those not of ``spare_client``. Raises ``AnalysisError`` where the run has nothing to
    calibrate on or no such request."""
    with run.held():
        return _replay_window(run, t0, t1, spare_client, cases)


def _replay_window(run: Run, t0: float, t1: float, spare_client: str | None, cases: list[WindowCase]) -> WindowReplay:
    measured = measured_requests(run)
    if run.table("engine_steps").height < 3 and measured["decode_s"].drop_nulls().len() < 10:
        raise AnalysisError("no engine timings to calibrate the replay on")
    settings = engine_config_for(run)
    if settings["kv_blocks"]["value"] is None:
        bs = int(settings["block_size"]["value"])
        settings["kv_blocks"]["value"] = int(
            ((measured["input_tokens"] + measured["output_tokens"] + bs - 1) // bs).sum()
        )
    arrival = measured["arrival_s"].to_numpy()
    ends = arrival + measured["e2e_s"].fill_null(0.0).to_numpy()
    if not ((arrival >= t0) & (arrival < t1)).any():
        raise AnalysisError("no replayable request arrived in the window")
    start, stop, from_idle = _slice(arrival, ends, t0, t1)
    part = measured.slice(start, stop - start)
    hits = prefix_hits(run, measured)[0]
    cost, stalls, outside = fit_run(run, measured)

    def replayer(rows: pl.DataFrame, keep: np.ndarray) -> Replayer:
        lengths = (rows["input_tokens"].to_numpy(), rows["output_tokens"].to_numpy())
        return Replayer(lengths, None if hits is None else hits[start:stop][keep], settings)

    everyone = np.ones(part.height, dtype=bool)
    base = replayer(part, everyone)
    times = part["arrival_s"].to_numpy()
    first = base.run(times, base.config({}), cost, outside, stalled=stalls).requests
    outside = frontend_load(part, first, outside)
    client = part["client_id"].cast(pl.Utf8).to_numpy()
    scored = (times >= t0) & (times < t1) & (client != spare_client if spare_client is not None else everyone)

    def p90_of(frame: pl.DataFrame, keep: np.ndarray) -> dict[str, float | None]:
        rows = scored[keep]
        return {m: _p90(frame[f"{m}_s"].cast(pl.Float64).fill_null(np.nan).to_numpy()[rows]) for m in METRICS}

    results = []
    for case in cases:
        keep = everyone if case.without_client is None else client != case.without_client
        r = replayer(part.filter(pl.Series(keep)), keep)
        res = r.run(times[keep], r.config(case.overrides), cost, outside, stalled=stalls).requests
        results.append(p90_of(res, keep))
    replayed = base.run(times, base.config({}), cost, outside, stalled=stalls).requests
    return WindowReplay(
        requests=int(scored.sum()),
        measured=p90_of(part, everyone),
        replayed=p90_of(replayed, everyone),
        cases=results,
        replayed_from=float(times[0]),
        replayed_to=float(times[-1]),
        replayed_requests=part.height,
        from_idle=from_idle,
        calibration="the run's step log" if run.table("engine_steps").height >= 3 else "the requests' decode times",
    )

"""``replay``: a run's replay document: calibration, validation (its own error, first), baseline and what-ifs.

The run's requests come from the one view of their measured figures (``requests_prefix_reuse`` over
``requests_latency``: the client's latencies, else the engine's, labelled), so a run with engine spans alone
is validated like one with a bench file; every summary (measured or replayed) is the ``latency_stats`` macro
``requests_summary`` uses, so the measured means equal ``analyze``'s over the same requests.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from lltrace.documents import plain
from lltrace.errors import AnalysisError
from lltrace.ingest.targets import Target, as_store, open_run
from lltrace.physics.catalog import gpu_of_run
from lltrace.queries import thresholds
from lltrace.replay.calibration import (
    Outside,
    calibration_doc,
    counted_preemptions,
    drafting,
    engine_config_for,
    frontend_load,
    log_steps,
    match_decode,
    outside_change,
    outside_engine,
    prefix_hits,
    run_model,
)
from lltrace.replay.checks import check_against as score_against
from lltrace.replay.checks import drift_corrected, scheduler_check
from lltrace.replay.cost import (
    StepCost,
    fit_by_kind,
    fit_step_cost_from_requests,
    fit_step_cost_without_stalls,
    reference_step_cost,
    speed_change,
)
from lltrace.replay.replayer import Replayer, busy_intervals, fit_run, measured_requests
from lltrace.replay.scheduler import EngineConfig, ReplayResult
from lltrace.replay.scores import METRICS, QUANTITIES, scores, summarize
from lltrace.replay.whatifs import Baseline, Case, WhatIfCase, apply, what_if_sweeps
from lltrace.replay.whatifs import what_ifs as checked_what_ifs
from lltrace.store import Run, Store


def _makespan(frame: pl.DataFrame) -> float | None:
    """First arrival to last finish of a replay, seconds (None when nothing finished)."""
    ends = (frame["arrival_s"] + frame["e2e_s"]).drop_nulls()
    return None if ends.len() == 0 else float(ends.max()) - float(frame["arrival_s"].min())  # type: ignore[arg-type]


def overload_note(frame: pl.DataFrame, factor: float | None = None) -> list[str]:
    """A note when the engine could not keep up: the last request finishes long after the last arrival
    (``overload_factor`` of the thresholds times the arrivals' span)."""
    factor = thresholds()["overload_factor"] if factor is None else factor
    arrivals = float(frame["arrival_s"].max()) - float(frame["arrival_s"].min())  # type: ignore[arg-type]
    span = _makespan(frame)
    if span is None or arrivals <= 0 or span < factor * arrivals:
        return []
    return [
        f"overloaded: the last request finishes {span:,.0f} s after the first arrival, {span / arrivals:.1f}x the "
        f"{arrivals:,.0f} s over which requests arrive; the queue grows through the run and latencies are backlog "
        "(serve this trace with more engines, or replay a slice of it)"
    ]


def _outcome(res: ReplayResult) -> dict[str, Any]:
    summary = summarize(res.requests)
    return {
        "summary": summary,
        "makespan_s": _makespan(res.requests),
        "queue_median_s": summary["queue_s"]["p50"],
        "preemptions": res.preemptions,
        "prefill_tokens": res.prefill_tokens,
        "prompt_steps": res.prompt_steps,
        "steps": res.steps,
        "busy_s": res.busy_s,
        "max_running": res.max_running,
        "max_waiting": res.max_waiting,
        "not_finished": int((res.requests["status"] != "ok").sum()),
        "notes": res.notes + overload_note(res.requests),
    }


def _matched(
    replayer: Replayer,
    arrival: np.ndarray,
    cost: StepCost,
    out: Outside,
    stalled: pl.DataFrame | None,
    measured: pl.DataFrame,
    rows: np.ndarray,
) -> tuple[StepCost, dict[str, Any]]:
    """``cost`` matched to the decode time the requests in ``rows`` measured, replayed with every request
    (``match_decode``)."""
    decode = measured["decode_s"].to_numpy() if "decode_s" in measured.columns else np.full(measured.height, np.nan)
    ok = rows & ~np.isnan(decode) & (measured["output_tokens"].to_numpy() > 1)

    def replayed(c: StepCost) -> float:
        f = replayer.run(arrival, replayer.config({}), c, out, stalled=stalled).requests
        engine = (f["e2e_s"] - f["ttft_s"]).to_numpy()[ok] - (out.client_last - out.client_first)
        return float(np.nansum(engine))

    return match_decode(cost, replayed, float(decode[ok].sum()), int(ok.sum()))


def _cross_validation(
    run: Run,
    other_target: Target,
    measured: pl.DataFrame,
    replayer: Replayer,
    touched: np.ndarray,
    preemptions: float | None,
) -> dict[str, Any]:
    """This run's requests replayed with a step cost and outside-engine time fitted on another run (of the same
    engine, model and machine), scored against what this run measured."""
    other = open_run(other_target, run.store)
    if other.id == run.id:
        raise AnalysisError("--calibrate-on names the replayed run itself; give another run")
    other_measured = measured_requests(other)
    cost, stalls, out = fit_run(other, other_measured)
    other_replayer = Replayer(
        (other_measured["input_tokens"].to_numpy(), other_measured["output_tokens"].to_numpy()),
        prefix_hits(other, other_measured)[0],
        engine_config_for(other),
    )
    if other_replayer.settings["kv_blocks"]["value"] is not None:
        arrival_other = other_measured["arrival_s"].to_numpy()
        windows = _disturbances(other, stalls, float(arrival_other.min()))
        clean = ~_touched(other_measured, windows)
        cost = _matched(other_replayer, arrival_other, cost, out, stalls, other_measured, clean)[0]
        first = other_replayer.run(arrival_other, other_replayer.config({}), cost, out, stalled=stalls).requests
        out = frontend_load(other_measured, first, out)
    arrival = measured["arrival_s"].to_numpy()
    res = replayer.run(arrival, replayer.config({}), cost, out)
    scored = pl.Series(~touched)
    real, pred = summarize(measured.filter(scored)), summarize(res.requests.filter(scored))
    doc = scores(real, pred)
    left = int(touched.sum())
    return {
        "calibrated_on": other.id,
        "method": f"step cost and time outside the engine fitted on all of {other.id}; this run's requests "
        "replayed with its own settings; "
        + (f"{left} in an engine stall or profiler window left out, " if left else "")
        + f"{int((~touched).sum())} scored",
        "requests": int((~touched).sum()),
        "c0_s": cost.c0,
        "overhead_s": cost.overhead,
        "c_prefill_s_per_token": cost.c_prefill,
        "c_decode_s_per_token": cost.c_decode,
        "scale": cost.scale,
        "preemptions": {"replayed": res.preemptions, "measured": preemptions},
        "preemptions_mape": _mape_count(res.preemptions, preemptions),
    } | doc


def _mape_count(pred: float, real: float | None) -> float | None:
    return None if real is None or real == 0 else abs(pred - real) / real


def _disturbances(run: Run, stalls: pl.DataFrame | None, t0: float) -> list[tuple[float, float, str]]:
    """Windows in which the engine ran unlike itself, on the run clock: each stall of the step log (a profiler
    writing its trace, a long pause) and each profiler trace's window (every operator recorded: slower steps)."""
    out = []
    for r in [] if stalls is None else stalls.iter_rows(named=True):
        out.append((r["start_s"], r["start_s"] + r["wall_s"], f"engine stall at {r['start_s'] - t0:.2f} s"))
    profiled = run.table("engine_steps").filter((pl.col("source") == "profiler") & pl.col("start_s").is_not_null())
    if profiled.height:
        for part in profiled.partition_by("part"):
            lo, hi = float(part["start_s"].min()), float(part["end_s"].max())  # type: ignore[arg-type]
            out.append((lo, hi, f"profiler trace window at {lo - t0:.2f} s"))
    return out


def _touched(measured: pl.DataFrame, windows: list[tuple[float, float, str]]) -> np.ndarray:
    """For each request: whether it was in the engine (arrival to its measured end) during one of ``windows``."""
    start = measured["arrival_s"].to_numpy()
    end = start + measured["e2e_s"].fill_null(0.0).to_numpy()
    touched = np.zeros(start.size, dtype=bool)
    for lo, hi, _ in windows:
        touched |= (start < hi) & (end > lo)
    return touched


def _left_out(measured: pl.DataFrame, touched: np.ndarray, after: np.ndarray) -> dict[str, Any] | None:
    """The requests after the split that a disturbance touched (left out of the score), by id."""
    out = touched & after
    if not out.any():
        return None
    ids = measured["request_id"].to_list() if "request_id" in measured.columns else [None] * measured.height
    return {
        "requests": int(out.sum()),
        "why": "in the engine during an engine stall or a profiler trace window, which the replay fitted before "
        "it does not know",
        "request_ids": [ids[i] for i in np.flatnonzero(out)],
    }


def _validation(
    measured: pl.DataFrame,
    scored: np.ndarray,
    holdout: float,
    replay_held_out: Callable[[], pl.DataFrame],
    left_out: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The scored requests' replayed figures (``replay_held_out()``: every request replayed with what was
    known before the first of them) against their measured ones; None when nothing was measured to score
    against. A figure measured under ``mape_floor_s`` (1 ms) is scored by its absolute error, not MAPE."""
    mask = pl.Series(scored)
    real_held = measured.filter(mask)
    real_s = summarize(real_held)
    if all(real_s[m]["mean"] is None for m in METRICS):
        return None  # an arrival trace: nothing measured to score against
    pred_s = summarize(replay_held_out().filter(mask))
    return {
        "method": f"step cost fitted on data before the arrival of the last {holdout:.0%} of the requests no "
        "engine stall or profiler window touched (stalls after it unknown to the replay); "
        f"all requests replayed; the {real_held.height} requests arriving after it scored",
        "requests": real_held.height,
        "left_out": left_out,
    } | scores(real_s, pred_s)


def replay(
    path_or_run: Target,
    *,
    what_ifs: dict[str, float | str] | list[tuple[str, float | str]] | list[str] | None = None,
    store: Store | str | os.PathLike[str] | None = None,
    holdout: float = 0.3,
    gpu: str | None = None,
    quant: str = "bf16",
    kv_dtype: str = "bf16",
    reference: str | None = None,
    model: str | None = None,
    calibrate_on: Target | None = None,
    check_against: Target | None = None,
) -> dict[str, Any]:
    """The replay document (``lltrace replay --json``) of a run: a ``Run``, a stored run's id, or its paths.

    Calibration fits the step cost (``lltrace.replay.cost``) to the run's ``engine_steps`` from the engine
    log, or without one to the requests' own prefill and decode times. Validation fits on the first
    ``1 - holdout`` of the requests (by arrival) only, replays every request (so the queue the held-out
    requests meet builds up as it did) and scores the held-out requests against their measured latencies.
    The baseline and each what-if use the fit on all steps; what-if figures are estimates. ``what_ifs`` is a
    ``{key: value}`` dict, ``(key, value)`` pairs or ``KEY=VALUE`` texts (a key may repeat: one case each;
    keys: ``lltrace.replay.whatifs.WHAT_IF_KEYS``). ``model`` (else the reference's, else the model the server
    log names, when the catalog knows it) lets ``gpu``, ``weights``, ``kv_dtype`` and ``tp`` move the KV
    capacity with the memory the weights leave, and is needed by ``tp`` and ``kv_memory_gb``. Engine stalls
    in the step log (a step far slower than its tokens explain, such as a profiler writing its trace) are
    left out of the fit and replayed as pauses at their measured times; the validation uses only those
    before the split. ``gpu`` (else the GPU detected in the run), ``quant`` and ``kv_dtype`` describe the
    recorded run. ``reference`` (``"MODEL@GPU"``) replaces calibration with the roofline's step cost, for
    arrival traces with no timings (Azure, Mooncake, BurstGPT); the validation then scores it where the run
    has measured latencies, and is absent where it has none. The document is kept in the store as the run's
    latest replay (``lltrace report`` shows it). ``calibrate_on`` (another run of the same engine, model and
    machine) adds ``cross_validation``: the step cost and the time outside the engine fitted on all of that run,
    this run's requests replayed with this run's settings and scored, queue and preemptions included.
    ``check_against`` (the same workload really run with the what-if's setting) scores each what-if against it
    (``whatifs[].check``: ``lltrace.replay.checks.check_against``), the host's speed difference taken out.
    """
    cases = checked_what_ifs(what_ifs)  # every case checked before any work
    if check_against is not None and not cases:
        raise AnalysisError("--check-against scores a what-if: give the --what-if the real run was made with")
    run = open_run(path_or_run, as_store(store))
    with run.held():  # one connection for the dozen tables and views read below
        steps = log_steps(run)
        from_log = steps.height >= 3
        measured = measured_requests(run)
        settings = engine_config_for(run)
        ref = None
        if reference:
            ref_model, at, ref_gpu = reference.partition("@")
            if not at:
                raise AnalysisError(f"--reference {reference!r}: expected MODEL@GPU, e.g. llama-2-7b@A100-80GB")
            inp, outp = measured["input_tokens"].cast(pl.Float64), measured["output_tokens"].cast(pl.Float64)
            context = float(inp.mean() + outp.mean() / 2)  # type: ignore[operator]
            ref = reference_step_cost(
                ref_model,
                ref_gpu,
                quant=quant,
                kv_dtype=kv_dtype,
                mean_context=context,
                block_size=int(settings["block_size"]["value"]),
            )
            gpu = gpu or ref[2]["gpu"]
            if settings["kv_blocks"]["value"] is None:
                settings["kv_blocks"] = {
                    "value": ref[1],
                    "origin": f"reference: {ref[2]['gpu']} memory x 0.9 less the weights",
                }
        elif not from_log and measured["decode_s"].drop_nulls().len() < 10:
            raise AnalysisError(
                "this run has no engine timings to calibrate on (no step log, no per-request decode times); "
                "give a reference, e.g. --reference llama-2-7b@A100-80GB"
            )
        if settings["kv_blocks"]["value"] is None:
            # no source states the KV cache: room for every request at once (the replay cannot show KV pressure)
            bs = int(settings["block_size"]["value"])
            whole = (measured["input_tokens"] + measured["output_tokens"] + bs - 1) // bs
            settings["kv_blocks"] = {
                "value": int(whole.sum()),
                "origin": "assumed: room for every request at once (no source states the KV cache size: give the "
                "server log, or --what-if kv_blocks=N); the replay cannot show KV pressure or preemption",
            }

        arrival = measured["arrival_s"].to_numpy()
        lengths = (measured["input_tokens"].to_numpy(), measured["output_tokens"].to_numpy())
        t0 = float(arrival.min())
        stalls = early_stalls = None
        busy = busy_intervals(measured)
        if ref is None:
            cost, stalls, outside = fit_run(run, measured)  # all of the run: the baseline and the what-ifs
        else:
            outside = outside_engine(measured)
        clean_steps = steps
        if stalls is not None and stalls.height:
            clean_steps = steps.with_row_index("row").filter(~pl.col("row").is_in(stalls["row"].implode())).drop("row")
        disturbed = _disturbances(run, stalls, t0)
        # the last `holdout` of the requests no disturbance touched are scored; everything before the first of
        # them calibrates; disturbed requests after it are left out of the score (listed)
        touched = _touched(measured, disturbed)
        clean = np.flatnonzero(~touched)
        pool = clean if clean.size >= 10 else np.arange(len(arrival))
        first_scored = pool[min(pool.size - 1, int(round((1 - holdout) * pool.size)))]
        split = float(arrival[first_scored])
        scored = (arrival >= split) & (~touched if pool is clean else np.ones_like(touched))
        if ref is not None:
            early = cost = ref[0]
            source = f"reference {ref[2]['model']} on {ref[2]['gpu']} (roofline, not fitted to this run)"
        elif from_log:
            early, early_stalls = fit_step_cost_without_stalls(steps.filter(pl.col("start_s") < split), busy)
            logs = sorted(set(steps["detection"].drop_nulls())) if "detection" in steps.columns else []
            source = f"engine_steps ({', '.join(logs) or 'the engine step log'})"
        else:
            early = fit_step_cost_from_requests(measured.filter(pl.col("arrival_s") < split), drafting(run))
            source = (
                "per-request decode times (no step log): decode steps, mean decode batch, prompts prefilled meanwhile"
            )
        early_rows = (measured["arrival_s"] < split).to_numpy()
        outside_early = outside_engine(measured.filter(pl.Series(early_rows)))
        hits, hits_basis = prefix_hits(run, measured)
        replayer = Replayer(lengths, hits, settings)
        fitted, match, early_match = cost, None, None
        if ref is None:  # each fit's level set where the replay meets its calibration requests' decode time
            early, early_match = _matched(
                replayer, arrival, early, outside_early, early_stalls, measured, early_rows & ~touched
            )
            cost, match = _matched(replayer, arrival, cost, outside, stalls, measured, ~touched)
        # the frontend's load term, measured against the replay's own step waits (calibration requests only)
        first = replayer.run(arrival, replayer.config({}), early, outside_early, stalled=early_stalls).requests
        outside_early = frontend_load(
            measured.filter(pl.Series(early_rows)), first.filter(pl.Series(early_rows)), outside_early
        )
        first = replayer.run(arrival, replayer.config({}), cost, outside, stalled=stalls).requests
        outside = frontend_load(measured, first, outside)

        def held_out() -> pl.DataFrame:
            # only what was known before the split: the early fit and the stalls measured before it
            return replayer.run(arrival, replayer.config({}), early, outside_early, stalled=early_stalls).requests

        validation = _validation(measured, scored, holdout, held_out, _left_out(measured, touched, arrival >= split))
        if validation is not None:
            validation["decode_match"] = early_match
            validation["outside_change"] = outside_change(measured, arrival < split, scored)
        if validation is not None and from_log:
            until = float((measured["arrival_s"] + measured["e2e_s"].fill_null(0.0)).filter(pl.Series(scored)).max())
            validation["speed_change"] = speed_change(steps, split, until, disturbed, t0)
            if validation["speed_change"] is not None:
                ratio = validation["speed_change"]["ratio"]
                validation["drift"] = ratio
                validation["drift_corrected"] = drift_corrected(
                    measured, scored, replayer, arrival, early, outside_early, early_stalls, ratio, split
                )
        base = replayer.run(arrival, replayer.config({}), cost, outside, stalled=stalls)
        checked = scheduler_check(steps, measured, replayer, cost) if from_log and ref is None else None
        baseline = _outcome(base) | {"measured": summarize(measured), "measured_preemptions": counted_preemptions(run)}

        the_model, model_origin = run_model(run, model, ref[2]["model"] if ref is not None else None)
        start = Baseline(
            arrival=arrival,
            cost=cost,
            kv_blocks=int(settings["kv_blocks"]["value"]),
            block_size=int(settings["block_size"]["value"]),
            has_prefix_hits=hits is not None,
            gpu=gpu_of_run(run.metadata, gpu)[0],
            quant=quant,
            kv_dtype=kv_dtype,
            tp=int(settings["tp"]["value"]),
            model=the_model,
            drafting=drafting(run),
        )
        results = [_what_if(w, start, replayer, outside, stalls, baseline) for w in cases]
        if check_against is not None:
            real = open_run(check_against, run.store)
            for w, res in zip(cases, results, strict=True):
                case = apply(w, start)
                cfg = replayer.config(case.overrides)

                def at(k: float, case: Case = case, cfg: EngineConfig = cfg) -> ReplayResult:
                    return replayer.run(case.arrival, cfg, case.cost.scaled(k), outside, case.prefix_cache, stalls)

                res["check"] = score_against(real, measured, steps, at)
        sweeps = what_if_sweeps(cases)
        cross = None
        if calibrate_on is not None:
            cross = _cross_validation(run, calibrate_on, measured, replayer, touched, counted_preemptions(run))
        doc = {
            "run": run.id,
            "requests": {
                "replayed": measured.height,
                "left_out": run.table("requests").height - measured.height,
                "why_left_out": "no arrival time, no input length, or no output tokens (failed or unknown)",
            },
            "engine": settings,
            "model": None if the_model is None else {"name": the_model.name, "origin": model_origin},
            "calibration": calibration_doc(source, cost, outside, stalls, t0, settings)
            | {"fit_by_kind": fit_by_kind(clean_steps, fitted) if from_log and ref is None else None}
            | {"decode_match": match},
            "validation": validation,
            "scheduler_check": checked,
            "cross_validation": cross,
            "prefix_cache": None
            if hits is None
            else {
                "basis": hits_basis,
                "hit_tokens": int(hits.sum()),
                "share_of_prompt_tokens": float(hits.sum() / max(1, int(lengths[0].sum()))),
            },
            "baseline": baseline,
            "whatifs": results,
            "sweeps": sweeps,
        }
        doc = plain(doc, "replay")
        run.store.save_replay(run.id, doc)
        return doc


def _what_if(
    w: WhatIfCase,
    start: Baseline,
    replayer: Replayer,
    outside: Outside,
    stalls: pl.DataFrame | None,
    baseline: dict[str, Any],
) -> dict[str, Any]:
    case = apply(w, start)
    cfg = replayer.config(case.overrides)
    res = _outcome(replayer.run(case.arrival, cfg, case.cost, outside, case.prefix_cache, stalled=stalls)) | case.extra
    res["kv_blocks"] = cfg.num_blocks
    res["what_if"] = w.settings()
    res["asked"] = w.asked
    res["basis"] = "estimated"
    res["delta"] = {
        m: {
            s: (
                None
                if res["summary"][m][s] is None or baseline["summary"][m][s] is None
                else res["summary"][m][s] - baseline["summary"][m][s]
            )
            for s in QUANTITIES
        }
        for m in METRICS
    }
    return res

"""What the replay takes from the run besides the step cost: the engine's limits (from its log, inferred, or
vLLM's defaults, each with its origin), the model, prefix-cache hits, the engine's own preemption count, and
the time a request spends outside the engine (frontend, network)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import polars as pl

from lltrace.physics.catalog import Model, find_model, model_or_error
from lltrace.replay.cost import StepCost, open_at
from lltrace.store import Run


def _setting(value: Any, origin: str) -> dict[str, Any]:
    return {"value": value, "origin": origin}


# What the replay assumes where no source, engine default or step log tells a setting (labelled as such).
_ASSUMED = {
    "block_size": (16, "assumed: vLLM's block size on GPUs (no source states it)"),
    "max_num_seqs": (256, "assumed: vLLM's default on GPUs under 70 GiB (no source states it)"),
    "max_num_batched_tokens": (8192, "assumed: vLLM's default on large GPUs (no source states it)"),
    "chunked_prefill": (True, "assumed: vLLM V1's default (no source states it)"),
    "tensor_parallel_size": (1, "assumed: the sources name no TP degree"),
}


def engine_config_for(run: Run) -> dict[str, dict[str, Any]]:
    """The replayed engine's limits, each with where it came from: the run's ``engine_config`` (the one
    resolution of the engine's settings: stated, derived, engine default or inferred), else the replay's
    labelled assumption; the KV capacity stays unknown (None) where nothing states it."""
    known = {r["setting"]: r for r in run.table("engine_config").to_dicts()}

    def get(setting: str, key: str | None = None) -> dict[str, Any]:
        if setting in known:
            r = known[setting]
            value = bool(r["value"]) if setting in ("chunked_prefill", "long_prefill_adaptive") else int(r["value"])
            return _setting(value, f"{r['basis']}: {r['origin']}")
        if setting in _ASSUMED:
            return _setting(*_ASSUMED[setting])
        return _setting(None, "unknown")

    out = {k: get(k) for k in ("block_size", "kv_blocks", "max_num_seqs", "max_num_batched_tokens", "chunked_prefill")}
    out["tp"] = get("tensor_parallel_size")
    # the cap on one request's prompt chunk a step, where the run's engine states or defaults one
    out |= {k: get(k) for k in ("long_prefill_token_threshold", "long_prefill_adaptive") if k in known}
    if "data_parallel_size" in known:  # engines behind one load balancer, each with the limits above
        out["data_parallel_size"] = get("data_parallel_size")
    spec = _speculative(run)
    if spec:  # the budget the scheduler charges each request for its drafter (0 where no rule is known)
        slots = known.get("draft_slots")
        spec["draft_slots"] = (
            _setting(slots["value"], f"{slots['basis']}: {slots['origin']}")
            if slots
            else _setting(0.0, "none: no known rule for this engine, version or method (0 taken)")
        )
    return out | spec


def _speculative(run: Run) -> dict[str, dict[str, Any]]:
    """Where the run decoded speculatively (``engine_speculative``): the tokens a decoding request gained a step
    and the draft tokens each such step verified, from the run's own counts; nothing where it did not."""
    spec = run.sql("SELECT * FROM engine_speculative")
    if spec.height == 0 or not spec["draft_tokens"][0]:
        return {}
    r = spec.row(0, named=True)
    if r["tokens_per_decode_step"] is not None:  # every decoding request's steps counted by the iteration log
        steps, where = r["decode_request_steps"], "the iteration log's decoding requests"
        gained = _setting(r["tokens_per_decode_step"], f"measured: 1 + accepted tokens / {where} ({r['basis']})")
    elif r["acceptance_length"] is not None:  # no step log: every decoding step drafted (draft models, EAGLE, MTP)
        steps, where = r["drafts"], "drafts"
        gained = _setting(r["acceptance_length"], f"vLLM's mean acceptance length ({r['basis']}): every step drafted")
    else:
        return {}
    verified = _setting(r["draft_tokens"] / steps, f"measured: draft tokens / {where} ({r['basis']})")
    return {"tokens_per_decode_step": gained, "draft_tokens_per_decode_step": verified}


def drafting(run: Run) -> tuple[float, float]:
    """The tokens a decoding request gained a step and the draft tokens each such step verified (1 and 0 where
    the run did not decode speculatively)."""
    spec = _speculative(run)
    return (
        (spec["tokens_per_decode_step"]["value"], spec["draft_tokens_per_decode_step"]["value"]) if spec else (1.0, 0.0)
    )


def run_model(run: Run, model: str | None, reference_model: str | None) -> tuple[Model | None, str | None]:
    """The catalog model of the run: the option, the reference, else the model the server log names."""
    if model:
        return model_or_error(model), "option --model"
    if reference_model:
        return model_or_error(reference_model), "reference"
    for src in run.metadata.get("sources", []):
        named = (src.get("engine_config") or {}).get("model")
        if named:
            found = find_model(named) or find_model(named.rstrip("/").rsplit("/", 1)[-1])
            if found:
                return found, f"server log args: {named}"
    return None, None


def log_steps(run: Run) -> pl.DataFrame:
    """The engine's own logged steps (``engine_steps`` from its iteration log), each with ``hit_prefills``: the
    requests whose prompt the step started computing on a prefix-cache hit, where ``requests_cached_tokens``
    places them (0 elsewhere; every step 0 where the log cannot place them)."""
    steps = run.table("engine_steps").filter(pl.col("source") == "log")
    if steps.height == 0:
        return steps.with_columns(pl.lit(0, dtype=pl.Int64).alias("hit_prefills"))
    hits = run.sql(
        "SELECT step_id, count(*) AS hit_prefills FROM requests_cached_tokens "
        "WHERE step_id IS NOT NULL AND cached_tokens > 0 GROUP BY step_id"
    )
    return steps.join(hits.cast({"step_id": steps.schema["step_id"]}), on="step_id", how="left").with_columns(
        pl.col("hit_prefills").fill_null(0).cast(pl.Int64)
    )


def prefix_hits(run: Run, measured: pl.DataFrame) -> tuple[np.ndarray | None, str | None]:
    """Prompt tokens served from the prefix cache per request, and how that is known.

    The engine's own ``cached_tokens`` where the sources give them or its iteration log lets them be derived
    (``requests_latency.cached_basis``); else the leading prefix blocks an earlier
    request already had (``requests_prefix_reuse``: the one definition of prefix reuse; an upper bound that
    assumes the cache kept every block) times the source's block size. None where the sources say nothing
    about reuse.
    """
    if measured["cached_tokens"].null_count() < measured.height:
        bases = sorted(set(measured["cached_basis"].drop_nulls().to_list()))
        known = measured.height - measured["cached_tokens"].null_count()
        how = {
            "measured": "measured (engine cached tokens)",
            "derived": "derived (cached tokens from the engine's iteration log: requests_cached_tokens)",
        }
        label = " and ".join(how[b] for b in bases)
        if known < measured.height:
            label += f"; {measured.height - known} of {measured.height} requests without a figure replayed uncached"
        return measured["cached_tokens"].fill_null(0).to_numpy(), label
    if measured["prefix_blocks"].null_count() == measured.height:
        return None, None
    block = next(
        (int(src["prefix_block_tokens"]) for src in run.metadata.get("sources", []) if src.get("prefix_block_tokens")),
        None,
    )
    if not block:
        return None, None
    hits = measured["prefix_blocks_reused"].fill_null(0).to_numpy() * block
    return hits, f"estimated: leading {block}-token prefix blocks an earlier request had (requests_prefix_reuse)"


def counted_preemptions(run: Run) -> float | None:
    """The engine's cumulative preemption counter at its last reading (metrics or stats log), else NULL."""
    stats = run.table("engine_stats")
    if stats.height and "preemptions_total" in stats.columns and stats["preemptions_total"].null_count() < stats.height:
        return float(stats["preemptions_total"].max())  # type: ignore[arg-type]
    return None


@dataclass(frozen=True)
class Outside:
    """Time a request spends outside the engine's scheduler, as measured (never fitted to the latencies).

    ``frontend``: from the frontend's arrival to the engine core's queue when the engine is idle
    (tokenisation, IPC); while the engine is stepping, a request also waits for the step to end, which the
    scheduler model simulates itself. ``per_request_in_engine``: how much longer the frontend takes for each
    request the engine holds when one arrives (a frontend sharing CPUs with the engine, streaming the others'
    tokens: :func:`frontend_load`). ``client_first`` and ``client_last``: what the client adds to the
    engine's TTFT and e2e (HTTP, network, detokenisation and streaming; 0 where only the engine measured).
    Medians over the calibration requests; ``basis`` says what each was measured on.
    """

    frontend: float = 0.0
    client_first: float = 0.0
    client_last: float = 0.0
    basis: str = "not measured: no source times the frontend"
    per_request_in_engine: float = 0.0
    load_basis: str | None = None


def outside_engine(requests: pl.DataFrame) -> Outside:
    """:class:`Outside` measured on ``requests`` (the calibration window's), zeros where no source times it.

    The frontend time is the engine's own span times, queued minus arrival, over requests that arrived while
    no other request was in the engine (queued to finished): at an idle engine the core takes a request as
    soon as the frontend hands it over. Without such arrivals, the fastest tenth of all requests' frontend
    times. The client's share is the client's TTFT and e2e minus the engine's, where both measured.
    """
    out: dict[str, float] = {}
    why = []
    if {"arrival_s", "queued_s", "finished_s"} <= set(requests.columns):
        rows = requests.drop_nulls(["arrival_s", "queued_s", "finished_s"])
        if rows.height:
            arrival, queued = rows["arrival_s"].to_numpy(), rows["queued_s"].to_numpy()
            lead = queued - arrival
            idle = open_at(arrival, queued, rows["finished_s"].to_numpy()) == 0
            if idle.sum() >= 3:
                out["frontend"] = float(np.median(lead[idle]))
                why.append(f"frontend: median over the {int(idle.sum())} requests that arrived at an idle engine")
            else:
                out["frontend"] = float(np.quantile(lead, 0.1))
                why.append("frontend: no three arrivals at an idle engine; the fastest tenth of all requests")
    for key, client, engine in (("client_first", "ttft_s", "server_ttft_s"), ("client_last", "e2e_s", "server_e2e_s")):
        if {client, engine} <= set(requests.columns):
            d = (requests[client] - requests[engine]).drop_nulls()
            if d.len():
                out[key] = max(0.0, float(d.median()))  # type: ignore[arg-type]
    if "client_first" in out:
        why.append(f"client: median client minus engine TTFT and e2e over {requests.height} requests")
    if not out:
        return Outside()
    return Outside(**out, basis="; ".join(why) or "engine spans only")


def rates(cost: StepCost, per_step: float = 1.0, verified: float = 0.0) -> dict[str, float | None]:
    """A step cost read as the figures people quote: one decode step of one request over the tokens it gains
    (``per_step``; with speculative decoding the step also verifies ``verified`` draft tokens), and prefill
    tokens/s."""
    return {
        "decode_s_per_token_batch1": (cost.c0 + cost.overhead + cost.c_decode + verified * cost.c_prefill) / per_step,
        "prefill_tokens_per_s": 1.0 / cost.c_prefill if cost.c_prefill > 0 else None,
    }


def frontend_load(requests: pl.DataFrame, replayed: pl.DataFrame, out: Outside) -> Outside:
    """``out`` with its ``per_request_in_engine``, measured on the engine's spans of ``requests`` (the
    calibration window's).

    A request's measured frontend time (queued minus arrival) is its idle-engine frontend time, the wait for
    the running step to end (taken from ``replayed``: the same requests replayed without this term, row for
    row) and what is left; that rest, against the number of requests the engine held when it arrived
    (measured: queued to finished), gives the extra time per held request as the median of rest per held
    request weighted by the held count (least absolute deviations through 0: robust to a stalled frontend).
    Zero where the spans do not time the frontend or fewer than 10 requests met a busy engine.
    """
    need = {"arrival_s", "queued_s", "finished_s"}
    if not need <= set(requests.columns) or "wait_s" not in replayed.columns:
        return out
    ok = (
        requests["arrival_s"].is_not_null() & requests["queued_s"].is_not_null() & requests["finished_s"].is_not_null()
    ).to_numpy() & replayed["wait_s"].is_not_null().to_numpy()
    arrival = requests["arrival_s"].to_numpy()[ok]
    queued = requests["queued_s"].to_numpy()[ok]
    held = open_at(arrival, queued, requests["finished_s"].to_numpy()[ok])
    rest = (queued - arrival) - out.frontend - replayed["wait_s"].to_numpy()[ok]
    busy = held > 0
    if busy.sum() < 10:
        return out
    ratio, weight = rest[busy] / held[busy], held[busy]
    order = np.argsort(ratio)
    cum = np.cumsum(weight[order])
    k = float(ratio[order][np.searchsorted(cum, cum[-1] / 2)])
    if k <= 0:
        return replace(out, load_basis=f"no frontend slowdown with load over {int(busy.sum())} busy arrivals")
    return replace(
        out,
        per_request_in_engine=k,
        load_basis=f"frontend time beyond the idle engine's and the step wait, per request the engine held, over "
        f"{int(busy.sum())} arrivals at a busy engine (weighted median)",
    )


MATCH_BOUNDS = (0.5, 2.0)
"""The scales :func:`match_decode` may apply: a step cost off by more than 2x is reported, not rescaled."""
_MATCH_TOLERANCE = 0.003  # the replayed decode time within 0.3 % of the measured
_MATCH_EVALUATIONS = 12


def match_decode(
    cost: StepCost, replayed_decode: Callable[[StepCost], float], measured_decode: float, requests: int
) -> tuple[StepCost, dict[str, Any]]:
    """``cost`` scaled so that the replay reproduces the decode time its calibration requests measured, and what
    was done (``decode_match`` of the document's calibration).

    The step cost is fitted to single steps (the engine's log) or to each request's decode time against the
    batch it measured beside it; the replay then runs its own scheduler, whose batches follow from the steps it
    prices. Near the engine's capacity a few percent off in the price moves the replayed batch, which moves the
    steps again: on A_baseline at 40 req/s a 5 % higher step cost replays a 25 % longer decode. So the fit's shape
    is kept and its level set where the replay meets the run: every time term x k, with k such that the summed
    engine decode time (first to last token) the replay gives ``requests`` calibration requests equals their
    measured sum (``replayed_decode(cost)`` and ``measured_decode``). Only calibration requests are used. k is
    searched on a log scale within ``MATCH_BOUNDS`` (the replayed time grows with k); where the replay cannot
    meet the measured time there, the cost is kept as fitted and the reason given.
    """
    if requests < 10 or not measured_decode > 0:
        return cost, {"scale": 1.0, "basis": f"not matched: {requests} calibration requests with a decode time"}

    def gap(x: float) -> float:  # log of replayed over measured at scale e^x
        return float(np.log(replayed_decode(cost.scaled(float(np.exp(x)))) / measured_decode))

    bounds = np.log(MATCH_BOUNDS[0]), np.log(MATCH_BOUNDS[1])
    a, fa = 0.0, gap(0.0)
    unscaled, evaluations = float(np.exp(fa)), 1
    x, f = a, fa
    if abs(fa) > _MATCH_TOLERANCE:
        # a bracket: a step of the error against it (the replayed time grows at least in proportion to the cost
        # near capacity, so this lands near or past the root), widened to the bound while it falls short
        b = float(np.clip(-fa, *bounds))
        fb, evaluations = gap(b), evaluations + 1
        while fb * fa > 0 and b not in bounds and evaluations < _MATCH_EVALUATIONS:
            a, fa = b, fb
            b = float(np.clip(2 * b, *bounds))
            fb, evaluations = gap(b), evaluations + 1
        if fb * fa > 0 and abs(fb) > _MATCH_TOLERANCE:
            why = (
                f"not matched: the replay gives x{unscaled:.2f} the measured decode time, and no scale between "
                f"x{MATCH_BOUNDS[0]:g} and x{MATCH_BOUNDS[1]:g} meets it"
            )
            return cost, {"scale": 1.0, "replayed_over_measured": unscaled, "requests": requests, "basis": why}
        x, f = b, fb
        side = 0  # false position with the Illinois rule on the bracket (a, b)
        while abs(f) > _MATCH_TOLERANCE and evaluations < _MATCH_EVALUATIONS:
            x = (a * fb - b * fa) / (fb - fa)
            f, evaluations = gap(x), evaluations + 1
            if f * fb > 0:
                b, fb = x, f
                fa, side = (fa / 2 if side == -1 else fa), -1
            else:
                a, fa = x, f
                fb, side = (fb / 2 if side == 1 else fb), 1
    k = float(np.exp(x))
    return cost.scaled(k), {
        "scale": k,
        "replayed_over_measured": unscaled,
        "requests": requests,
        "basis": f"the fitted step cost x{k:.3f}, with which the replay gives the {requests} calibration requests' "
        f"measured decode time within {abs(np.expm1(f)):.1%} (x{unscaled:.2f} as fitted)",
    }


def calibration_doc(
    source: str,
    cost: StepCost,
    outside: Outside,
    stalls: pl.DataFrame | None,
    t0: float,
    settings: dict[str, dict[str, Any]] | None = None,
) -> dict:
    """The replay document's ``calibration``: where the step cost came from, its terms as the replay uses them (after
    ``match_decode``), the time outside the engine, the fit's quality and the stalls left out of it (its rates
    read with the engine's speculative decoding, where ``settings`` have it)."""
    spec = {
        k: (settings or {}).get(k, {}).get("value") for k in ("tokens_per_decode_step", "draft_tokens_per_decode_step")
    }
    return {
        "source": source,
        "form": "step_s = c0 + overhead + c_prefill * prefill_tokens + c_decode * decode_tokens + c_hit * hit_prefills",
        "c0_s": cost.c0,
        "overhead_s": cost.overhead,
        "c_prefill_s_per_token": cost.c_prefill,
        "c_decode_s_per_token": cost.c_decode,
        "c_hit_s_per_hit_prefill": cost.c_hit,
        "steps": cost.steps,
        "outside_engine_s": {
            "frontend": outside.frontend,
            "client_first_token": outside.client_first,
            "client_last_token": outside.client_last,
            "frontend_per_request_in_engine": outside.per_request_in_engine,
            "basis": outside.basis,
            "load_basis": outside.load_basis,
        },
        "r2": cost.r2,
        "step_mape": cost.mape,
        "rates": rates(cost, spec["tokens_per_decode_step"] or 1.0, spec["draft_tokens_per_decode_step"] or 0.0),
        "stalls": None
        if stalls is None
        else [
            {
                "start_s": r["start_s"] - t0,
                "duration_s": r["excess_s"],
                "evidence": f"step {r['step_id']} took {r['wall_s']:.3f} s, {r['predicted_s'] * 1e3:.1f} ms "
                "predicted from its tokens; left out of the fit, replayed as a pause at its time",
            }
            for r in stalls.iter_rows(named=True)
        ],
    }


def outside_change(measured: pl.DataFrame, before: np.ndarray, after: np.ndarray) -> dict[str, Any] | None:
    """How the time outside the engine changed in the scored window (``after``) against the calibration requests
    (``before``): the median frontend time (queued minus arrival, the engine's spans) and the median client share
    of TTFT (client minus engine TTFT), each side's median and their ratio. The replay takes both as measured
    before the split; a load generator or a frontend competing for the host's cores in the scored window (AIPerf's
    workers and its /metrics scraper on the engine's two cores: run L_aiperf, frontend x1.44, client x1.80) shows
    here, beside the steps' own change (``speed_change``). A diagnosis of the validation, never an input to the
    replay. None where neither is timed on both sides."""
    out: dict[str, Any] = {}
    for key, late, early in (("frontend", "queued_s", "arrival_s"), ("client_first_token", "ttft_s", "server_ttft_s")):
        if not {late, early} <= set(measured.columns):
            continue
        gap = (measured[late] - measured[early]).to_numpy().astype(float)
        sides = [gap[mask & np.isfinite(gap)] for mask in (before, after)]
        if min(s.size for s in sides) < 5:
            continue
        b, a = (float(np.median(s)) for s in sides)
        out[key] = {"before_s": b, "after_s": a, "ratio": a / b if b > 0 else None}
    return out or None

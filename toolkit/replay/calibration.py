"""What the replay takes from the run besides the step cost: the engine's limits (from its log, inferred, or
vLLM's defaults, each with its origin), the model, prefix-cache hits, the engine's own preemption count, and
the time a request spends outside the engine (frontend, network)."""

from __future__ import annotations

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
            value = bool(r["value"]) if setting == "chunked_prefill" else int(r["value"])
            return _setting(value, f"{r['basis']}: {r['origin']}")
        if setting in _ASSUMED:
            return _setting(*_ASSUMED[setting])
        return _setting(None, "unknown")

    out = {k: get(k) for k in ("block_size", "kv_blocks", "max_num_seqs", "max_num_batched_tokens", "chunked_prefill")}
    out["tp"] = get("tensor_parallel_size")
    return out


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


def rates(cost: StepCost) -> dict[str, float | None]:
    """A step cost read as the figures people quote: one decode step of one request, and prefill tokens/s."""
    return {
        "decode_s_per_token_batch1": cost.c0 + cost.overhead + cost.c_decode,
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

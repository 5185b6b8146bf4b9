"""What the replay takes from the run besides the step cost: the engine's limits (from its log, inferred, or
vLLM's defaults, each with its origin), the model, prefix-cache hits, the engine's own preemption count, and
the time a request spends outside the engine (frontend, network)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from lltrace.physics.catalog import Model, find_model, model_or_error
from lltrace.replay.cost import StepCost, nonneg_lstsq
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


def decoding_at(times: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """How many of the windows [start, end) are open at each of ``times``."""
    return (np.searchsorted(np.sort(start), times, "right") - np.searchsorted(np.sort(end), times, "right")).astype(
        float
    )


@dataclass(frozen=True)
class Outside:
    """Time a request spends outside the engine: ``pre + per_decoding * (requests decoding when it arrives)``
    before its first token, ``post`` after its last one (medians / least squares over the run's requests)."""

    pre: float = 0.0
    per_decoding: float = 0.0
    post: float = 0.0


def outside_engine(requests: pl.DataFrame) -> Outside:
    """Fit :class:`Outside` to measured requests; zeros where the sources do not measure it.

    Client-measured TTFT and e2e include the HTTP/frontend path (tokenisation, detokenisation, streaming)
    that the scheduler model does not simulate. Where the frontend shares CPUs with the engine it slows
    with load, so the time before the first token is regressed on the number of requests decoding (and so
    streaming tokens through the frontend) when the request arrived.
    """
    cols = {"ttft_s", "queue_s", "prefill_s", "e2e_s", "decode_s", "first_token_s", "arrival_s"}
    if not cols <= set(requests.columns):
        return Outside()
    rows = requests.drop_nulls(list(cols))
    if rows.height < 10:
        return Outside()
    pre = (rows["ttft_s"] - rows["queue_s"] - rows["prefill_s"]).to_numpy()
    post = (rows["e2e_s"] - rows["ttft_s"] - rows["decode_s"]).to_numpy()
    start = rows["first_token_s"].to_numpy()
    decoding = decoding_at(rows["arrival_s"].to_numpy(), start, start + rows["decode_s"].to_numpy())
    a, b = nonneg_lstsq([np.ones_like(pre), decoding], pre)
    return Outside(float(a), float(b), max(0.0, float(np.median(post))))


def rates(cost: StepCost) -> dict[str, float | None]:
    """A step cost read as the figures people quote: one decode step of one request, and prefill tokens/s."""
    return {
        "decode_s_per_token_batch1": cost.c0 + cost.overhead + cost.c_decode,
        "prefill_tokens_per_s": 1.0 / cost.c_prefill if cost.c_prefill > 0 else None,
    }

"""What the replay takes from the run besides the step cost: the engine's limits (from its log, inferred, or
vLLM's defaults, each with its origin), the model, prefix-cache hits, the engine's own preemption count, and
the time a request spends outside the engine (frontend, network)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from lltrace.physics.catalog import Model, find_model, model_or_error
from lltrace.queries import thresholds
from lltrace.replay.cost import StepCost, nonneg_lstsq
from lltrace.store import Run


def _setting(value: Any, origin: str) -> dict[str, Any]:
    return {"value": value, "origin": origin}


def engine_config_for(run: Run, steps: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """The replayed engine's limits, each with where it came from (log, inferred or vLLM default)."""
    logged: dict[str, Any] = {}
    for src in run.metadata.get("sources", []):
        logged.update(src.get("engine_config") or {})
    out: dict[str, dict[str, Any]] = {}
    kv_tokens = logged.get("kv_cache_tokens")
    blocks = logged.get("num_gpu_blocks_override")
    if "block_size" in logged:
        out["block_size"] = _setting(logged["block_size"], "server log args")
    elif kv_tokens and blocks:
        out["block_size"] = _setting(kv_tokens // blocks, "server log: KV cache tokens / blocks")
    else:
        out["block_size"] = _setting(16, "vLLM default (not in the sources)")
    bs = out["block_size"]["value"]
    if blocks:
        out["kv_blocks"] = _setting(blocks, "server log args")
    elif kv_tokens:
        out["kv_blocks"] = _setting(kv_tokens // bs, "server log: KV cache size")
    else:
        out["kv_blocks"] = _setting(None, "unknown")
    out["max_num_seqs"] = (
        _setting(logged["max_num_seqs"], "server log args")
        if "max_num_seqs" in logged
        else _setting(256, "vLLM default (not in the sources)")
    )
    if "max_num_batched_tokens" in logged:
        out["max_num_batched_tokens"] = _setting(logged["max_num_batched_tokens"], "server log args")
    elif steps.height >= thresholds()["budget_inference_steps"]:  # under load the budget bound at least once
        largest = int((steps["prefill_tokens"].fill_null(0) + steps["decode_tokens"].fill_null(0)).max() or 0)
        # the budget is a power of two in every vLLM default; the largest step is at most the budget
        budget = 1 << max(largest - 1, 1).bit_length()
        out["max_num_batched_tokens"] = _setting(budget, f"inferred: largest step had {largest} tokens")
    else:
        out["max_num_batched_tokens"] = _setting(8192, "vLLM default (not in the sources)")
    if "enable_chunked_prefill" in logged:
        out["chunked_prefill"] = _setting(bool(logged["enable_chunked_prefill"]), "server log args")
    else:
        out["chunked_prefill"] = _setting(True, "vLLM V1 default (not in the sources)")
    tp = logged.get("tensor_parallel_size")
    out["tp"] = _setting(int(tp), "server log args") if tp else _setting(1, "assumed: the sources name no TP degree")
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

    The engine's own ``cached_tokens`` where the sources give them; else the leading prefix blocks an earlier
    request already had (``requests_prefix_reuse``: the one definition of prefix reuse; an upper bound that
    assumes the cache kept every block) times the source's block size. None where the sources say nothing
    about reuse.
    """
    if measured["cached_tokens"].null_count() < measured.height:
        return measured["cached_tokens"].fill_null(0).to_numpy(), "measured (engine cached tokens)"
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

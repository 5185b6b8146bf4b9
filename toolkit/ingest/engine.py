"""The engine's settings for a run, resolved once (the ``engine_config`` table), each with its basis and origin.

The limits that decide why a request waited (``max_num_seqs``, ``max_num_batched_tokens``) and the KV cache's
size are what the queue split and the replay both read. In order of trust:

1. **stated**: a source says it: the scheduler's resolved token budget line, vLLM's ``cache_config_info`` gauge
   and engine config line (the resolved values), else the API server's ``non-default args``;
2. **derived**: arithmetic on stated ones (block size = KV cache tokens / blocks, and the like);
3. **default**: the engine's documented default for its version and device (vLLM V1's
   ``EngineArgs.get_batch_defaults``: on CPU 2048 tokens and 128 sequences per parallel worker for the API
   server; on GPUs under 70 GiB, or A100s, 2048 and 256; on larger GPUs 8192 and 1024; the CPU platform's
   128-token block), only where the sources name the device;
4. **inferred**: the token budget from a long step log (the smallest power of two holding the largest step;
   every vLLM default is one), where nothing else tells. A limit inferred from the steps cannot tell whether
   it bound, so the queue split does not use it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from lltrace.arrow_rows import table_from_rows
from lltrace.queries import thresholds
from lltrace.tables import ENGINE_CONFIG, ENGINE_SETTINGS

# setting <- the source's key for it
_KEYS = {
    "max_num_seqs": ("max_num_seqs",),
    "max_num_batched_tokens": ("max_num_batched_tokens",),
    "chunked_prefill": ("enable_chunked_prefill",),
    "prefix_caching": ("enable_prefix_caching",),
    "block_size": ("block_size",),
    "kv_blocks": ("num_gpu_blocks", "num_gpu_blocks_override", "kv_blocks"),
    "kv_cache_tokens": ("kv_cache_tokens",),
    "tensor_parallel_size": ("tensor_parallel_size",),
    "speculative_tokens": ("num_speculative_tokens",),
    "long_prefill_token_threshold": ("long_prefill_token_threshold",),
    "long_prefill_adaptive": ("long_prefill_token_threshold_adaptive",),
    "data_parallel_size": ("data_parallel_size",),
}
_FORMAT_ENGINE = {
    "vllm-server-log": "vllm",
    "sglang-scheduler-log": "sglang",
    "trtllm-iteration-log": "trtllm",
    "tgi-log": "tgi",
    "tgi-response-headers": "tgi",
}
_V1_DEFAULTS_SINCE = (0, 10)  # vLLM V1 with EngineArgs.get_batch_defaults' per-device table
# vLLM's CPU platform sets an unset block size to 128 (before, 128 only with IPEX, else 16); GPU block sizes
# depend on the attention backend and the model (16, 64 for MLA, larger for hybrids), so no GPU default is given
_CPU_BLOCK_128_SINCE = (0, 11)
# the scheduler's input budget charging each request the drafter's extra input slots: read in vLLM 0.32's source
# (v1/core/sched/scheduler.py, input_budget); the version that began it is not known here, so none before is given
_DRAFT_SLOTS_SINCE = (0, 32)


def _trust(origin: str) -> int:
    """Resolved values (what the engine printed it runs with) over the launcher's arguments."""
    return 1 if "non-default args" in origin else 2


def _stated(sources: list[dict[str, Any]]) -> dict[str, tuple[float, str]]:
    best: dict[str, tuple[float, str, int]] = {}
    for src in sources:
        config, origins = src.get("engine_config") or {}, src.get("engine_config_origin") or {}
        for setting, keys in _KEYS.items():
            for key in keys:
                if key in config and isinstance(config[key], (int, float)):
                    origin = origins.get(key, "server log")
                    if setting not in best or _trust(origin) > best[setting][2]:
                        named = origin if "(" in origin else f"{origin} ({key})"
                        best[setting] = (float(config[key]), named, _trust(origin))
                    break
    return {k: (v, o) for k, (v, o, _) in best.items()}


def _facts(sources: list[dict[str, Any]]) -> dict[str, Any]:
    """Engine name, version and device as the sources state them."""
    facts: dict[str, Any] = {}
    for src in sources:
        config = src.get("engine_config") or {}
        for key in ("engine", "engine_version", "device", "pipeline_parallel_size", "speculative_method"):
            if key in config and key not in facts:
                facts[key] = config[key]
        if config.get("parallel_drafting"):
            facts["parallel_drafting"] = True
        if "engine" not in facts and src.get("format") in _FORMAT_ENGINE:
            facts["engine"] = _FORMAT_ENGINE[src["format"]]
    return facts


def engine_name(sources: list[dict[str, Any]]) -> str | None:
    """The serving engine the run's sources name (``vllm``, ``sglang``, ``tgi``, ``trtllm``), None where none does."""
    return _facts(sources).get("engine")


# each setting as the run's engine names it, where that is not vLLM's name (the canonical ``setting``): SGLang's
# server arguments (sglang/srt/server_args.py), TGI's launcher's, TensorRT-LLM's trtllm-serve options and LLM API
# KV-cache config
ENGINE_ARGUMENTS = {
    "sglang": {
        "max_num_seqs": "--max-running-requests",
        "max_num_batched_tokens": "--chunked-prefill-size",
        "gpu_memory_utilization": "--mem-fraction-static",
        "enable_prefix_caching": "the radix cache (on unless --disable-radix-cache)",
        "num_speculative_tokens": "--speculative-num-draft-tokens",
    },
    # TGI's launcher (launcher/src/main.rs): the batch's KV room in tokens, its prefill budget, its size limit
    "tgi": {
        "max_num_seqs": "--max-batch-size",
        "max_num_batched_tokens": "--max-batch-prefill-tokens",
        "gpu_memory_utilization": "--max-batch-total-tokens",
        "enable_prefix_caching": "PREFIX_CACHING",
        "num_speculative_tokens": "--speculate",
    },
    "trtllm": {
        "max_num_seqs": "--max_batch_size",
        "max_num_batched_tokens": "--max_num_tokens",
        "gpu_memory_utilization": "--kv_cache_free_gpu_memory_fraction",
        "enable_prefix_caching": "kv_cache_config.enable_block_reuse",
        "num_speculative_tokens": "speculative_config.max_draft_len",
    },
}


def engine_setting(setting: str | None, engine: str | None) -> str | None:
    """``setting`` (vLLM's name) as ``engine`` names it; itself for vLLM, an unknown engine or no setting."""
    return ENGINE_ARGUMENTS.get(engine or "", {}).get(setting or "", setting)


def _version(text: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text or "")[:3])


def _vllm_defaults(facts: dict[str, Any], gpu: dict[str, Any] | None, tp: int) -> dict[str, tuple[float, str]]:
    """vLLM V1's documented batch defaults for the API server on the run's device (empty where not known)."""
    version = facts.get("engine_version")
    if facts.get("engine") != "vllm" or _version(version) < _V1_DEFAULTS_SINCE:
        return {}
    device = facts.get("device")
    world = tp * int(facts.get("pipeline_parallel_size") or 1)
    where = f"vLLM {version} default for the API server"
    if device == "cpu":
        tokens, seqs, why = 2048 * world, 128 * world, f"on CPU, {world} worker(s)"
    elif device in (None, "cuda", "rocm") and gpu and gpu.get("memory_bytes"):
        big = gpu["memory_bytes"] >= 70 * 2**30 and "a100" not in str(gpu.get("name", "")).lower()
        tokens, seqs = (8192, 1024) if big else (2048, 256)
        why = f"on {gpu.get('name')} ({gpu['memory_bytes'] / 2**30:.0f} GiB)"
    else:
        tokens = seqs = None
        why = ""
    out: dict[str, tuple[float, str]] = {
        "chunked_prefill": (1.0, f"vLLM {version} V1 default (chunked prefill for generative models)"),
        "prefix_caching": (1.0, f"vLLM {version} V1 default (prefix caching for generative models)"),
        "tensor_parallel_size": (1.0, f"vLLM {version} default"),
        "data_parallel_size": (1.0, f"vLLM {version} default"),
        # SchedulerConfig: no per-request cap on a prompt chunk unless set (0)
        "long_prefill_token_threshold": (0.0, f"vLLM {version} default (0: no per-request cap on a prompt chunk)"),
    }
    if device == "cpu" and _version(version) >= _CPU_BLOCK_128_SINCE:
        out["block_size"] = (128.0, f"vLLM {version} default on CPU (CpuPlatform.check_and_update_config)")
    if tokens is not None:
        out["max_num_batched_tokens"] = (float(tokens), f"{where} {why}")
        out["max_num_seqs"] = (float(seqs), f"{where} {why}")
    return out


def _vllm_draft_slots(facts: dict[str, Any], k: int) -> tuple[float, str] | None:
    """The tokens of the step's budget vLLM's scheduler charges each scheduled request beyond its own for the drafter's
    input: ``SpeculativeConfig.max_num_new_slots_for_drafting`` (vLLM 0.32, config/speculative.py), by the method
    the engine's config line names: K for DFlash; with parallel drafting K for a draft model, K - 1 for the others;
    1 for a draft model (its input keeps one more token); 0 for the rest (EAGLE, EAGLE3, MTP, n-gram), and where
    it does not draft. None where the engine, its version or the method is not known to follow that rule."""
    if k == 0:
        return 0.0, "no speculative decoding (speculative_tokens 0)"
    method = facts.get("speculative_method")
    if facts.get("engine") != "vllm" or _version(facts.get("engine_version")) < _DRAFT_SLOTS_SINCE or not method:
        return None
    parallel = bool(facts.get("parallel_drafting"))
    if method == "dflash":
        slots = k
    elif parallel:
        slots = k if method == "draft_model" else k - 1
    else:
        slots = 1 if method == "draft_model" else 0
    how = f"{method}{', parallel drafting' if parallel else ''}, {k} speculative tokens"
    return float(slots), f"vLLM {facts['engine_version']} max_num_new_slots_for_drafting ({how})"


def _step_log(stage: Path) -> tuple[int, int, int]:
    """The run's logged steps, read once: (steps with token counts, tokens in the largest of them, data-parallel
    engines that logged their own iterations: vLLM's ``Engine 000``, ``Engine 001``)."""
    n = largest = 0
    engines = set()
    for f in sorted((stage / "engine_steps").glob("*.parquet")):
        t = pq.read_table(f, columns=["source", "engine", "prefill_tokens", "decode_tokens"]).to_pylist()
        for r in t:
            if r["source"] != "log":
                continue
            if r["engine"] is not None:
                engines.add(r["engine"])
            if r["prefill_tokens"] is not None and r["decode_tokens"] is not None:
                n += 1
                largest = max(largest, r["prefill_tokens"] + r["decode_tokens"])
    return n, largest, len(engines)


def resolve(sources: list[dict[str, Any]], gpu: dict[str, Any] | None, stage: Path) -> list[dict[str, Any]]:
    """The run's engine settings as ``engine_config`` rows (what no source, default or step log tells is absent)."""
    facts = _facts(sources)
    rows: dict[str, dict[str, Any]] = {
        k: {"setting": k, "value": v, "basis": "stated", "origin": o} for k, (v, o) in _stated(sources).items()
    }

    def derive(setting: str, value: float, origin: str) -> None:
        if setting not in rows:
            rows[setting] = {"setting": setting, "value": value, "basis": "derived", "origin": origin}

    def derive_kv() -> None:
        tokens, blocks, size = (rows.get(k, {}).get("value") for k in ("kv_cache_tokens", "kv_blocks", "block_size"))
        of = {k: f" ({rows[k]['basis']})" if rows.get(k, {}).get("basis") == "default" else "" for k in rows}
        if tokens and blocks:
            derive("block_size", tokens // blocks, "KV cache tokens / KV blocks")
        if tokens and size:
            derive("kv_blocks", tokens // size, f"KV cache tokens / block size{of.get('block_size', '')}")
        if blocks and size:
            derive("kv_cache_tokens", blocks * size, f"KV blocks x block size{of.get('block_size', '')}")

    logged, largest, engines = _step_log(stage)
    if "data_parallel_size" not in rows and engines > 1:
        derive("data_parallel_size", float(engines), f"{engines} engines log their own iterations")
    dp = int(rows["data_parallel_size"]["value"]) if "data_parallel_size" in rows else 1
    tokens, blocks, size = (rows.get(k, {}).get("value") for k in ("kv_cache_tokens", "kv_blocks", "block_size"))
    if dp > 1 and tokens and size and blocks == dp * (tokens // size):  # vLLM's gauge counts every engine's blocks
        rows["kv_blocks"] = {
            "setting": "kv_blocks",
            "value": tokens // size,
            "basis": "derived",
            "origin": f"KV cache tokens / block size, per engine ({rows['kv_blocks']['origin']}: {blocks:.0f}, "
            f"the {dp} data-parallel engines' together)",
        }
    derive_kv()
    tp = int(rows["tensor_parallel_size"]["value"]) if "tensor_parallel_size" in rows else 1
    for setting, (value, origin) in _vllm_defaults(facts, gpu, tp).items():
        rows.setdefault(setting, {"setting": setting, "value": value, "basis": "default", "origin": origin})
    derive_kv()  # a default block size turns a stated KV size in tokens into blocks
    if "max_num_batched_tokens" not in rows:
        if logged >= thresholds()["budget_inference_steps"] and largest:
            budget = 1 << max(largest - 1, 1).bit_length()
            rows["max_num_batched_tokens"] = {
                "setting": "max_num_batched_tokens",
                "value": float(budget),
                "basis": "inferred",
                "origin": f"inferred: the largest of {logged} logged steps had {largest} tokens",
            }
    if "speculative_tokens" in rows and (slots := _vllm_draft_slots(facts, int(rows["speculative_tokens"]["value"]))):
        derive("draft_slots", *slots)
    engine = facts.get("engine")
    return [rows[k] | {"engine": engine} for k in ENGINE_SETTINGS if k in rows]


def write(stage: Path, rows: list[dict[str, Any]]) -> None:
    """Stage the run's ``engine_config`` table."""
    if rows:
        (stage / "engine_config").mkdir(exist_ok=True)
        pq.write_table(table_from_rows(rows, ENGINE_CONFIG), stage / "engine_config" / "part-config.parquet")

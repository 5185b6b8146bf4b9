"""What-ifs: the keys a replay answers (DESIGN.md's, with the spellings lltrace first used as aliases), read
once into typed settings (``what_ifs``: the CLI and the API alike), and each applied to the replay's
calibrated baseline (``apply``) as an engine setting, an arrival clock, a cache switch, or a step cost and KV
capacity moved with the roofline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lltrace.errors import AnalysisError
from lltrace.physics import roofline
from lltrace.physics.catalog import BYTES_PER_PARAM, GPU, Model, check_precision, gpu_or_error
from lltrace.replay.calibration import rates
from lltrace.replay.cost import StepCost, transfer_step_cost, transfer_tensor_parallel

WHAT_IF_KEYS = (
    "gpu",
    "weights",
    "kv_dtype",
    "tp",
    "max_num_seqs",
    "max_num_batched_tokens",
    "chunked_prefill",
    "kv_blocks",
    "kv_memory_gb",
    "block_size",
    "rate_scale",
    "prefix_caching",
    "quant",
    "rate",
    "prefix_cache",
)
WHAT_IF_ALIASES = {"quant": "weights", "rate": "rate_scale", "prefix_cache": "prefix_caching"}
_ENGINE = ("kv_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens")  # integers, engine settings
_INTEGER = (*_ENGINE, "tp")
_NUMBER = ("rate_scale", "kv_memory_gb")
_SWITCH_KEYS = ("chunked_prefill", "prefix_caching")
_HARDWARE = ("gpu", "weights", "kv_dtype", "tp")  # moved with the roofline
_SWITCH = {"on": True, "off": False, "true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


@dataclass(frozen=True)
class WhatIf:
    """One what-if: as written (``key``, ``value``: what the document shows) and as the replay applies it."""

    key: str
    value: float | str
    name: str  # the DESIGN.md key (aliases resolved)
    setting: int | float | bool | str  # typed: an integer, a number, on/off, or a GPU or precision name


def _typed(key: str, name: str, value: float | str) -> int | float | bool | str:
    if name in _SWITCH_KEYS:
        word = str(int(value)) if isinstance(value, float) and value in (0.0, 1.0) else str(value).strip().lower()
        if word not in _SWITCH:
            raise AnalysisError(f"--what-if {key}={value}: expected on or off")
        return _SWITCH[word]
    if name in _INTEGER or name in _NUMBER:
        try:
            number = float(value)
        except ValueError:
            raise AnalysisError(f"--what-if {key}={value}: expected a number") from None
        if name in _INTEGER:
            if number < 1:
                raise AnalysisError(f"--what-if {key}={value}: expected a whole number of 1 or more")
            return int(number)
        if number <= 0:
            raise AnalysisError(f"--what-if {key}={value}: expected a number above 0")
        return number
    if name == "gpu":
        return gpu_or_error(str(value)).name
    check_precision(str(value))  # weights, kv_dtype
    return str(value)


def parse_what_if(item: str) -> tuple[str, float | str]:
    """``KEY=VALUE`` as (key, value): numbers become floats, names (a GPU, a precision, on/off) stay text."""
    key, sep, value = item.partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not key or not value:
        raise AnalysisError(f"--what-if {item!r}: expected KEY=VALUE, e.g. kv_blocks=80 or gpu=H100-SXM")
    try:
        return key, float(value)
    except ValueError:
        return key, value


def what_ifs(cases: dict[str, float | str] | list[tuple[str, float | str]] | list[str] | None) -> list[WhatIf]:
    """The cases of a replay, checked: a ``{key: value}`` dict, ``(key, value)`` pairs (a key may repeat: one case
    each) or ``KEY=VALUE`` texts. An unknown key or a value of the wrong kind is an ``AnalysisError``."""
    if isinstance(cases, dict):
        pairs = list(cases.items())
    else:
        pairs = [parse_what_if(c) if isinstance(c, str) else c for c in cases or []]
    unknown = sorted({k for k, _ in pairs} - set(WHAT_IF_KEYS))
    if unknown:
        raise AnalysisError(f"what-if keys not modelled yet: {', '.join(unknown)} (known: {', '.join(WHAT_IF_KEYS)})")
    out = []
    for key, value in pairs:
        name = WHAT_IF_ALIASES.get(key, key)
        out.append(WhatIf(key, value, name, _typed(key, name, value)))
    return out


@dataclass
class Baseline:
    """What every case starts from: the run's arrivals, calibrated cost, settings and hardware."""

    arrival: np.ndarray
    cost: StepCost
    kv_blocks: int
    block_size: int
    has_prefix_hits: bool
    gpu: GPU | None  # the run's GPU (None: unknown)
    quant: str
    kv_dtype: str
    tp: int
    model: Model | None


@dataclass
class Case:
    """A what-if applied: the arrivals, engine overrides, step cost and prefix cache it replays with, and what
    the document shows of how it was moved."""

    arrival: np.ndarray
    overrides: dict[str, Any]
    cost: StepCost
    prefix_cache: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def apply(w: WhatIf, base: Baseline) -> Case:
    """The case a what-if asks for."""
    case = Case(base.arrival, {}, base.cost)
    if w.name in _ENGINE or w.name == "chunked_prefill":
        case.overrides[w.name] = w.setting
    elif w.name == "rate_scale":
        t0 = float(base.arrival.min())
        case.arrival = t0 + (base.arrival - t0) / float(w.setting)
    elif w.name == "prefix_caching":
        case.prefix_cache = bool(w.setting)
        if case.prefix_cache and not base.has_prefix_hits:
            raise AnalysisError(f"--what-if {w.key}=on: the sources say nothing about prefix reuse")
    elif w.name == "kv_memory_gb":
        if base.model is None:
            raise AnalysisError(f"--what-if {w.key}: the model is unknown, so its KV bytes per token; use --model")
        per_block = base.model.kv_bytes_per_token(BYTES_PER_PARAM[base.kv_dtype]) * base.block_size
        case.overrides["kv_blocks"] = int(float(w.setting) * 1e9 // per_block)
        case.extra["kv_capacity"] = (
            f"{w.value} GB / {per_block:,.0f} bytes per block ({base.model.name}, KV {base.kv_dtype})"
        )
    elif w.name in _HARDWARE:
        _hardware(w, base, case)
    return case


def _hardware(w: WhatIf, base: Baseline, case: Case) -> None:
    if base.gpu is None:
        raise AnalysisError(f"--what-if {w.key}=...: the run's GPU is unknown; name it with --gpu")
    there = gpu_or_error(str(w.setting)) if w.name == "gpu" else base.gpu
    q1 = str(w.setting) if w.name == "weights" else base.quant
    kv1 = str(w.setting) if w.name == "kv_dtype" else base.kv_dtype
    tp1 = int(w.setting) if w.name == "tp" else base.tp
    if w.name == "tp":
        if base.model is None:
            raise AnalysisError(f"--what-if {w.key}: the model is unknown (its layers and width); use --model")
        case.cost, ratios = transfer_tensor_parallel(base.cost, base.model, base.gpu, base.tp, tp1)
    else:
        case.cost, ratios = transfer_step_cost(
            base.cost, base.gpu, there, quant_from=base.quant, quant_to=q1, kv_from=base.kv_dtype, kv_to=kv1
        )
    blocks, how = roofline.kv_blocks_moved(
        base.kv_blocks, base.model, (base.gpu, base.quant, base.kv_dtype, base.tp), (there, q1, kv1, tp1)
    )
    case.overrides["kv_blocks"] = blocks
    before, after = rates(base.cost), rates(case.cost)
    case.extra |= {
        "cost_ratios": ratios,
        "kv_capacity": how,
        "step_rates": after,
        "speedup": {
            "decode_batch1": before["decode_s_per_token_batch1"] / after["decode_s_per_token_batch1"],
            "prefill": after["prefill_tokens_per_s"] / before["prefill_tokens_per_s"]
            if before["prefill_tokens_per_s"] and after["prefill_tokens_per_s"]
            else None,
        },
    }

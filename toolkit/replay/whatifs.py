"""What-ifs: the keys a replay answers (docs/replay.md's, with the spellings lltrace first used as aliases), read
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
    "long_prefill_token_threshold",
    "data_parallel_size",
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
# integers, engine settings (the prompt-chunk cap may be 0: off)
_ENGINE = (
    "kv_blocks",
    "block_size",
    "max_num_seqs",
    "max_num_batched_tokens",
    "long_prefill_token_threshold",
    "data_parallel_size",
)
_ZERO_OK = ("long_prefill_token_threshold",)
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
    name: str  # the documented key (docs/replay.md; aliases resolved)
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
            least = 0 if name in _ZERO_OK else 1
            if number < least:
                raise AnalysisError(f"--what-if {key}={value}: expected a whole number of {least} or more")
            return int(number)
        if number <= 0:
            raise AnalysisError(f"--what-if {key}={value}: expected a number above 0")
        return number
    if name == "gpu":
        return gpu_or_error(str(value)).name
    check_precision(str(value))  # weights, kv_dtype
    return str(value)


def parse_what_if(item: str) -> tuple[str, float | str]:
    """``KEY=VALUE`` as (key, value): numbers become floats, names (a GPU, a precision, on/off) and sweeps
    (``4..32``, ``0.5|1|2``) stay text."""
    key, sep, value = item.partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not key or not value:
        raise AnalysisError(f"--what-if {item!r}: expected KEY=VALUE, e.g. kv_blocks=80 or gpu=H100-SXM")
    try:
        return key, float(value)
    except ValueError:
        return key, value


def _number(key: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise AnalysisError(f"--what-if {key}={text}: expected a number") from None


def sweep_values(key: str, value: float | str) -> list[float | str]:
    """The values one ``KEY=VALUE`` asks for: a list ``0.5|1|2|4`` (each value once, in order), a range
    ``4..32`` (powers of two from the first: 4, 8, 16, 32; the end added when the doubling steps over it),
    else the value itself."""
    if not isinstance(value, str):
        return [value]
    if "|" in value:
        parts = [v.strip() for v in value.split("|")]
        if any(not v for v in parts):
            raise AnalysisError(f"--what-if {key}={value}: an empty value in the list")
        out: list[float | str] = []
        for v in parts:
            try:
                item: float | str = float(v)
            except ValueError:
                item = v
            if item not in out:
                out.append(item)
        return out
    if ".." in value:
        lo_text, _, hi_text = value.partition("..")
        lo, hi = _number(key, lo_text.strip()), _number(key, hi_text.strip())
        if not 0 < lo <= hi:
            raise AnalysisError(f"--what-if {key}={value}: expected a range LOW..HIGH with 0 < LOW <= HIGH")
        values, v = [], lo
        while v <= hi and len(values) < 64:
            values.append(v)
            v *= 2
        if values[-1] < hi:
            values.append(hi)
        return values
    return [value]


@dataclass(frozen=True)
class WhatIfCase:
    """One replayed case: the settings it changes together (``items``, each key once), and the ``--what-if``
    text it came from (``asked``: a sweep gives several cases the same text)."""

    items: tuple[WhatIf, ...]
    asked: str

    def settings(self) -> dict[str, float | str]:
        """The case as written, ``{key: value}`` (the document's ``what_if``)."""
        return {w.key: w.value for w in self.items}


def _case_pairs(item: str | tuple[str, float | str]) -> tuple[str, list[tuple[str, float | str]]]:
    """A ``--what-if`` argument as its text and its (key, value) pairs: ``k=v,k2=v2`` sets several keys."""
    if not isinstance(item, str):
        return f"{item[0]}={item[1]}", [item]
    return item, [parse_what_if(part) for part in item.split(",")]


def what_ifs(
    cases: dict[str, float | str] | list[tuple[str, float | str]] | list[str] | None,
) -> list[WhatIfCase]:
    """The cases of a replay, checked.

    ``cases`` is a ``{key: value}`` dict (one case per key), ``(key, value)`` pairs (a key may repeat: one case
    each) or ``KEY=VALUE[,KEY=VALUE...]`` texts (one case setting every key it names). A value that is a list
    (``0.5|1|2``) or a range (``4..32``: powers of two) expands into a sweep, one case per value (several
    swept keys in one text: every combination). An unknown key, a key set twice in one case, or a value of
    the wrong kind is an ``AnalysisError``.
    """
    items = list(cases.items()) if isinstance(cases, dict) else list(cases or [])
    out: list[WhatIfCase] = []
    for item in items:
        asked, pairs = _case_pairs(item)
        unknown = sorted({k for k, _ in pairs} - set(WHAT_IF_KEYS))
        if unknown:
            raise AnalysisError(
                f"what-if keys not modelled yet: {', '.join(unknown)} (known: {', '.join(WHAT_IF_KEYS)})"
            )
        names = [WHAT_IF_ALIASES.get(k, k) for k, _ in pairs]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise AnalysisError(f"--what-if {asked}: {', '.join(twice)} set twice in one case")
        combos: list[tuple[WhatIf, ...]] = [()]
        for (key, value), name in zip(pairs, names, strict=True):
            options = [WhatIf(key, v, name, _typed(key, name, v)) for v in sweep_values(key, value)]
            combos = [c + (w,) for c in combos for w in options]
        if len(combos) > 256:
            raise AnalysisError(f"--what-if {asked}: {len(combos)} cases; a sweep replays at most 256")
        out += [WhatIfCase(c, asked) for c in combos]
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
    drafting: tuple[float, float] = (1.0, 0.0)  # speculative decoding: tokens a step, draft tokens verified a step


@dataclass
class Case:
    """A what-if applied: the arrivals, engine overrides, step cost and prefix cache it replays with, and what
    the document shows of how it was moved."""

    arrival: np.ndarray
    overrides: dict[str, Any]
    cost: StepCost
    prefix_cache: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def apply(what_if: WhatIfCase, base: Baseline) -> Case:
    """The case a what-if asks for: every key it sets, applied together (the hardware keys as one move of the
    step cost and KV capacity; an explicit ``kv_blocks`` or ``kv_memory_gb`` then sets the capacity)."""
    case = Case(base.arrival, {}, base.cost)
    by_name = {w.name: w for w in what_if.items}
    hardware = [w for w in what_if.items if w.name in _HARDWARE]
    if hardware:
        _hardware(hardware, base, case)
    for w in what_if.items:
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
            if "kv_blocks" in by_name:
                raise AnalysisError(f"--what-if {what_if.asked}: kv_blocks and kv_memory_gb both set the KV capacity")
            if base.model is None:
                raise AnalysisError(f"--what-if {w.key}: the model is unknown, so its KV bytes per token; use --model")
            kv_dtype = str(by_name["kv_dtype"].setting) if "kv_dtype" in by_name else base.kv_dtype
            block = int(by_name["block_size"].setting) if "block_size" in by_name else base.block_size
            per_block = base.model.kv_bytes_per_token(BYTES_PER_PARAM[kv_dtype]) * block
            case.overrides["kv_blocks"] = int(float(w.setting) * 1e9 // per_block)
            case.extra["kv_capacity"] = (
                f"{w.value} GB / {per_block:,.0f} bytes per block ({base.model.name}, KV {kv_dtype})"
            )
    return case


def _hardware(items: list[WhatIf], base: Baseline, case: Case) -> None:
    """Move the step cost and the KV capacity to the hardware the case names (GPU, weights, KV precision and
    tensor-parallel degree together): the tensor-parallel split first, then the GPU and precision ratios."""
    keys = " ".join(f"{w.key}=..." for w in items)
    if base.gpu is None:
        raise AnalysisError(f"--what-if {keys}: the run's GPU is unknown; name it with --gpu")
    by_name = {w.name: w for w in items}
    there = gpu_or_error(str(by_name["gpu"].setting)) if "gpu" in by_name else base.gpu
    q1 = str(by_name["weights"].setting) if "weights" in by_name else base.quant
    kv1 = str(by_name["kv_dtype"].setting) if "kv_dtype" in by_name else base.kv_dtype
    tp1 = int(by_name["tp"].setting) if "tp" in by_name else base.tp
    cost, ratios = base.cost, {}
    if "tp" in by_name:
        if base.model is None:
            raise AnalysisError(
                f"--what-if {by_name['tp'].key}: the model is unknown (its layers and width); use --model"
            )
        cost, ratios = transfer_tensor_parallel(cost, base.model, base.gpu, base.tp, tp1)
    if set(by_name) - {"tp"}:
        cost, moved = transfer_step_cost(
            cost, base.gpu, there, quant_from=base.quant, quant_to=q1, kv_from=base.kv_dtype, kv_to=kv1
        )
        ratios = {**ratios, **moved}
    case.cost = cost
    blocks, how = roofline.kv_blocks_moved(
        base.kv_blocks, base.model, (base.gpu, base.quant, base.kv_dtype, base.tp), (there, q1, kv1, tp1)
    )
    case.overrides["kv_blocks"] = blocks
    before, after = rates(base.cost, *base.drafting), rates(case.cost, *base.drafting)
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


def what_if_sweeps(cases: list[WhatIfCase]) -> list[dict[str, Any]]:
    """Each ``--what-if`` that expanded into several cases: its text, the keys whose value varies, and the
    indexes of its cases in ``whatifs`` (in the order of its values)."""
    out: list[dict[str, Any]] = []
    for asked in dict.fromkeys(c.asked for c in cases):
        idx = [i for i, c in enumerate(cases) if c.asked == asked]
        if len(idx) < 2:
            continue
        keys = [k for k in cases[idx[0]].settings() if len({str(cases[i].settings()[k]) for i in idx}) > 1]
        out.append({"what_if": asked, "keys": keys, "cases": idx})
    return out

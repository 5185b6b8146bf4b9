"""The estimate document (``lltrace estimate --json``): the latency model for one request shape, with the inputs
it used and where each came from."""

from __future__ import annotations

from typing import Annotated

from lltrace.documents.base import UNSET, Doc, UnsetType, field_doc


class ModelInput(Doc, kw_only=True):
    """The model the estimate used."""

    name: Annotated[str, field_doc("its catalog name")]
    active_params_b: Annotated[float, field_doc("parameters active per token, billions")]
    source: Annotated[str, field_doc("where its figures come from")]


class GpuInput(Doc, kw_only=True):
    """The GPU the estimate used."""

    name: Annotated[str, field_doc("its catalog name")]
    hbm_gbps: Annotated[float, field_doc("memory bandwidth, GB/s")]
    peak_tflops: Annotated[float, field_doc("peak dense TFLOPS at the precision used")]
    achievable_bw_fraction: Annotated[float, field_doc("of the bandwidth a decode step reaches", "fraction")]
    achievable_flops_fraction: Annotated[float, field_doc("of the FLOPS a prefill reaches", "fraction")]
    source: Annotated[str, field_doc("where its figures come from")]
    achievable_source: Annotated[str, field_doc("where the achievable fractions come from")]


class Rates(Doc, kw_only=True):
    """Rates given directly (no model or GPU)."""

    prefill_tokens_per_s: Annotated[float | None, field_doc("prefill rate", "tokens/s")]
    decode_s_per_token: Annotated[float, field_doc("decode time per token", "s")]
    origin: Annotated[str, field_doc("where they come from")]


class Inputs(Doc, kw_only=True):
    """What the estimate was computed from."""

    input_tokens: Annotated[int, field_doc("prompt tokens", "tokens")]
    output_tokens: Annotated[int, field_doc("output tokens", "tokens")]
    model: Annotated[ModelInput | UnsetType, field_doc("the model")] = UNSET
    gpu: Annotated[GpuInput | UnsetType, field_doc("the GPU")] = UNSET
    quant: Annotated[str | UnsetType, field_doc("the weights' precision")] = UNSET
    kv_dtype: Annotated[str | UnsetType, field_doc("the KV cache's precision")] = UNSET
    mean_decode_context_tokens: Annotated[float | UnsetType, field_doc("mean context while decoding", "tokens")] = UNSET
    rates: Annotated[Rates | UnsetType, field_doc("rates given directly")] = UNSET


class Bound(Doc, kw_only=True):
    """What bounds each phase by the roofline."""

    prefill: Annotated[str | None, field_doc("compute or memory (null: rates given directly)")]
    decode: Annotated[str | None, field_doc("compute or memory (null: rates given directly)")]


class EstimateDocument(Doc, kw_only=True):
    """What ``lltrace estimate`` says of one request shape."""

    prefill_s: Annotated[float, field_doc("prefill time", "s")]
    decode_s: Annotated[float, field_doc("decode time", "s")]
    decode_s_per_token: Annotated[float, field_doc("decode time per output token", "s")]
    decode_tokens_per_s: Annotated[float | None, field_doc("decode rate", "tokens/s")]
    prefill_tokens_per_s: Annotated[float | None, field_doc("prefill rate", "tokens/s")]
    prefill_share: Annotated[float | None, field_doc("prefill's share of the request's time", "fraction")]
    decode_share: Annotated[float | None, field_doc("decode's share", "fraction")]
    crossover_input_tokens: Annotated[
        float | None, field_doc("L*: prompt length at which prefill and decode match", "tokens")
    ]
    bound: Annotated[Bound, field_doc("what bounds each phase")]
    inputs: Annotated[Inputs, field_doc("what it was computed from")]
    basis: Annotated[str, field_doc("estimated")]

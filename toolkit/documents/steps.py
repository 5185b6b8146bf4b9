"""The ``steps`` and ``profile`` sections of the analysis document: the engine's steps (from a profiler trace or
its iteration log) by kind, each step with its roofline bound where the model and GPU are known, and the profiler's
GPU time by kernel class."""

from __future__ import annotations

from typing import Annotated

import msgspec

from lltrace.documents.base import UNSET, Doc, UnsetType, field_doc
from lltrace.documents.rows import (
    ProfilerAttentionVariantRow,
    ProfilerGpuBusyRow,
    ProfilerKernelTimeRow,
    ProfilerPhaseShareRow,
    ProfilerStepsByKindRow,
)
from lltrace.documents.vocabulary import KindFrom, StepKind
from lltrace.tables import ENGINE_STEPS


def _step(column: str) -> msgspec.Meta:
    """A step item's field: the meaning and unit ``lltrace.tables`` declares for the ``engine_steps`` column."""
    c = ENGINE_STEPS.column(column)
    return field_doc(c.doc, c.unit)


class StepItem(Doc, kw_only=True):
    """One engine step."""

    part: Annotated[int | None, _step("part")]
    step_id: Annotated[int | None, _step("step_id")]
    kind: Annotated[StepKind | None, _step("kind")]
    kind_from: Annotated[KindFrom | None, _step("kind_from")]
    start_s: Annotated[float | None, _step("start_s")]
    dur_s: Annotated[float | None, _step("wall_s")]
    prefill_reqs: Annotated[int | None, _step("prefill_reqs")]
    prefill_tokens: Annotated[int | None, _step("prefill_tokens")]
    decode_reqs: Annotated[int | None, _step("decode_reqs")]
    decode_tokens: Annotated[int | None, _step("decode_tokens")]
    gpu_busy_s: Annotated[float | None, _step("gpu_busy_s")]
    launch_gap_s: Annotated[float | None, _step("launch_gap_s")]
    gpu_idle_s: Annotated[float | None, _step("gpu_idle_s")]
    kernels: Annotated[int | None, _step("kernels")]
    cuda_graph: Annotated[bool | None, _step("cuda_graph")]
    graph_launches: Annotated[int | None, _step("graph_launches")]
    t_gemm_s: Annotated[float | None, _step("t_gemm_s")]
    t_attention_s: Annotated[float | None, _step("t_attention_s")]
    t_communication_s: Annotated[float | None, _step("t_communication_s")]
    t_memory_s: Annotated[float | None, _step("t_memory_s")]
    t_elementwise_s: Annotated[float | None, _step("t_elementwise_s")]
    t_other_s: Annotated[float | None, _step("t_other_s")]
    shape_tokens: Annotated[int | None, _step("shape_tokens")]
    shape_reqs: Annotated[int | None, _step("shape_reqs")]
    shape_query_len: Annotated[int | None, _step("shape_query_len")]
    shape_context_tokens: Annotated[int | None, _step("shape_context_tokens")]
    marker: Annotated[str | None, _step("marker")]
    detection: Annotated[str | None, _step("detection")]
    kind_why: Annotated[str | None, _step("kind_why")]
    bound: Annotated[
        str | None, field_doc("compute or memory: the roofline's bound for the step (null: no model, GPU or tokens)")
    ]
    arithmetic_intensity: Annotated[float | UnsetType, field_doc("FLOPs per byte moved, by the roofline")] = UNSET
    ridge_flops_per_byte: Annotated[float | UnsetType, field_doc("the GPU's ridge point, FLOPs per byte")] = UNSET
    roofline_min_s: Annotated[float | UnsetType, field_doc("the least time the roofline allows the step", "s")] = UNSET
    roofline_efficiency: Annotated[
        float | None | UnsetType, field_doc("roofline_min_s over the step's GPU busy time", "fraction")
    ] = UNSET


class PhaseShare(ProfilerPhaseShareRow, kw_only=True):
    """Step time by phase, with the GPU time no step holds where the profiler saw GPU work outside the steps."""

    gpu_busy_s: Annotated[float | UnsetType, field_doc("the trace's GPU busy time, all of it", "s")] = UNSET
    outside_steps_s: Annotated[float | None | UnsetType, field_doc("GPU busy time outside every step", "s")] = UNSET
    steps_hold: Annotated[
        float | None | UnsetType, field_doc("the steps' share of the GPU busy time, where it matters", "fraction")
    ] = UNSET


class Ranks(Doc, kw_only=True):
    """Whether every rank's (trace file's) steps line up."""

    ranks: Annotated[int, field_doc("trace files with steps", "count")]
    agree: Annotated[bool, field_doc("the same step count and kinds in order on every rank")]
    disagree_parts: Annotated[list[int], field_doc("the parts whose steps differ from the first's")]
    steps_per_rank: Annotated[dict[str, int], field_doc("part -> its steps")]


class Undecided(Doc, kw_only=True):
    """Steps whose kind the evidence did not decide, by why."""

    why: Annotated[str, field_doc("the rule that declined")]
    steps: Annotated[int, field_doc("how many", "steps")]


class DecodeTokensBeyond(Doc, kw_only=True):
    """Decode steps that computed more tokens than their decoding requests (drafts verified, or recompute)."""

    tokens: Annotated[int, field_doc("tokens beyond one per decoding request", "tokens")]
    steps: Annotated[int, field_doc("steps with some", "steps")]
    decode_steps: Annotated[int, field_doc("decode steps with counts", "steps")]


class StepsSection(Doc, kw_only=True):
    """The engine's steps."""

    count: Annotated[int, field_doc("steps described (of the source below)", "steps")]
    count_by_kind: Annotated[dict[str, int], field_doc("steps per kind (prefill, decode, mixed, idle; unknown)")]
    count_by_kind_from: Annotated[dict[KindFrom, int], field_doc("steps per evidence that decided their kind")]
    undecided: Annotated[list[Undecided], field_doc("steps of no kind, by why")]
    ranks: Annotated[Ranks | None, field_doc("whether the ranks' steps line up (null: one rank, or log steps)")]
    source: Annotated[str | None, field_doc("profiler or log: the source described (the profiler's where both)")]
    count_by_source: Annotated[dict[str, int], field_doc("steps per source")]
    by_kind: Annotated[list[ProfilerStepsByKindRow], field_doc("per kind: step time, tokens and graphs")]
    phase_share: Annotated[PhaseShare | None, field_doc("step time by phase")]
    detection: Annotated[list[str], field_doc("the marker families (or logs) the steps were read from")]
    bound_note: Annotated[str | None, field_doc("why no step has a roofline bound, where none has")]
    decode_tokens_beyond_requests: Annotated[
        DecodeTokensBeyond | None, field_doc("decode steps computing more tokens than requests (null: none)")
    ]
    items: Annotated[list[StepItem], field_doc("every step, in order")]


class ProfileSection(Doc, kw_only=True):
    """The profiler's GPU work."""

    gpu_ops: Annotated[int, field_doc("GPU ops in the trace", "count")]
    kernel_time: Annotated[list[ProfilerKernelTimeRow], field_doc("GPU time by kernel class, most first")]
    gpu_busy: Annotated[list[ProfilerGpuBusyRow], field_doc("per trace file and device: busy time")]
    attention_variants: Annotated[list[ProfilerAttentionVariantRow], field_doc("attention kernels by variant")]
    orphans: Annotated[int, field_doc("GPU ops with no launch in the trace", "count")]
    cuda_graph_kernels: Annotated[int | UnsetType, field_doc("GPU ops replayed from CUDA graphs", "count")] = UNSET

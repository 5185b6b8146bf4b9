"""The words every document and renderer shares, each defined once: the parts of a request's latency, the parts
of its queueing, how a figure was obtained, the workload labels, the bottlenecks advice names, step kinds, why a
request was left out of the figures, and why a file was skipped.

Each is a ``str`` enum whose values are the words the JSON documents hold (so ``Component.QUEUE == "queue"``).
The order of members is the order tables show them.
"""

from __future__ import annotations

from enum import Enum


class Word(str, Enum):
    """A word of the documents' vocabulary (its value is what the JSON holds)."""

    def __str__(self) -> str:
        return self.value


class Component(Word):
    """The additive parts of a request's end-to-end latency (they sum to it), in the order tables show them."""

    QUEUE = "queue"
    PREFILL = "prefill"
    DECODE = "decode"
    PREEMPTED = "preempted"
    OVERHEAD = "overhead"


class QueuePart(Word):
    """The parts of queueing, by what the engine was out of while the request waited (they sum to the queue)."""

    KV_WAIT = "kv_wait"
    SLOT_WAIT = "slot_wait"
    BUDGET_WAIT = "budget_wait"
    LOAD_WAIT = "load_wait"


LIMIT_PARTS = (QueuePart.KV_WAIT, QueuePart.SLOT_WAIT, QueuePart.BUDGET_WAIT)
"""The parts of queueing a limit of the engine explains (the rest is load)."""


class Basis(Word):
    """How a figure was obtained."""

    MEASURED = "measured"  # read from a source that timed it
    DERIVED = "derived"  # arithmetic on measured figures
    ESTIMATED = "estimated"  # a model's figure
    MIXED = "mixed"  # requests of more than one basis


class Label(Word):
    """A workload's classification."""

    PREFILL_DOMINANT = "prefill-dominant"
    DECODE_DOMINANT = "decode-dominant"
    QUEUE_BOUND = "queue-bound"
    CAPACITY_BOUND = "capacity-bound"
    BALANCED = "balanced"


class Bottleneck(Word):
    """What an item of advice relieves."""

    ENGINE = "engine"  # prefill compute
    PIPE = "pipe"  # decode memory bandwidth
    ROOM = "room"  # KV-cache capacity
    SLOTS = "slots"  # sequence slots
    BUDGET = "budget"  # the step's token budget
    QUEUE = "queue"  # load: more replicas
    OVERHEAD = "overhead"  # time the engine does not cover (launch gaps, frontend)
    INTERFERENCE = "interference"  # prefill work slowing the decodes sharing its steps
    PREFIX = "prefix"  # prompt prefixes computed again
    HOST = "host"  # the machine the engine runs on: its steps slowed at the same load


class StepKind(Word):
    """What an engine step computed."""

    PREFILL = "prefill"
    DECODE = "decode"
    MIXED = "mixed"
    IDLE = "idle"


class KindFrom(Word):
    """The evidence that decided a step's kind."""

    MARKER = "marker"  # the engine's own step annotation
    SHAPES = "shapes"  # the attention ops' input shapes
    KERNELS = "kernels"  # the kernels the step ran
    LOG_COUNTS = "log counts"  # the iteration log's request and token counts
    LOG_LINE = "log line"  # the log line's own word (SGLang's Prefill batch / Decode batch)


class Outcome(Word):
    """Why a request is left out of the run's figures (the tool that measured it leaves it out too)."""

    FAILED = "failed"
    CANCELLED = "cancelled"
    ABORTED = "aborted"
    INCOMPLETE = "incomplete"
    WARMUP = "warmup"
    COOLDOWN = "cooldown"
    UNJOINED = "unjoined"


class SkipReason(Word):
    """Why a file of a folder given as a run was not read."""

    UNREADABLE = "unreadable"  # permissions, a broken link, an I/O error
    EMPTY = "empty"
    DAMAGED = "damaged"  # it sniffs as a format but its head is damaged
    AMBIGUOUS = "ambiguous"  # it fits more than one format
    ARCHIVE = "archive"  # an archive inside the folder: read it as a path of its own
    WIDE_TEXT = "wide_text"  # UTF-16 text of a format lltrace reads in UTF-8
    BESIDE = "beside"  # a file a tool writes beside the ones read, holding nothing more
    NEAR = "near"  # of no known format, but close to one (or named like one): perhaps a damaged part of the run
    UNKNOWN = "unknown"  # of no known format
    HIDDEN = "hidden"
    NO_MATCH = "no_match"  # a pattern that matches nothing
    MISSING = "missing"  # no such file or folder


SUSPECT_SKIPS = (SkipReason.UNREADABLE, SkipReason.NEAR)
"""Skipped files that may be a damaged part of the run (unreadable, or of no known format but close to one): said
as warnings."""

"""Words the reports share, so the terminal, the HTML report and the diff name a figure the same way."""

from __future__ import annotations

from lltrace.documents.vocabulary import QueuePart

#: The parts of queue (docs/latency-model.md) in the order they are shown, with the words shown for each.
QUEUE_PARTS: tuple[tuple[QueuePart, str], ...] = (
    (QueuePart.KV_WAIT, "waiting for KV room"),
    (QueuePart.SLOT_WAIT, "waiting for a sequence slot"),
    (QueuePart.BUDGET_WAIT, "waiting for token budget"),
    (QueuePart.LOAD_WAIT, "load (no limit binding)"),
)

"""Words the reports share, so the terminal, the HTML report and the diff name a figure the same way."""

from __future__ import annotations

#: The parts of queue (docs/latency-model.md) in the order they are shown, with the words shown for each.
QUEUE_PARTS: tuple[tuple[str, str], ...] = (
    ("kv_wait", "waiting for KV room"),
    ("slot_wait", "waiting for a sequence slot"),
    ("budget_wait", "waiting for token budget"),
    ("load_wait", "load (no limit binding)"),
)

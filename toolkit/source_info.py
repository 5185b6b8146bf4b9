"""What the run metadata records of one ingested source file: the record every parser returns.

A leaf: it imports nothing of lltrace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SourceInfo:
    """What the run metadata records about one ingested source file."""

    path: str
    format: str
    version: str | None = None
    records: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    truncated: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form for the run metadata."""
        return {
            "path": self.path,
            "format": self.format,
            "version": self.version,
            "records": self.records,
            "dropped": self.dropped,
            "warnings": self.warnings,
            **self.details,
        }

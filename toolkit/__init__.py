"""lltrace: why was this LLM inference request slow?

The public API, loaded lazily (PEP 562: importing ``lltrace`` or ``lltrace.parsers`` loads no analysis
module): ``ingest`` files into a run store (``ingest_each``: many runs in parallel), ``analyze`` a run into
the analysis document, ``report`` it as HTML, ``replay`` it through the scheduler model, ``diff`` two runs,
``weekly`` over a store, ``estimate`` one request shape, ``export_perfetto``; open runs with ``Store`` /
``Run`` and query them with SQL. Errors are the named exceptions of ``lltrace.errors``.

Where things live: ``lltrace.parsers`` (files -> canonical rows), ``lltrace.tables`` (the canonical tables),
``lltrace.store``, ``lltrace.queries`` (SQL views), ``lltrace.ingest`` (assembling a run), ``lltrace.physics``
(catalog, roofline), ``lltrace.analysis``, ``lltrace.replay``, ``lltrace.reports``, ``lltrace.cli``.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from lltrace.version import __version__

# name -> the module that defines it
_EXPORTS = {
    "ingest": "lltrace.ingest.pipeline",
    "ingest_each": "lltrace.ingest.many",
    "BatchResult": "lltrace.ingest.many",
    "analyze": "lltrace.analysis.document",
    "Analysis": "lltrace.analysis.document",
    "report": "lltrace.analysis.report",
    "diff": "lltrace.analysis.diff",
    "weekly": "lltrace.analysis.weekly",
    "export_perfetto": "lltrace.analysis.export",
    "estimate": "lltrace.physics.estimate",
    "replay": "lltrace.replay.document",
    "Store": "lltrace.store",
    "Run": "lltrace.store",
    "LltraceError": "lltrace.errors",
    "TraceFormatError": "lltrace.errors",
    "UnexpectedContent": "lltrace.errors",
    "UnknownFormat": "lltrace.errors",
    "StoreError": "lltrace.errors",
    "AnalysisError": "lltrace.errors",
    "QueryError": "lltrace.errors",
    "InputWarning": "lltrace.errors",
    "TruncatedInput": "lltrace.errors",
}
__all__ = [
    "Analysis",
    "AnalysisError",
    "BatchResult",
    "InputWarning",
    "LltraceError",
    "QueryError",
    "Run",
    "Store",
    "StoreError",
    "TraceFormatError",
    "TruncatedInput",
    "UnexpectedContent",
    "UnknownFormat",
    "__version__",
    "analyze",
    "diff",
    "estimate",
    "export_perfetto",
    "ingest",
    "ingest_each",
    "replay",
    "report",
    "weekly",
]

if TYPE_CHECKING:  # the names as type checkers and editors see them
    from lltrace.analysis.diff import diff
    from lltrace.analysis.document import Analysis, analyze
    from lltrace.analysis.export import export_perfetto
    from lltrace.analysis.report import report
    from lltrace.analysis.weekly import weekly
    from lltrace.errors import (
        AnalysisError,
        InputWarning,
        LltraceError,
        QueryError,
        StoreError,
        TraceFormatError,
        TruncatedInput,
        UnexpectedContent,
        UnknownFormat,
    )
    from lltrace.ingest.many import BatchResult, ingest_each
    from lltrace.ingest.pipeline import ingest
    from lltrace.physics.estimate import estimate
    from lltrace.replay.document import replay
    from lltrace.store import Run, Store


_SUBMODULES = ("errors", "tables", "version", "store", "cli", "parsers", "queries", "reports", "physics", "analysis")


def __getattr__(name: str) -> Any:
    """Load a public name (or a sub-package, ``lltrace.tables``) on first use."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"lltrace.{name}")
    else:
        raise AttributeError(f"module 'lltrace' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


class _Facade(types.ModuleType):
    """``lltrace.ingest`` and ``lltrace.replay`` are functions of the API and also sub-packages: importing
    ``lltrace.ingest.pipeline`` binds the sub-package as an attribute of its parent, which here would hide
    the function. The sub-packages stay importable by name (``from lltrace.ingest.pipeline import ...``);
    the attribute stays the function."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Facade

"""lltrace: why was this LLM inference request slow?

The public API: ``ingest`` files into a run store (``ingest_each``: many runs in parallel), ``analyze`` a
run into the analysis document, open runs with ``Store``/``Run`` and query them with SQL. Errors are the
named exceptions below.
"""

__version__ = "0.1.0"

from lltrace.analysis import Analysis, analyze  # noqa: E402
from lltrace.api import Run, ingest  # noqa: E402
from lltrace.batch import BatchResult, ingest_each  # noqa: E402
from lltrace.errors import (  # noqa: E402
    AnalysisError,
    InputWarning,
    LltraceError,
    StoreError,
    TraceFormatError,
    TruncatedInput,
    UnknownFormat,
)
from lltrace.store import Store  # noqa: E402

__all__ = [
    "Analysis",
    "AnalysisError",
    "BatchResult",
    "InputWarning",
    "LltraceError",
    "Run",
    "Store",
    "StoreError",
    "TraceFormatError",
    "TruncatedInput",
    "UnknownFormat",
    "__version__",
    "analyze",
    "ingest",
    "ingest_each",
]

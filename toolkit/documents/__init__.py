"""The documents lltrace's commands return, declared once as types: what ``analyze``, ``replay``, ``diff``,
``estimate`` and ``weekly`` produce and every renderer reads, with the meaning and unit of every field.

``DOCUMENTS`` maps each document's name to its type; ``checked(doc, kind)`` gives a producer's plain document as
its type (refusing a key the type does not declare, or a value of the wrong type); ``json_schema(kind)`` is the
JSON Schema published in ``docs/schema/``. The shared words (components, queue parts, bottlenecks, step kinds,
outcomes, skip reasons) are the enums of ``lltrace.documents.vocabulary``.

A leaf package: it imports nothing of lltrace but the canonical tables' declarations (field meanings), so
producers and renderers both import it. Importing it loads no document module until one is asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lltrace.documents.analysis import AnalysisDocument
    from lltrace.documents.base import Doc
    from lltrace.documents.diff import DiffDocument
    from lltrace.documents.estimate import EstimateDocument
    from lltrace.documents.replay import ReplayDocument
    from lltrace.documents.weekly import WeeklyDocument

__all__ = [
    "DOCUMENTS",
    "AnalysisDocument",
    "DiffDocument",
    "DocumentError",
    "EstimateDocument",
    "ReplayDocument",
    "WeeklyDocument",
    "checked",
    "plain",
    "json_schema",
]

DOCUMENTS: dict[str, tuple[str, str]] = {
    "analysis": ("lltrace.documents.analysis", "AnalysisDocument"),
    "replay": ("lltrace.documents.replay", "ReplayDocument"),
    "diff": ("lltrace.documents.diff", "DiffDocument"),
    "estimate": ("lltrace.documents.estimate", "EstimateDocument"),
    "weekly": ("lltrace.documents.weekly", "WeeklyDocument"),
}
"""Each document's name -> (module, type)."""


class DocumentError(ValueError):
    """A producer's document broke its declared type (a bug in lltrace: the message names the field)."""


def document_type(kind: str) -> type[Doc]:
    """The type of the document named ``kind`` (a key of ``DOCUMENTS``)."""
    module, name = DOCUMENTS[kind]
    return getattr(importlib.import_module(module), name)


def checked(doc: dict[str, Any], kind: str) -> Any:
    """``doc`` (plain JSON values) as the type of the document ``kind``; ``DocumentError`` names the first field
    that breaks it."""
    import msgspec

    try:
        return msgspec.convert(doc, document_type(kind))
    except msgspec.ValidationError as exc:
        raise DocumentError(f"the {kind} document breaks its declared type: {exc}") from None


def plain(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    """``doc`` checked against the type of the document ``kind``, as plain JSON values again (what a function that
    returns the document as a dict returns)."""
    return checked(doc, kind).to_builtins()


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of the document ``kind``, as published in ``docs/schema/<kind>.schema.json``."""
    import msgspec

    schema = msgspec.json.schema(document_type(kind))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"lltrace {kind} document",
        **schema,
    }


def __getattr__(name: str) -> Any:
    for kind, (_, type_name) in DOCUMENTS.items():
        if name == type_name:
            return document_type(kind)
    raise AttributeError(f"module 'lltrace.documents' has no attribute {name!r}")

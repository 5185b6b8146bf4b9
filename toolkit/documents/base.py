"""What every document type is made of: the base class, the field annotation that carries a field's meaning and
unit, and the marker of a key a document leaves out.

A document is a tree of ``Doc`` classes (msgspec ``Struct``s: fast to build, encode and check, and a JSON Schema
from the same declaration). Every field says what it means and, where it has one, its unit, through ``Meta`` (the
schema's ``description`` and ``x-unit``). A key a document may leave out (rather than write as null) is declared
``T | UnsetType = UNSET``; unknown keys are refused, so a producer that writes a key the types do not declare fails
its tests instead of publishing an undeclared field.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ["UNSET", "Doc", "Row", "UnsetType", "field_doc", "given"]

UNITS = ("s", "ms", "ns", "tokens", "requests", "steps", "count", "fraction", "bytes", "tokens/s", "requests/s", "GB")
"""The units a field may declare (``field_doc``'s ``unit``)."""


def field_doc(meaning: str, unit: str | None = None, **schema: Any) -> msgspec.Meta:
    """A field's meaning, and its unit where it has one (one of ``UNITS``), for ``Annotated[T, field_doc(...)]``:
    the JSON Schema's ``description`` and ``x-unit``."""
    if unit is not None and unit not in UNITS:
        raise ValueError(f"unit {unit!r} is not one of {UNITS}")
    extra = ({"x-unit": unit} if unit else {}) | schema
    return msgspec.Meta(description=meaning, extra_json_schema=extra or None)


def given(value: Any) -> Any:
    """A field's value, None where the document leaves the key out (``UNSET``)."""
    return None if value is UNSET else value


class Doc(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=False):
    """A section of a document (subclasses declare the fields, each with ``field_doc``)."""

    def to_builtins(self) -> dict[str, Any]:
        """The section as plain JSON values (enums as their words, left-out keys absent)."""
        return msgspec.to_builtins(self)


class Row(Doc, kw_only=True):
    """One row of a query view as a document carries it (its columns: the view's header, ``queries/<view>.sql``)."""

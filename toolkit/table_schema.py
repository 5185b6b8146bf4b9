"""How a table of the run store is declared: its columns (type, unit, range, meaning, origin), its row rules,
and the constructors ``lltrace.tables`` declares every table with (a leaf: nothing of lltrace imported)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

ORIGINS = ("source", "derived", "estimated")


@dataclass(frozen=True)
class Column:
    """One column of a canonical table."""

    name: str
    type: pa.DataType
    unit: str | None  # s, ns, tokens, requests, count, fraction, bytes; None for names and flags
    doc: str  # what the column means, one line
    origin: str = "source"  # source | derived | estimated (ORIGINS)
    lo: float | None = None  # physical range, inclusive (None: unbounded on that side)
    hi: float | None = None
    values: tuple[str, ...] | None = None  # the words a text column may hold (None: open)
    whole: bool = False  # a count held as a float (requests running): its values are whole numbers

    @property
    def integer(self) -> bool:
        """Whether the column's values are whole numbers (an integer type, or a count held as a float)."""
        return self.whole or pa.types.is_integer(self.type)

    @property
    def duckdb_type(self) -> str:
        """The column's DuckDB type name."""
        return _DUCK[self.type]


@dataclass(frozen=True)
class RowRule:
    """A physical law between two columns of one row: ``lhs <= rhs`` (a first token never after the end)."""

    lhs: str
    rhs: str
    doc: str
    nulls: tuple[str, ...] = ()  # the columns NULLed where the row breaks it (default: lhs and rhs)

    @property
    def nulled(self) -> tuple[str, ...]:
        """The columns set to NULL in a row that breaks the rule."""
        return self.nulls or (self.lhs, self.rhs)

    @property
    def name(self) -> str:
        """The rule as written in warnings and the run metadata."""
        return f"{self.lhs} <= {self.rhs}"


@dataclass(frozen=True)
class Table:
    """One canonical table: what a row is, and its columns in order."""

    name: str
    row: str  # "one row per ..."
    doc: str
    columns: tuple[Column, ...]
    internal: bool = False  # a staging table of the ingest, never in the store
    rules: tuple[RowRule, ...] = ()  # laws between columns; a row that breaks one has both values NULLed

    @property
    def names(self) -> list[str]:
        """The column names, in order."""
        return [c.name for c in self.columns]

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema parsers write."""
        return pa.schema([(c.name, c.type) for c in self.columns])

    @property
    def duckdb_types(self) -> dict[str, str]:
        """Column name -> DuckDB type."""
        return {c.name: c.duckdb_type for c in self.columns}

    def column(self, name: str) -> Column:
        """One column by name (KeyError when the table has none)."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.name}.{name}")


_DUCK = {pa.string(): "VARCHAR", pa.int32(): "INTEGER", pa.int64(): "BIGINT", pa.float64(): "DOUBLE"}
_DUCK |= {pa.bool_(): "BOOLEAN", pa.list_(pa.int64()): "BIGINT[]"}
S, I64, I32, F64, B, IDS = pa.string(), pa.int64(), pa.int32(), pa.float64(), pa.bool_(), pa.list_(pa.int64())


def column(name: str, typ: pa.DataType, unit: str | None, doc: str, origin: str = "source", **kw: Any) -> Column:
    """A column of any type."""
    return Column(name, typ, unit, doc, origin, **kw)


def seconds(name: str, doc: str, origin: str = "source", lo: float | None = 0.0) -> Column:
    """A duration in seconds (non-negative unless ``lo`` says otherwise)."""
    return Column(name, F64, "s", doc, origin, lo=lo)


def count(name: str, doc: str, unit: str = "count", origin: str = "source", typ: pa.DataType = I64) -> Column:
    """A whole, non-negative count."""
    return Column(name, typ, unit, doc, origin, lo=0, whole=True)


def time_point(name: str, doc: str, origin: str = "source") -> Column:
    """A point on the run clock (seconds; epoch seconds where a source is dated, else the source's origin)."""
    return Column(name, F64, "s", doc, origin)

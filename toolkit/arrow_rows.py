"""Python rows into Arrow tables, fast: ``table_from_rows`` builds each column from buffers (pyarrow converts
Python lists only after importing pandas where it is installed), and ``IntegerOverflow`` is the error for a
whole number beyond int64 (a damaged source: no tool writes one). A leaf: it imports nothing of lltrace."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

_NUMPY = {
    pa.int8(): np.int8,
    pa.int16(): np.int16,
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.uint32(): np.uint32,
    pa.uint64(): np.uint64,
    pa.float32(): np.float32,
    pa.float64(): np.float64,
}


class IntegerOverflow(ValueError):
    """A whole number too large for its 64-bit integer column: the source is damaged (no tool writes one)."""

    def __init__(self, column: str, row: int, value: int) -> None:
        self.column, self.row, self.value = column, row, value
        super().__init__(f"{value} in {column} (row {row + 1}) does not fit a 64-bit integer")


_INT64 = (-(2**63), 2**63 - 1)


def table_from_rows(rows: Sequence[Mapping[str, Any]], schema: Any) -> pa.Table:
    """``pa.Table.from_pylist(rows, schema)``, for numbers, booleans, strings and lists of integers, built from
    buffers: pyarrow converts Python lists only after importing pandas where it is installed (0.2 s a run).
    Raises ``IntegerOverflow`` for a whole number beyond int64 in an integer column."""
    schema = getattr(schema, "schema", schema)  # a pa.Schema, or a canonical table (lltrace.tables.Table)
    columns = []
    for f in schema:
        values = [r.get(f.name) for r in rows]
        try:
            columns.append(_column(values, f.type))
        except (OverflowError, pa.ArrowInvalid):
            _fits_int64(f.name, values)  # raises IntegerOverflow where that was the cause
            raise
    return pa.Table.from_arrays(columns, schema=schema)


def _fits_int64(name: str, values: list[Any]) -> None:
    for i, v in enumerate(values):
        for x in v if type(v) is list else (v,):
            if type(x) is int and not _INT64[0] <= x <= _INT64[1]:
                raise IntegerOverflow(name, i, x)


def _validity(values: list[Any]) -> tuple[pa.Buffer | None, int]:
    present = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    nulls = len(values) - int(present.sum())
    return (pa.py_buffer(np.packbits(present, bitorder="little")) if nulls else None), nulls


def _column(values: list[Any], typ: pa.DataType) -> pa.Array:
    n = len(values)
    valid, nulls = _validity(values)
    accepted = (int,) if pa.types.is_integer(typ) else (int, float)
    if typ in _NUMPY and all(v is None or type(v) in accepted for v in values):
        data = np.array([0 if v is None else v for v in values], dtype=_NUMPY[typ])
        return pa.Array.from_buffers(typ, n, [valid, pa.py_buffer(data)], null_count=nulls)
    if typ == pa.bool_() and all(v is None or type(v) is bool for v in values):
        bits = np.packbits(np.fromiter((bool(v) for v in values), dtype=bool, count=n), bitorder="little")
        return pa.Array.from_buffers(typ, n, [valid, pa.py_buffer(bits)], null_count=nulls)
    if typ == pa.string() and all(v is None or type(v) is str for v in values):
        encoded = [b"" if v is None else v.encode() for v in values]
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        if offsets[-1] < 2**31:
            return pa.Array.from_buffers(
                typ,
                n,
                [valid, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))],
                null_count=nulls,
            )
    if typ == pa.list_(pa.int64()) and all(v is None or isinstance(v, list) for v in values):
        flat = [x for v in values if v is not None for x in v]
        items = _column(flat, pa.int64())
        if items.type == pa.int64() and len(flat) < 2**31:
            offsets = np.zeros(n + 1, dtype=np.int32)
            np.cumsum([0 if v is None else len(v) for v in values], out=offsets[1:])
            return pa.Array.from_buffers(typ, n, [valid, pa.py_buffer(offsets)], null_count=nulls, children=[items])
    return pa.array(values, typ)  # anything else: pyarrow's own conversion (and its errors)

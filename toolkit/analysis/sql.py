"""Rows of a query as plain JSON values (NaN and infinities as None): what the documents are made of."""

from __future__ import annotations

import math
from typing import Any

import duckdb


def clean(v: Any) -> Any:
    """A value a JSON document can hold: NaN and infinities become None."""
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def rows(con: duckdb.DuckDBPyConnection, query: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    """The query's rows as dicts of clean values."""
    cur = con.execute(query, params or [])
    cols = [d[0] for d in cur.description]
    return [{c: clean(v) for c, v in zip(cols, row, strict=True)} for row in cur.fetchall()]

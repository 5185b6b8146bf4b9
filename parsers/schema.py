"""The canonical ``requests`` table's columns, declared once (Arrow types; DuckDB types derived), and Arrow tables
built from rows without pandas."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

REQUEST_SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("client_id", pa.string()),
        ("client_index", pa.int64()),
        ("arrival_s", pa.float64()),
        ("queued_s", pa.float64()),
        ("scheduled_s", pa.float64()),
        ("first_token_s", pa.float64()),
        ("last_token_s", pa.float64()),
        ("finished_s", pa.float64()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("cached_tokens", pa.int64()),
        ("prefix_block_ids", pa.list_(pa.int64())),
        ("num_preemptions", pa.int64()),
        ("status", pa.string()),
        ("ttft_s", pa.float64()),
        ("e2e_s", pa.float64()),
        ("queue_s", pa.float64()),
        ("prefill_s", pa.float64()),
        ("decode_s", pa.float64()),
        ("server_ttft_s", pa.float64()),
        ("server_e2e_s", pa.float64()),
        ("client_start_s", pa.float64()),
        ("arrival_ns", pa.int64()),
        ("matched_by", pa.string()),
        # Time between a preemption and the request's rescheduling, where a source gives both timestamps
        # (vLLM journey events); the part of it before the first token lies inside prefill_s, the rest in
        # decode_s (the engine's intervals include it).
        ("preempted_s", pa.float64()),
        ("preempted_in_prefill_s", pa.float64()),
        # Estimated split of a client-measured TTFT (no engine-side timestamps): labelled, never mixed with
        # the measured queue_s / prefill_s above.
        ("queue_s_est", pa.float64()),
        ("prefill_s_est", pa.float64()),
        ("split_basis", pa.string()),
    ]
)

_DUCK = {pa.string(): "VARCHAR", pa.int64(): "BIGINT", pa.float64(): "DOUBLE", pa.list_(pa.int64()): "BIGINT[]"}
REQUEST_DUCKDB_TYPES = {f.name: _DUCK[f.type] for f in REQUEST_SCHEMA}


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


def table_from_rows(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """``pa.Table.from_pylist(rows, schema)``, for numbers, booleans, strings and lists of integers, built from
    buffers: pyarrow converts Python lists only after importing pandas where it is installed (0.2 s a run)."""
    return pa.Table.from_arrays([_column([r.get(f.name) for r in rows], f.type) for f in schema], schema=schema)


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

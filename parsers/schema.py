"""The canonical ``requests`` table's columns, declared once (Arrow types; DuckDB types derived)."""

from __future__ import annotations

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

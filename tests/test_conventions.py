"""Conventions that keep the project readable: SQL headers, CLI help, the kernel rule table."""

from __future__ import annotations

import re

import duckdb
import pytest
from typer.testing import CliRunner

from lltrace.cli import app
from lltrace.parsers.kernel_classes import KERNEL_CLASSES, classify, rules
from lltrace.queries import install_views, query_files

KERNELS_COLUMNS = (
    "run_id VARCHAR, part INTEGER, device BIGINT, ts_ns BIGINT, dur_ns BIGINT, kernel_class VARCHAR, "
    "attention_variant VARCHAR"
)

# the columns parsers/kineto.py writes for CPU ops and annotations (plus run_id)
OPS_COLUMNS = (
    "run_id VARCHAR, part INTEGER, cat VARCHAR, name VARCHAR, pid VARCHAR, tid VARCHAR, ts_ns BIGINT, "
    "dur_ns BIGINT, external_id BIGINT, correlation BIGINT, ev_idx BIGINT, cbid BIGINT, input_dims VARCHAR"
)
ANNOTATION_COLUMNS = (
    "run_id VARCHAR, part INTEGER, cat VARCHAR, name VARCHAR, pid VARCHAR, tid VARCHAR, ts_ns BIGINT, "
    "dur_ns BIGINT, external_id BIGINT, ev_idx BIGINT, on_gpu BOOLEAN, input_dims VARCHAR"
)


def _empty_store_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every canonical table, empty, with the columns the parsers declare (plus run_id)."""
    import pyarrow as pa

    from lltrace.parsers.schema import REQUEST_SCHEMA
    from lltrace.parsers.vllm import LOG_STATS_SCHEMA, LOG_STEP_SCHEMA

    con.execute(f"CREATE TABLE kernels ({KERNELS_COLUMNS})")
    con.execute(f"CREATE TABLE ops ({OPS_COLUMNS})")
    con.execute(f"CREATE TABLE annotations ({ANNOTATION_COLUMNS})")
    for name, schema in (
        ("requests", REQUEST_SCHEMA),
        ("engine_stats", LOG_STATS_SCHEMA),
        ("engine_steps", LOG_STEP_SCHEMA),
    ):
        empty = schema.empty_table().append_column("run_id", pa.array([], pa.string()))
        con.register(f"_{name}", empty)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM _{name}")
    return ["kernels", "ops", "annotations", "requests", "engine_stats", "engine_steps"]


@pytest.mark.parametrize("q", query_files(), ids=lambda q: q.name)
def test_sql_file_has_header_and_documents_every_column(q):
    lines = q.text.splitlines()
    assert lines[0].startswith(f"-- {q.name}: "), "first line: '-- <view>: what it answers'"
    assert q.requires, "a '-- requires:' line"
    assert f"CREATE OR REPLACE VIEW {q.name} AS" in q.text
    con = duckdb.connect()
    created = install_views(con, _empty_store_tables(con))
    assert q.name in created, "the view could not be created over the canonical tables"
    out_cols = [r[0] for r in con.execute(f"DESCRIBE {q.name}").fetchall()]
    documented = re.findall(r"^--\s{3}(\w+)\s", q.text, re.MULTILINE)
    assert documented == out_cols


def test_every_command_has_help():
    runner = CliRunner()
    for name in ("ingest", "analyze", "formats", "sql"):
        r = runner.invoke(app, [name, "--help"])
        assert r.exit_code == 0
        assert len(r.stdout.strip().splitlines()) > 3


def test_kernel_rules_are_valid_and_cover_known_kernels():
    assert {r.kernel_class for r in rules()} <= set(KERNEL_CLASSES)
    known = {
        "flash_fwd_splitkv_kernel": ("attention", "decode"),
        "flash_fwd_splitkv_combine_kernel": ("attention", "decode"),
        "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>": ("attention", "prefill"),
        "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<cute::tuple<cute::C<64>, "
        "cute::C<128>, cute::C<128>>>>>": ("attention", "decode"),
        "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<cute::tuple<cute::C<128>, "
        "cute::C<128>, cute::C<128>>>>>": ("attention", "prefill"),
        "void vllm::paged_attention_v2_kernel<__nv_bfloat16>": ("attention", "decode"),
        "void vllm::paged_attention_v2_reduce_kernel<__nv_bfloat16>": ("attention", "decode"),
        "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext": (
            "attention",
            "prefill",
        ),
        "ck_tile::FmhaBatchPrefillWithPagedKVCacheKernel<>": ("attention", "prefill"),
        "void paged_attention_ll4mi_QKV_mfma16_kernel<0>": ("attention", "decode"),
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)": ("communication", None),
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>": ("communication", None),
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64": ("gemm", None),
        "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x32x256": ("gemm", None),
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16>": ("memory", "kv_write"),
        "void vllm::rms_norm_kernel<c10::BFloat16>": ("elementwise", None),
        "triton_poi_fused_add_cos_sin_0": ("elementwise", None),
        "some_custom_thing": ("other", None),
    }
    for name, expect in known.items():
        assert classify(name) == expect, name
    assert classify("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy") == ("memory", None)
    assert classify("Stream Sync", "cuda_sync") == ("sync", None)


def test_readme_request_format_example_ingests(tmp_path):
    """The README's example of lltrace's own request format is read as documented."""
    from conftest import REPO

    import lltrace

    text = (REPO / "README.md").read_text()
    block = re.search(r"```csv\n(.*?)```", text, re.DOTALL).group(1)
    path = tmp_path / "own.csv"
    path.write_text(block)
    run = lltrace.ingest([path], store=tmp_path / "store")
    rows = run.table("requests").sort("request_id").to_dicts()
    assert [(r["request_id"], r["input_tokens"], r["ttft_s"]) for r in rows] == [
        ("r-0001", 1840, 0.412),
        ("r-0002", 96, 0.081),
    ]
    assert rows[0]["arrival_ns"] == 1767323045500000000

"""Conventions that keep the project readable: SQL headers, CLI help, the kernel rule table."""

from __future__ import annotations

import re

import duckdb
import pytest
from conftest import canonical_tables
from typer.testing import CliRunner

from lltrace.cli import app
from lltrace.parsers.kernel_classes import KERNEL_CLASSES, classify, launched_every_step, rules
from lltrace.queries import install_views, query_files
from lltrace.tables import TABLES


def _documented(text: str) -> list[str]:
    """The output columns a query file's header documents, ``table.*`` expanded: a canonical table's declared
    columns then run_id (the store's view of it), or another view's documented columns."""
    out: list[str] = []
    for name in re.findall(r"^--\s{3}([\w.]+\*?)\s", text, re.MULTILINE):
        if name.endswith(".*"):
            base = name[:-2]
            if base in TABLES:
                out += [*TABLES[base].names, "run_id"]
            else:
                out += _documented(next(q.text for q in query_files() if q.name == base))
        else:
            out.append(name)
    return out


@pytest.mark.parametrize("q", query_files(), ids=lambda q: q.name)
def test_sql_file_has_header_and_documents_every_column(q):
    lines = q.text.splitlines()
    assert lines[0].startswith(f"-- {q.name}: "), "first line: '-- <view>: what it answers'"
    assert re.search(r"^-- requires: \S", q.text, re.MULTILINE), "a '-- requires:' line (tables, views or none)"
    con = duckdb.connect()
    canonical_tables(con)
    created = install_views(con)  # every view binds over the canonical tables (else a QueryError)
    assert q.name in created
    if q.kind == "macro":
        assert f"CREATE OR REPLACE MACRO {q.name}(" in q.text
        table = re.search(rf"MACRO {q.name}\(([^)]*)\) AS TABLE", q.text)
        if table:  # a table macro: its rows' columns, with every parameter NULL
            args = ", ".join("NULL" for _ in table.group(1).split(","))
            out_cols = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {q.name}({args})").fetchall()]
        else:
            out_cols = [r[0] for r in con.execute(f"DESCRIBE SELECT unnest({q.name}(1.0))").fetchall()]
    else:
        assert f"CREATE OR REPLACE VIEW {q.name} AS" in q.text
        out_cols = [r[0] for r in con.execute(f"DESCRIBE {q.name}").fetchall()]
    assert _documented(q.text) == out_cols


def test_every_command_has_help():
    import typer.main

    runner = CliRunner()
    group = typer.main.get_command(app)
    commands = [[n] for n, c in group.commands.items() if not hasattr(c, "commands")]
    commands += [[n, s] for n, c in group.commands.items() if hasattr(c, "commands") for s in c.commands]
    names = {" ".join(c) for c in commands}
    assert {"ingest", "analyze", "report", "diff", "weekly", "replay", "estimate", "sql", "formats"} <= names
    assert "export perfetto" in names
    for cmd in commands:
        for flag in ("--help", "-h"):
            r = runner.invoke(app, [*cmd, flag])
            assert r.exit_code == 0, cmd
            assert len(r.stdout.strip().splitlines()) > 3, cmd


def test_decode_kernels_a_backend_launches_for_every_batch_are_marked():
    """vLLM's ROCM_ATTN (chunked_prefill_paged_decode) launches its paged decode kernel, Triton or ROCm ll4mi,
    for every batch: beside a prefill kernel it says nothing of decode requests (step_kinds.csv)."""
    names = [
        "void paged_attention_ll4mi_QKV_mfma16_kernel<__hip_bfloat16, 16, 128>",
        "kernel_paged_attention_2d",
        "void vllm::paged_attention_v2_kernel<__nv_bfloat16>",
        "flash_fwd_splitkv_combine_kernel",
    ]
    assert launched_every_step(names) == names[:2]


def test_kernel_rules_are_valid_and_cover_known_kernels():
    assert {r.kernel_class for r in rules()} <= set(KERNEL_CLASSES)
    known = {
        "flash_fwd_splitkv_kernel": ("attention", None),  # forced for every paged-KV call: no phase
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
        # names as the engines' sources launch them (no real trace of these in sample_traces/)
        "kernel_unified_attention_3d": ("attention", "decode"),
        "reduce_segments": ("attention", "decode"),
        "kernel_unified_attention_2d": ("attention", None),  # serves prefill, mixed and large decode batches
        "kernel_unified_attention": ("attention", None),  # one name for 2D and 3D since 2026: reduce_segments tells
        "kernel_paged_attention_2d": ("attention", "decode"),
        "_fwd_kernel": ("attention", "prefill"),
        "_fwd_grouped_kernel_stage1": ("attention", "decode"),
        "_fwd_kernel_stage2": ("attention", "decode"),
        "void mmha::masked_multihead_attention_kernel<__nv_bfloat16, 128>": ("attention", "decode"),
        "kernel_mha": ("attention", "decode"),
        "fmha_v2_flash_attention_bf16_64_128_S_q_paged_kv_128_sm90_kernel_nl": ("attention", "prefill"),
        "ck_tile::kentry<FmhaFwdSplitKVKernel<>>": ("attention", "decode"),
        "BatchDecodeWithPagedKVCacheKernel<>": ("attention", "decode"),
        "BatchPrefillWithPagedKVCacheKernel<>": ("attention", "prefill"),
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)": ("communication", None),
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>": ("communication", None),
        # the expert-parallel all-to-all: DeepSeek's H800 profile (deepseek-ai/profile-data train.json, 46 % of its
        # GPU time) and DeepEP's and MoRI's kernels as their sources name them
        "void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*, float*)": (
            "communication",
            None,
        ),
        "void dpsk::ep::internode::cached_notify<false>(int, int, int, int, int*, int)": ("communication", None),
        "void deep_ep::internode_ll::dispatch<true, 3, 7168>(void*, float*)": ("communication", None),
        "void deep_ep::intranode::notify_dispatch<8>(int const*, int*)": ("communication", None),
        "void mori::moe::EpCombineIntraNodeKernel<__hip_bfloat16>(mori::moe::EpDispatchCombineArgs)": (
            "communication",
            None,
        ),
        "void cuda::per_token_cast_to_fp8_with_channels<__nv_bfloat16, 128, false, 128, false>(__nv_bfloat16*)": (
            "elementwise",
            None,
        ),
        "void cuda::batched_transpose<512, 128, 1, 1>(unsigned char const*, unsigned char*, int)": (
            "elementwise",
            None,
        ),
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

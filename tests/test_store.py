"""The run store: atomic, idempotent, queryable across runs."""

from __future__ import annotations

import shutil

import pytest
from conftest import SAMPLES

import lltrace
from lltrace.errors import StoreError, TraceFormatError

MI300X = SAMPLES / "torch" / "sglang_mi300x_qwen3-8b_decode_step.AMD.json.gz"
B200 = SAMPLES / "torch" / "vllm_b200_tp8_gptoss_mxfp4_prefill_eager.rank0.json.gz"


def test_reingest_is_idempotent(store):
    a = lltrace.ingest([MI300X], store=store)
    b = lltrace.ingest([MI300X], store=store)
    assert a.id == b.id and b.reused and not a.reused
    assert lltrace.Store(store).run_ids() == [a.id]
    assert len(list((store / "kernels").glob("run_id=*/*.parquet"))) == 1
    meta = a.metadata
    assert meta["sources"][0]["sha256"] and meta["lltrace_version"] == lltrace.__version__
    assert meta["sources"][0]["clock"]["origin"] == "baseTimeNanoseconds + ts"


def test_named_runs_and_queries_across_runs(store):
    lltrace.ingest([MI300X], store=store, run="decode")
    lltrace.ingest([B200], store=store, run="prefill")
    con = lltrace.Store(store).connect()
    rows = con.execute("SELECT run_id, kind FROM engine_steps ORDER BY run_id").fetchall()
    assert rows == [("decode", "decode"), ("prefill", "prefill")]
    with pytest.raises(StoreError, match="invalid run name"):
        lltrace.ingest([MI300X], store=store, run="../escape")


def test_a_failed_ingest_leaves_the_store_as_it_was(store, tmp_path):
    good = lltrace.ingest([MI300X], store=store, run="r1")
    before = sorted(p.relative_to(store) for p in store.rglob("*") if ".staging" not in p.parts)
    folder = tmp_path / "two"
    folder.mkdir()
    shutil.copy(B200, folder / "a.json.gz")
    (folder / "b.json").write_bytes(b'{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": 1}, {"ph": ]}')
    with pytest.raises(TraceFormatError):
        lltrace.ingest([folder], store=store, run="r1", force=True)
    after = sorted(p.relative_to(store) for p in store.rglob("*") if ".staging" not in p.parts)
    assert after == before
    assert not any((store / ".staging").iterdir())
    assert lltrace.Store(store).metadata("r1")["input_digest"] == good.metadata["input_digest"]


def test_unknown_run_is_a_named_error(store):
    with pytest.raises(StoreError, match="no run 'nope'"):
        lltrace.Store(store).metadata("nope")


def test_a_runs_replay_is_kept_until_the_run_is_replaced_or_deleted(store):
    run = lltrace.ingest([MI300X], store=store, run="r1")
    st = lltrace.Store(store)
    assert st.replay("r1") is None
    st.save_replay("r1", {"run": "r1", "baseline": {"preemptions": 3}})
    assert st.replay("r1") == {"run": "r1", "baseline": {"preemptions": 3}}
    assert not list((store / "replays").glob(".*"))  # no temporary file left behind
    with pytest.raises(StoreError, match="no run 'other'"):
        st.save_replay("other", {})
    lltrace.ingest([B200], store=store, run="r1", force=True)  # new tables under the name: the replay is stale
    assert st.replay("r1") is None
    st.save_replay("r1", {"run": "r1"})
    st.delete_run(run.id)
    assert st.replay("r1") is None

"""The event-array scanner and locator on edge cases, against json.loads of the same bytes."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

import lltrace
from lltrace.parsers import _blocks, _jsonscan
from lltrace.parsers._jsonscan import EventArrayScanner, locate_event_array

TRICKY = [
    {
        "ph": "X",
        "cat": "kernel",
        "name": 'void f<{lambda()#1}, std::array<char*, 2>>("x", [y])',
        "pid": 0,
        "tid": 7,
        "ts": "@TS1@",
        "dur": 1.5,
        "args": {"correlation": 9, "grid": [1, 2, 3]},
    },
    {
        "ph": "X",
        "cat": "cpu_op",
        "name": 'quote \\" and backslash \\\\ and \\\\\\" end',
        "pid": 1,
        "tid": 1,
        "ts": "@TS2@",
        "dur": 10,
        "args": {"Input Dims": [[[1, 2]], [3], []], "External id": 4},
    },
    {
        "ph": "X",
        "cat": "cpu_op",
        "name": "unicode \\u00e9 \u00e9 }, {",
        "pid": 1,
        "tid": 1,
        "ts": 1712195495519691,
        "dur": 0,
        "args": {},
    },
    {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python3"}},
]


def _doc(events, meta_before=True, compact=False):
    meta = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}
    tail = {"traceName": '/tmp/x]{"y', "displayTimeUnit": "ms"}
    ev = ", ".join(json.dumps(e) for e in events)
    sep = "" if compact else "\n  "
    body = f'"traceEvents": [{sep}{ev}{sep}]'
    before = json.dumps(meta)[1:-1] + ", " if meta_before else ""
    after = ", " + json.dumps(tail)[1:-1]
    # Timestamps as Kineto writes them: absolute us with ns decimals (a float64 cannot hold them).
    text = "{" + before + body + after + "}"
    return text.replace('"@TS1@"', "1712195495519695.812").replace('"@TS2@"', "1712195495519690.001").encode()


def _events(path, block):
    sc = EventArrayScanner(str(path), block_bytes=block)
    lines = [ln for b in sc.batches() for ln in b.data.split(b"\n") if ln.strip()]
    return [json.loads(ln, parse_float=Decimal) for ln in lines], sc.result


@pytest.mark.parametrize("block", [1, 2, 3, 7, 64, 1 << 20])
@pytest.mark.parametrize("meta_before", [True, False])
def test_scanner_matches_json_loads_at_any_block_size(block, meta_before, tmp_path):
    data = _doc(TRICKY, meta_before)
    path = tmp_path / "t.json"
    path.write_bytes(data)
    ref = json.loads(data, parse_float=Decimal)
    events, res = _events(path, block)
    assert events == ref["traceEvents"]
    assert res.metadata == {k: v for k, v in ref.items() if k != "traceEvents"}
    assert res.truncated is None


def test_locator_finds_the_array_despite_brackets_in_strings(tmp_path):
    data = _doc(TRICKY, meta_before=False)
    path = tmp_path / "t.json"
    path.write_bytes(data)
    loc = locate_event_array(str(path), len(data))
    assert data[loc.open : loc.open + 1] == b"[" and data[loc.close : loc.close + 1] == b"]"
    assert json.loads(data[loc.open : loc.close + 1]) == json.loads(data)["traceEvents"]
    assert loc.metadata["traceName"] == '/tmp/x]{"y'


def test_locator_is_not_fooled_by_an_array_of_objects_after_the_events(tmp_path):
    # Real H100 traces write deviceProperties (one object per GPU) after traceEvents: its objects parse on
    # their own and what follows closes the document, but they are not events (no "ph").
    gpus = [{"id": i, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936} for i in range(8)]
    doc = {"traceEvents": TRICKY, "schemaVersion": 1, "deviceProperties": gpus, "baseTimeNanoseconds": 5}
    data = json.dumps(doc, indent=2).encode()
    path = tmp_path / "t.json"
    path.write_bytes(data)
    loc = locate_event_array(str(path), len(data))
    assert json.loads(data[loc.open : loc.close + 1]) == TRICKY
    assert loc.metadata["deviceProperties"] == gpus and loc.metadata["schemaVersion"] == 1


def test_locator_gives_up_on_a_truncated_document(tmp_path):
    data = _doc(TRICKY)
    path = tmp_path / "t.json"
    path.write_bytes(data[:-40])
    assert locate_event_array(str(path), len(data) - 40) is None


def test_bare_event_array(tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(json.dumps(TRICKY).encode())
    events, res = _events(path, 5)
    assert events == json.loads(json.dumps(TRICKY), parse_float=Decimal) and res.array_form


@pytest.mark.parametrize("fast", [True, False])
def test_both_read_paths_keep_exact_nanoseconds(fast, tmp_path, monkeypatch, store):
    if not fast:
        monkeypatch.setattr("lltrace.parsers.kineto.locate_event_array", lambda *a: None)
    path = tmp_path / "t.json"
    path.write_bytes(_doc(TRICKY, compact=True))
    run = lltrace.ingest([path], store=store)
    k = run.table("kernels").to_dicts()
    assert [r["ts_ns"] for r in k] == [1712195495519695812]  # absolute us with ns decimals, exact
    assert k[0]["grid"] == "[1,2,3]" and k[0]["kernel_class"] == "other"
    ops = run.sql("SELECT ts_ns, dur_ns, input_dims, external_id FROM ops ORDER BY ts_ns").to_dicts()
    assert [(o["ts_ns"], o["dur_ns"]) for o in ops] == [(1712195495519690001, 10000), (1712195495519691000, 0)]
    assert json.loads(ops[0]["input_dims"]) == [[[1, 2]], [3], []]
    assert run.metadata["sources"][0]["records"] == 4


def test_gzip_multimember_and_truncation(tmp_path):
    import gzip

    data = _doc(TRICKY)
    half = len(data) // 2
    path = tmp_path / "m.json.gz"
    path.write_bytes(gzip.compress(data[:half]) + gzip.compress(data[half:]))
    events, res = _events(path, 16)
    assert events == json.loads(data, parse_float=Decimal)["traceEvents"]
    cut = tmp_path / "cut.json.gz"
    whole = gzip.compress(data)
    cut.write_bytes(whole[: len(whole) - 30])
    events, res = _events(cut, 16)
    assert res.truncated and "gzip stream ends early" in res.truncated
    assert events == json.loads(data, parse_float=Decimal)["traceEvents"][: len(events)]


def _gunzipped(path, dest):
    cut: list[str] = []
    _blocks.gunzip_to(str(path), dest, cut.append)
    return dest.read_bytes(), cut


def _read(path, block):
    cut: list[str] = []
    return b"".join(_blocks.read_blocks(str(path), block, cut.append)), cut


def test_gunzip_to_writes_what_read_blocks_reads(tmp_path):
    """The fast path's gunzip (inflating and writing on two threads) against the streaming reader's blocks, and
    against the bytes compressed: several members with zero padding after them, a stream cut short, corrupt data."""
    import gzip

    data = _doc(TRICKY) * 50
    third = len(data) // 3
    multi = tmp_path / "multi.json.gz"
    multi.write_bytes(gzip.compress(data[:third]) + gzip.compress(data[third:]) + b"\x00" * 1000)
    assert _gunzipped(multi, tmp_path / "multi.json") == (data, [])
    assert _read(multi, 4096) == (data, [])
    whole = gzip.compress(data)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    written, why = _gunzipped(cut, tmp_path / "cut.json")
    assert (written, why) == _read(cut, 4096)
    assert written and data.startswith(written)
    assert why == [f"gzip stream ends early after {len(written)} decompressed bytes"]
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(whole[:20] + bytes(b ^ 0xFF for b in whole[20:60]) + whole[60:])
    with pytest.raises(lltrace.TraceFormatError, match="corrupt gzip data"):
        _gunzipped(bad, tmp_path / "bad.json")
    with pytest.raises(lltrace.TraceFormatError, match="corrupt gzip data"):
        _read(bad, 4096)


def test_corrupt_gzip_data_is_named_where_it_goes_bad(tmp_path):
    """Damage half way through a compressed trace is named at the decompressed byte where zlib, fed a byte at a
    time, stops (to within what a kilobyte of compressed data holds), not at the start of the block read."""
    import gzip
    import random
    import zlib

    rng = random.Random(7)
    data = b"".join(b'{"ph": "X", "ts": %d, "name": "op%d"},' % (rng.randrange(10**9), i) for i in range(200_000))
    whole = gzip.compress(data)
    mid = len(whole) // 2
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(whole[:mid] + b"\xff" * 64 + whole[mid + 64 :])
    inflater, good = zlib.decompressobj(31), 0
    for b in bad.read_bytes():
        try:
            good += len(inflater.decompress(bytes([b])))
        except zlib.error:
            break
    with pytest.raises(lltrace.TraceFormatError, match="corrupt gzip data") as err:
        _gunzipped(bad, tmp_path / "bad.json")
    named = int(str(err.value).split("decompressed byte ")[1].split(":")[0])
    assert 0 < good - 64 * 1024 <= named <= good


def test_block_constant_is_sane():
    assert _jsonscan.BLOCK_BYTES >= 1 << 20


def test_pytorch_1_9_format_capitalised_categories_and_string_tids(tmp_path, store):
    """2021 (PT 1.8-1.10) traces: Operator/Runtime/Kernel cats, tid "stream 7", lower-case "external id"."""
    doc = {
        "schemaVersion": 1,
        "traceEvents": [
            {
                "ph": "X",
                "cat": "Operator",
                "name": "aten::mm",
                "pid": "1234",
                "tid": "1234",
                "ts": 1631000000000100,
                "dur": 50,
                "args": {"Input Dims": [[8, 16], [16, 32]], "Device": 0},
            },
            {
                "ph": "X",
                "cat": "Runtime",
                "name": "cudaLaunchKernel",
                "pid": "1234",
                "tid": "1234",
                "ts": 1631000000000110,
                "dur": 5,
                "args": {"correlation": 77, "external id": 3},
            },
            {
                "ph": "X",
                "cat": "Kernel",
                "name": "volta_sgemm_128x64_nn",
                "pid": 0,
                "tid": "stream 7",
                "ts": 1631000000000120,
                "dur": 20,
                "args": {"correlation": 77, "external id": 3, "device": 0},
            },
            {
                "ph": "s",
                "cat": "async",
                "name": "launch",
                "id": 77,
                "pid": "1234",
                "tid": "1234",
                "ts": 1631000000000110,
            },
            {
                "ph": "f",
                "cat": "async",
                "name": "launch",
                "id": 77,
                "pid": 0,
                "tid": "stream 7",
                "ts": 1631000000000120,
                "bp": "e",
            },
        ],
    }
    path = tmp_path / "pt19.json"
    path.write_text(json.dumps(doc))
    run = lltrace.ingest([path], store=store)
    k = run.table("kernels").to_dicts()[0]
    assert (k["cat"], k["stream"], k["external_id"], k["kernel_class"], k["orphan"]) == ("kernel", 7, 3, "gemm", False)
    assert k["launch_name"] == "cudaLaunchKernel" and k["ts_ns"] == 1631000000000120000
    assert "2021" in run.metadata["sources"][0]["version"]
    flows = run.table("flows")
    assert flows["cat"].to_list() == ["ac2g", "ac2g"]

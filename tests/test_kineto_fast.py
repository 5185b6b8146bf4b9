"""The compiled profiler reader against DuckDB's: the same tables, rows and metadata for every input.

``parsers/_kineto_fast.c`` reads the common case of a trace's event array and declines the rest
(``LLTRACE_PURE=1`` turns it off). Its correctness claim is equality with the DuckDB reader, checked here
on every real trace, on hand-made edge cases (each written to be read or declined), and on the damaged
inputs of tests/data/bad.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import warnings
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from conftest import DATA, REPO, SAMPLES, TORCH, torch_traces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lltrace.errors import LltraceError
from lltrace.parsers import kineto, kineto_fast, kineto_stream

TABLES = ("kernels", "ops", "annotations", "flows")


def _stage(path: Path, tmp: Path, pure: bool, monkeypatch: pytest.MonkeyPatch, **kw) -> tuple[Path, object]:
    """Stage one file with one reader; returns the stage folder and the SourceInfo or the error text."""
    stage = tmp / ("pure" if pure else "compiled")
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    with monkeypatch.context() as m:
        m.setenv("LLTRACE_PURE", "1" if pure else "0")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return stage, kineto.ingest(str(path), stage, 0, **kw)
            except LltraceError as exc:
                return stage, f"{type(exc).__name__}: {exc}"


def _differences(a: Path, b: Path) -> list[str]:
    con = duckdb.connect()
    out = []
    for t in TABLES:
        if not list((a / t).glob("*.parquet")) and not list((b / t).glob("*.parquet")):
            continue

        def q(d: Path, t: str = t) -> str:
            return f"SELECT * FROM read_parquet('{d}/{t}/*.parquet')"

        types = [con.execute(f"DESCRIBE {q(d)}").fetchall() for d in (a, b)]
        if [r[:2] for r in types[0]] != [r[:2] for r in types[1]]:
            out.append(f"{t}: columns differ")
            continue
        extra = con.execute(f"SELECT count(*) FROM (({q(a)}) EXCEPT ALL ({q(b)}))").fetchone()[0]
        missing = con.execute(f"SELECT count(*) FROM (({q(b)}) EXCEPT ALL ({q(a)}))").fetchone()[0]
        if extra or missing:
            out.append(f"{t}: {extra} rows only in the DuckDB reader's, {missing} only in the compiled reader's")
    return out


def _same(info_pure: object, info_fast: object) -> None:
    if isinstance(info_pure, str) or isinstance(info_fast, str):
        assert info_pure == info_fast
        return
    a, b = info_pure.to_dict(), info_fast.to_dict()
    for d in (a, b):
        d.pop("reader")
        d.pop("reader_note", None)
        d.pop("readers", None)
        d.pop("reader_seconds", None)
        d.pop("tables_seconds", None)
        d.pop("gzip", None)  # how a gzipped file was read: as inflated, or decompressed to a file first
    assert a == b


def _check(path: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch, **kw) -> object:
    pure_dir, pure = _stage(path, tmp, True, monkeypatch, **kw)
    fast_dir, fast = _stage(path, tmp, False, monkeypatch, **kw)
    _same(pure, fast)
    if not isinstance(fast, str):
        assert _differences(pure_dir, fast_dir) == []
    return fast


@pytest.fixture(scope="module")
def monkeypatch_session():
    """A monkeypatch that hypothesis' repeated examples may share (each use is its own context)."""
    with pytest.MonkeyPatch.context() as m:
        yield m


def test_the_compiled_reader_is_built():
    # CI builds it (gcc is there); a machine without a C compiler installs without it and reads the same.
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here: lltrace installs without the compiled reader")
    assert kineto_fast.available(), "parsers/_kineto_fast.c was not built at install"


@pytest.mark.parametrize(
    "path",
    torch_traces()
    + [
        TORCH / "sglang_mi300x_qwen3-8b_decode_graph_capture_bs32.AMD.json.gz",
        TORCH / "hta_a100_cupti_range_profiler.json.gz",
    ]
    + sorted(SAMPLES.glob("hf_generate_*/*.json.gz")),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_real_traces_read_the_same_by_both_readers(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    fast = _check(path, tmp_path, monkeypatch)
    # the real traces are the common case: the compiled reader reads them itself, declining none
    assert fast.details["reader"] == "compiled", fast.details.get("reader_note")


def test_keep_python_reads_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = SAMPLES / "torch" / "hf_transformers_qwen1.5-0.5b_h100_prefill_forward_bs16x559.json.gz"  # with_stack=True
    fast = _check(path, tmp_path, monkeypatch, keep_python=True)
    assert fast.details["python_function_events_kept"] > 0


def _doc(events: list, **meta) -> str:
    return json.dumps({"schemaVersion": 1, **meta, "traceEvents": events}, ensure_ascii=False)


_X = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1000.5, "dur": 2.25}
_K = {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1001, "dur": 1, "args": {"correlation": 5}}
_L = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1000.7, "dur": 0.2}


def _compact(events: list) -> str:
    return json.dumps(events, separators=(",", ":"), ensure_ascii=False)


_AROUND = [
    {
        **_K,
        "name": "g" * n,
        "ts": 1712195495519695 + n,
        "args": {"correlation": 10**d - 1, "stream": -(10**d) + 1, "bytes": str(10**d)},
    }
    for n, d in zip(range(12, 21), range(15, 24), strict=True)
] + [
    {**_X, "name": "a" * 15, "ts": 1712195495519695.8125, "dur": 12345678901234.567, "args": {"Ev Idx": -(2**63)}},
    {**_X, "ts": 1712195495519695.123, "dur": 1, "args": {"External id": 2**63 - 1, "Input Dims": [[10**25, 1], []]}},
    {**_X, "ts": 1712195495519697, "args": {"External id": "000000000000000000007", "correlation": "-" + "9" * 18}},
]
_NESTED_TEXT = [
    {**_X, "args": {"Input Dims": [["a b", "é", "1234567890123456789"], [1, 2]], "External id": 4}},
    {**_K, "args": {"correlation": 5, "grid": [1, 2, 3], "block": ["x y", "€"]}},
]

# (case, events as JSON text or a list, whether the compiled reader reads it itself)
CASES = [
    ("plain", [_X, _K, {**_L, "args": {"correlation": 5}}], True),
    ("pretty_and_compact_mixed", None, True),
    ("escaped_name", r'[{"ph": "X", "cat": "cpu_op", "name": "a\"b\u00e9\ud83d\ude00\n\/", "ts": 1, "dur": 1}]', True),
    ("raw_utf8_name", [{**_X, "name": "é€😀"}], True),
    ("negative_pid_tid", [{**_X, "pid": -1, "tid": -7}], True),
    ("string_pid_tid", [{**_X, "pid": "Spans", "tid": "PyTorch Profiler"}], True),
    ("nested_input_dims", [{**_X, "args": {"Input Dims": [[1, 2], [], [3]], "Concrete Inputs": ["", "1.5"]}}], True),
    ("grid_block", [{**_K, "args": {"correlation": 5, "grid": [1, 2, 3], "block": [128, 1, 1]}}], True),
    ("link_id_beyond_int64", [{**_X, "args": {"External id": 99999999999999999999}}], True),
    ("link_id_as_text", [{**_X, "args": {"External id": "12", "correlation": "x"}}], True),
    ("bytes_as_text_rocm", [{**_K, "cat": "gpu_memcpy", "args": {"correlation": 5, "bytes": "256"}}], True),
    ("ev_idx_fallback", [{**_X, "args": {"Profiler Event Index": 4}}], True),
    ("metadata_events", [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}}, _X], True),
    ("flows", [{"ph": "s", "id": 9, "pid": 1, "tid": 1, "ts": 1000.7, "cat": "ac2g", "name": "ac2g"}, _X], True),
    ("flow_id_text", [{"ph": "f", "id": "0x1a", "pid": 1, "ts": 1000.7, "cat": "ac2g", "bp": "e"}, _X], True),
    ("flow_id_word", [{"ph": "f", "id": "a1", "pid": 1, "ts": 1000.7, "cat": "ac2g", "bp": "e"}, _X], False),
    # ROCm 6 runtime events write the stream handle as hex text ("stream": "0x0"; HTA's MI250 test trace)
    (
        "hex_stream_rocm",
        [{**_K, "args": {"correlation": 5, "stream": "0X7fda0E810200"}}, {**_L, "args": {"stream": "0x0"}}],
        True,
    ),
    (
        "hex_beyond_int64",
        [{**_K, "args": {"stream": "0x8000000000000000"}}, {**_X, "args": {"External id": "0x" + "f" * 20}}],
        True,
    ),
    (
        "hex_int64_max",
        [{**_K, "args": {"stream": "0x7fffffffffffffff", "correlation": "0x00000000000000000001"}}],
        True,
    ),
    ("hex_prefix_alone", [{**_K, "args": {"stream": "0x"}}], False),
    ("hex_with_sign", [{**_K, "args": {"stream": "-0x10"}}], False),
    ("hex_with_underscore", [{**_K, "args": {"stream": "0x1_0"}}], False),
    ("old_categories", [{**_X, "cat": "Operator"}, {**_K, "cat": "Kernel"}, {**_L, "cat": "Runtime"}], True),
    ("old_external_id", [{**_X, "args": {"external id": 3}}], True),
    ("python_function_dropped", [{**_X, "cat": "python_function", "name": "torch/nn.py(1): f"}, _X], True),
    ("execute_model_kept", [{**_X, "cat": "python_function", "name": "worker.py: execute-model"}, _X], True),
    ("module_call_kept", [{**_X, "cat": "python_function", "name": "nn.Module: LlamaForCausalLM_0"}, _X], True),
    ("module_prefix_only", [{**_X, "cat": "python_function", "name": "nn.Module:"}, _X], True),
    ("python_function_no_name", [{**_X, "cat": "python_function", "name": None}, _X], True),
    ("instants_and_other_phases", [{"ph": "i", "name": "i", "pid": 1, "ts": 1000}, {"ph": "C", "ts": 1}, _X], True),
    ("null_and_missing_fields", [{"ph": "X", "name": None, "ts": 1000, "dur": None}, _X], True),
    ("base_time", [_X, _K], True),
    ("ns_decimals", [{**_X, "ts": 1712195495519695.812}], True),
    ("exponent_ts", '[{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1.0005e3, "dur": 1}]', True),
    ("four_decimals", [{**_X, "ts": 1000.1234}], True),
    ("float_pid", [{**_X, "pid": 1.5}], False),
    ("negative_zero_pid", '[{"ph": "X", "cat": "cpu_op", "name": "a", "pid": -0, "ts": 1, "dur": 1}]', False),
    ("escape_in_nested", r'[{"ph": "X", "cat": "cpu_op", "ts": 1, "dur": 1, "args": {"Input Dims": ["a\"b"]}}]', False),
    ("duplicate_key", '[{"ph": "X", "ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1}]', False),
    ("args_not_object", [{**_X, "args": "text"}], False),
    ("negative_duration", [{**_X, "dur": -5}, _X], False),
    ("duplicates", [_X, _X, {**_X, "ts": 1002}], False),
    ("zeroed_timestamps", [{**_X, "ts": 0}, _X], False),
    ("another_clock", [{**_X, "ts": 1000}, {**_X, "ts": 1000 + 3 * 86400e6}, {**_X, "ts": 1001}], False),
    ("bare_array", None, True),
    ("event_over_8_mb", [{**_X, "name": "n" * (9 << 20)}, _X], False),
    ("missing_timestamp", [{**_X, "ts": None}, _X], False),
    # compact text (no byte <= 0x20 between tokens), as Kineto writes it: the fast paths of the string, digit and
    # nested-value scans, at and around their widths (16 bytes; 18 digits, the most no int64 overflows)
    ("compact_around_the_fast_paths", _compact(_AROUND), True),
    ("compact_nested_with_spaces_and_utf8_inside", _compact(_NESTED_TEXT), True),
    ("another_clock_without_complete_events", [{"ph": "M", "ts": 86_400_000_002}, {"ph": None, "ts": 1}], False),
]


@pytest.mark.parametrize("case, events, compiled", CASES, ids=[c[0] for c in CASES])
def test_edge_cases_read_the_same(case, events, compiled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / f"{case}.json"
    meta = {"baseTimeNanoseconds": 1_700_000_000_000_000_000} if case == "base_time" else {}
    if case == "pretty_and_compact_mixed":
        pretty, compact = json.dumps(_X, indent=4), json.dumps(_K)
        text = '{"traceEvents": [\n' + pretty + "," + compact + ",\n\n " + json.dumps(_L) + "]}"
    elif case == "bare_array":
        text = json.dumps([_X, _K])
    elif isinstance(events, str):
        text = '{"traceEvents": ' + events + "}"
    else:
        text = _doc(events, **meta)
    path.write_text(text, encoding="utf-8")
    fast = _check(path, tmp_path / "stages", monkeypatch)
    if isinstance(fast, str):
        assert not compiled, fast
        return
    assert (fast.details["reader"] == "compiled") == compiled, fast.details.get("reader_note")


def _bad_profiler_cases() -> list[Path]:
    """The damaged corpus' profiler traces (gzip or JSON that sniffs as a trace; the rest is other formats)."""
    cases = []
    for p in sorted((REPO / "tests" / "data" / "bad").iterdir()):
        head = p.read_bytes()[:4096]
        if p.suffix in (".json", ".gz") and (head.startswith(b"\x1f\x8b") or kineto.sniff(head)):
            cases.append(p)
    return cases


@pytest.mark.parametrize("path", _bad_profiler_cases(), ids=lambda p: p.name)
def test_damaged_inputs_read_the_same(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _check(path, tmp_path, monkeypatch)


# Values of every JSON kind, including those the compiled reader declines (floats where text is kept,
# exponents, escapes, -0), for the fields both readers read.
_text = st.text(alphabet=st.sampled_from(list('aZ_:é€😀 "\\/\n\t')), max_size=12) | st.sampled_from(
    ["execute_model", "execute-model", "python_function", "X", "M", "nn.Module: M_0", "nn.Module:"]
)
_json_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False), _text
)
_json_value = st.recursive(
    _json_scalar, lambda c: st.lists(c, max_size=3) | st.dictionaries(_text, c, max_size=3), max_leaves=6
)
_time = st.one_of(
    st.integers(0, 2**50),
    st.decimals(min_value=0, max_value=10**15, places=3, allow_nan=False).map(lambda d: float(d)),
    st.floats(0, 1e15, allow_nan=False),
    st.none(),
)
_event = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["X", "X", "X", "M", "s", "f", "i", "C", "x"]) | _json_scalar,
        "cat": st.sampled_from(
            ["cpu_op", "kernel", "cuda_runtime", "python_function", "user_annotation", "Kernel", "ac2g"]
        )
        | _json_scalar,
        "ts": _time,
    },
    optional={
        "name": st.sampled_from(["aten::mm", "execute_model", "ampere_sgemm", "ac2g"]) | _text | _json_value,
        "pid": st.integers(-5, 2**40) | _text,
        "tid": st.integers(-5, 2**40) | _text,
        "dur": _time,
        "id": st.integers(0, 2**64) | _text,
        "bp": st.just("e") | _json_scalar,
        "args": st.none()
        | st.fixed_dictionaries(
            {},
            optional={
                k: (st.integers(-(2**65), 2**65) | _json_value)
                for k in ("External id", "correlation", "Ev Idx", "device", "stream", "bytes", "cbid")
            }
            | {k: _json_value for k in ("grid", "block", "Input Dims", "name", "labels", "other")},
        ),
    },
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(events=st.lists(_event, min_size=1, max_size=8), indent=st.sampled_from([None, 2]), ascii_=st.booleans())
def test_generated_traces_read_the_same(events, indent, ascii_, tmp_path_factory, monkeypatch_session):
    tmp = tmp_path_factory.mktemp("gen")
    path = tmp / "t.json"
    path.write_text(json.dumps({"traceEvents": events}, indent=indent, ensure_ascii=ascii_), encoding="utf-8")
    _check(path, tmp, monkeypatch_session)


def test_every_json_number_form_of_a_time_is_read_by_the_compiled_reader(tmp_path, monkeypatch):
    """Times as post-processing tools write them (float noise with many decimals, exponents, -0, integers beyond
    2^53) are read by the compiled reader itself, to the same integer nanoseconds as DuckDB's decimal cast:
    half away from zero at the nanosecond, from the number's text, never through a double (1.0005 µs is
    1001 ns, though the double nearest 1.0005 is below it)."""
    starts = [
        ("1712195495519695.8125", 1712195495519695813),
        ("17121954955196958125e-4", 1712195495519695813),
        ("1.7121954955196960005e15", 1712195495519696001),
        ("1712195495519696.0004999", 1712195495519696000),
        ("1712195495519697", 1712195495519697000),
        ("1712195495519697.5E+0", 1712195495519697500),
        ("171219549551969.80005e1", 1712195495519698001),
    ]
    durations = [
        ("1.0005", 1001),
        ("1.5e-3", 2),
        ("1.0005e0", 1001),
        ("10005e-4", 1001),
        ("12345.678901", 12345679),
        ("9007199254740993", 9007199254740993000),
        ("-0", 0),
        ("0.0004999", 0),
        ("1e-300", 0),
        ("2.5E+1", 25000),
        ("1.00049999999999999999999", 1000),
        # the digits' lengths of the reader's short path: 1-3 decimals, eight and nine integer digits, 16 (the most)
        ("0.9995", 1000),
        ("12.34", 12340),
        ("7.1", 7100),
        ("12345678", 12345678000),
        ("123456789.0123456", 123456789012),
        ("9223372036854775.807", 9223372036854775807),
    ]
    events = [
        f'{{"ph":"X","cat":"cpu_op","name":"op{k}","pid":1,"tid":1,"ts":{ts},"dur":{dur}}}'
        for k, ((ts, _), (dur, _)) in enumerate(zip(starts * 3, durations, strict=False))
    ]
    path = tmp_path / "numbers.json"
    path.write_text('{"traceEvents":[' + ",".join(events) + "]}")
    fast = _check(path, tmp_path, monkeypatch)
    assert fast.details["reader"] == "compiled", fast.details.get("reader_note")
    ops = {r["name"]: r for r in pq.read_table(tmp_path / "compiled" / "ops").to_pylist()}
    for k, ((_, ts_ns), (_, dur_ns)) in enumerate(zip(starts * 3, durations, strict=False)):
        assert (ops[f"op{k}"]["ts_ns"], ops[f"op{k}"]["dur_ns"]) == (ts_ns, dur_ns), k


def _long_trace(odd: str, at: float = 0.8, base: int = 1_700_000_000_000_000_000) -> str:
    """18,000 events (2.4 MB: two pieces for the compiled reader), each op launching its kernel, with ``odd``, one
    event as JSON text, placed among them at the share ``at`` of the array."""
    events = []
    for i in range(6000):
        events.append({**_X, "ts": 1000 + i * 3.5, "args": {"External id": i, "Input Dims": [[1, 2]]}})
        events.append({**_L, "ts": 1000.7 + i * 3.5, "args": {"correlation": i}})
        events.append({**_K, "ts": 1001 + i * 3.5, "args": {"correlation": i}})
    text = _doc(events, baseTimeNanoseconds=base)
    i = text.index('{"ph": "X", "cat": "cpu_op"', int(len(text) * at))
    return text[:i] + odd + ", " + text[i:]


_ODD = (
    r'{"ph": "X", "cat": "cpu_op", "name": "odd", "pid": 1, "tid": 1, "ts": 30000, "dur": 1, '
    r'"args": {"Input Dims": ["a\"b"]}}'
)


@pytest.mark.parametrize("at", [0.1, 0.8])
def test_a_piece_the_compiled_reader_declines_is_read_by_duckdb_alone(at, tmp_path: Path, monkeypatch):
    """One event the compiled reader cannot reproduce (an escape inside a nested value) declines its piece
    only: the other piece stays on the fast path, the tables are the DuckDB reader's, and the metadata says
    which byte ranges each reader took."""
    path = tmp_path / "trace.json"
    path.write_text(_long_trace(_ODD, at))
    fast = _check(path, tmp_path / "stages", monkeypatch)
    assert fast.details["reader"] == "compiled, pieces with DuckDB"
    ranges = fast.details["readers"]
    assert sorted(r["reader"] for r in ranges) == ["compiled", "duckdb"]
    text = path.read_bytes()
    (declined,) = [r for r in ranges if r["reader"] == "duckdb"]
    start, end = declined["bytes"]
    assert start <= text.index(b'"name": "odd"') < end and "escaped nested value" in declined["why"]
    # the ranges tile the array between its brackets
    assert ranges[0]["bytes"][0] == text.index(b"[") + 1 and ranges[-1]["bytes"][1] == text.rindex(b"]")
    assert all(a["bytes"][1] == b["bytes"][0] for a, b in zip(ranges, ranges[1:], strict=False))


def test_a_declined_piece_on_another_clock_sends_the_whole_array_to_duckdb(tmp_path: Path, monkeypatch):
    """Damage that the DuckDB path drops by the whole trace's times (an event days away from the others) cannot
    be judged piece by piece: the whole array is read by DuckDB, as before."""
    far = _ODD.replace('"ts": 30000', '"ts": 300000000000')
    path = tmp_path / "trace.json"
    path.write_text(_long_trace(far, 0.8))
    fast = _check(path, tmp_path / "stages", monkeypatch)
    assert fast.details["reader"] == "duckdb" and "a day apart" in fast.details["reader_note"]
    assert fast.dropped["another_clock"] == 1


def test_an_event_repeated_in_another_piece_is_counted_once(tmp_path: Path, monkeypatch):
    """The pieces' row hashes are merged where they lie (``count_distinct``): an exact copy, in the second piece,
    of an event of the first makes the distinct count fall short of the events, and the trace is read as DuckDB
    reads it, the copy dropped."""
    copy = json.dumps({**_X, "ts": 1000 + 2 * 3.5, "args": {"External id": 2, "Input Dims": [[1, 2]]}})
    path = tmp_path / "trace.json"
    path.write_text(_long_trace(copy, 0.9))
    fast = _check(path, tmp_path / "stages", monkeypatch)
    assert fast.dropped["duplicate_events"] == 1 and "duplicate events" in fast.details["reader_note"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2**64 - 1) | st.integers(0, 5), max_size=60), max_size=9))
def test_the_distinct_count_of_sorted_runs_is_numpys(runs: list[list[int]]):
    """``count_distinct`` (a k-way merge of the pieces' sorted row hashes) counts what ``np.unique`` of them all
    counts: runs empty or not, values repeated within and across runs, 0 and 2^64-1."""
    import numpy as np

    from lltrace.parsers import _kineto_fast

    if shutil.which("cc") is None and shutil.which("gcc") is None:  # as test_the_compiled_reader_is_built
        pytest.skip("no C compiler here: lltrace installs without the compiled reader")
    arrays = [np.sort(np.array(r, dtype=np.uint64)) for r in runs]
    want = len(np.unique(np.concatenate(arrays))) if arrays else 0
    assert _kineto_fast.count_distinct(arrays) == want


def test_launch_links_graph_and_shared(tmp_path: Path, monkeypatch):
    """A graph launch links every kernel of its correlation id; two kernels under one ordinary launch's id are
    damage: neither is linked (orphans, placed by time) and the warning counts them. Both readers alike."""
    graph = {**_L, "name": "cudaGraphLaunch", "ts": 1000.1, "args": {"correlation": 7}}
    plain = {**_L, "ts": 1000.2, "args": {"correlation": 8}}
    events = [
        _X,
        graph,
        plain,
        {**_K, "ts": 1002, "args": {"correlation": 7}},
        {**_K, "ts": 1003, "args": {"correlation": 7}},
        {**_K, "ts": 1004, "args": {"correlation": 8}},
        {**_K, "ts": 1005, "args": {"correlation": 8}},
    ]
    path = tmp_path / "links.json"
    path.write_text(_doc(events))
    fast = _check(path, tmp_path / "stages", monkeypatch)
    assert fast.dropped["gpu_ops_sharing_one_launch"] == 2
    kernels = pq.read_table(tmp_path / "stages" / "compiled" / "kernels").to_pylist()
    by_ts = {k["ts_ns"]: k for k in kernels}
    assert [by_ts[t]["launch_name"] for t in (1_002_000, 1_003_000)] == ["cudaGraphLaunch"] * 2
    assert all(by_ts[t]["cuda_graph"] and not by_ts[t]["orphan"] for t in (1_002_000, 1_003_000))
    assert all(by_ts[t]["orphan"] and by_ts[t]["launch_name"] is None for t in (1_004_000, 1_005_000))


@pytest.mark.parametrize("threads", [1, 3, 5])
def test_any_number_of_cores_reads_the_same(threads: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The readers and DuckDB take the usable cores (``lltrace.cores``), not two: with one, three or five, a real
    trace's tables are the DuckDB reader's (itself on as many threads), and an event the compiled reader declines
    still sends only its own piece to DuckDB."""
    monkeypatch.setenv("LLTRACE_THREADS", str(threads))
    real = SAMPLES / "torch" / "hf_transformers_qwen1.5-0.5b_h100_prefill_forward_bs16x559.json.gz"
    assert _check(real, tmp_path / "real", monkeypatch).details["reader"] == "compiled"
    odd = tmp_path / "trace.json"
    odd.write_text(_long_trace(_ODD, 0.5))
    ranges = _check(odd, tmp_path / "odd", monkeypatch).details["readers"]
    declined = [r for r in ranges if r["reader"] == "duckdb"]
    size = odd.stat().st_size
    assert len(declined) == 1 and declined[0]["bytes"][1] - declined[0]["bytes"][0] <= size / max(2, threads) * 1.2


def test_the_16_byte_string_scan_reads_what_the_32_byte_one_reads(tmp_path: Path):
    """Strings are scanned 32 bytes at a time where the CPU has AVX2, else 16 (SSE2): both paths give the same
    columns, counts and declines for strings whose quotes, escapes, control characters and non-ASCII bytes fall
    at every offset around both widths (the path is chosen at import: the other runs in a child process)."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:  # as test_the_compiled_reader_is_built
        pytest.skip("no C compiler here: lltrace installs without the compiled reader")
    import subprocess
    import sys

    specials = ['\\"', "\\\\", "\\n", "\\u00e9", "é", "€", "😀", "\x01", "\x7f"]
    events = []
    for n in range(0, 70):
        for s in specials:
            name = "k" * n + s + "m" * (n % 7)
            events.append(f'{{"ph":"X","cat":"kernel","name":"{name}","pid":0,"tid":7,"ts":{n},"dur":1}}')
    path = tmp_path / "strings.json"
    path.write_text("[" + ",".join(events) + "]", encoding="utf-8")
    script = (
        "import sys, hashlib\n"
        "from lltrace.parsers import _kineto_fast as k\n"
        "data = open(sys.argv[1], 'rb').read()[1:-1]\n"
        "out = [k.SIMD]\n"
        "for i, ev in enumerate(data.split(b',{')):\n"
        "    ev = ev if i == 0 else b'{' + ev\n"
        "    try:\n"
        "        consumed, sinks, counts, hashes = k.read_events(ev, True, True, False, 'External id', 0, 1 << 20)\n"
        "        cols = [bytes(memoryview(b)) for rows, c in sinks for col in c if col for b in col[:3] if b]\n"
        "        out.append(hashlib.sha256(repr((consumed, counts, cols, bytes(memoryview(hashes)))).encode())"
        ".hexdigest())\n"
        "    except k.Unsupported as exc:\n"
        "        out.append(repr(exc.args))\n"
        "print('\\n'.join(out))\n"
    )
    runs = {}
    for flag in ("0", "1"):
        env = {k: v for k, v in os.environ.items() if k != "LLTRACE_NO_AVX2"}
        if flag == "1":
            env["LLTRACE_NO_AVX2"] = "1"
        done = subprocess.run([sys.executable, "-c", script, str(path)], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        runs[flag] = done.stdout.splitlines()
    assert runs["1"][0] == "sse2"
    assert runs["0"][1:] == runs["1"][1:]
    declined = [r for r in runs["0"][1:] if r.startswith("(")]
    assert 0 < len(declined) < len(events)  # raw control characters are declined, the rest read


# --- a gzipped trace read as it is inflated (parsers/kineto_stream.py)


def _where_the_base_is(path: Path) -> str:
    """From the raw file: whether the clock base comes before the events ("first", or a bare event array), after them
    ("last"), or nowhere ("none")."""
    text = gzip.decompress(path.read_bytes())
    events = text.find(b'"traceEvents"')
    base = text.find(b'"baseTimeNanoseconds"')
    if text.lstrip().startswith(b"[") or 0 <= base < events:
        return "first"
    return "last" if base > events else "none"


def test_the_real_gzip_traces_have_their_clock_base_first_last_and_nowhere():
    """The real traces below cover each case the stream must handle: the base before the events (every vLLM and SGLang
    trace), after them (PyTorch 2.4-2.6: the HTA and Hugging Face traces) and none (older PyTorch: absolute times)."""
    assert {_where_the_base_is(p) for p in torch_traces()} == {"first", "last", "none"}


@pytest.mark.parametrize("path", torch_traces(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_real_gzip_trace_is_read_as_inflated_wherever_its_clock_base_is(path, tmp_path, monkeypatch):
    """Read as it is inflated wherever the base the readers add comes: before the events, after them (read with none,
    the times moved once the stream's end shows it) or nowhere. In pieces of 64 KB (hundreds of cuts on the larger
    traces), the tables are still the DuckDB reader's."""
    monkeypatch.setattr(kineto_stream, "PIECE_BYTES", 64 << 10)
    fast = _check(path, tmp_path, monkeypatch)
    assert fast.details["gzip"] == "read as inflated"
    assert fast.details["reader"] == "compiled", fast.details.get("reader_note")


def test_a_streamed_piece_the_compiled_reader_declines_is_read_by_duckdb(tmp_path: Path, monkeypatch):
    """An event the compiled reader cannot reproduce, in a gzipped trace read as inflated: its piece alone goes to
    DuckDB (from a sparse copy holding the declined pieces), the tables are the DuckDB reader's, and the ranges say
    which reader took which bytes of the decompressed document."""
    monkeypatch.setattr(kineto_stream, "PIECE_BYTES", 256 << 10)
    text = _long_trace(_ODD, 0.5).encode()
    path = tmp_path / "trace.json.gz"
    path.write_bytes(gzip.compress(text))
    fast = _check(path, tmp_path / "stages", monkeypatch)
    assert fast.details["gzip"] == "read as inflated"
    assert fast.details["reader"] == "compiled, pieces with DuckDB"
    ranges = fast.details["readers"]
    (declined,) = [r for r in ranges if r["reader"] == "duckdb"]
    assert declined["bytes"][0] <= text.index(b'"name": "odd"') < declined["bytes"][1]
    assert declined["bytes"][1] - declined["bytes"][0] < 2 * (256 << 10)  # one piece, not the document
    assert ranges[0]["bytes"][0] == text.index(b"[") + 1 and ranges[-1]["bytes"][1] == text.rindex(b"]")
    assert all(a["bytes"][1] == b["bytes"][0] for a, b in zip(ranges, ranges[1:], strict=False))


def _late(text: str, base: str = "1700000000000000000") -> bytes:
    """``text`` (a _long_trace) gzipped with its clock base moved after the events, and set to ``base``."""
    first = '"baseTimeNanoseconds": 1700000000000000000'
    assert first + ", " in text
    return gzip.compress((text.replace(first + ", ", "")[:-1] + f', "baseTimeNanoseconds": {base}}}').encode())


def test_a_gzipped_trace_with_its_clock_base_after_the_events_is_read_as_inflated(tmp_path, monkeypatch):
    """The base after the events (unknown until the end): the events are read with none and their times moved once
    the end shows it; with a declined piece too (DuckDB adds the base to its rows itself). The tables are the DuckDB
    reader's, and the times are on the epoch clock."""
    monkeypatch.setattr(kineto_stream, "PIECE_BYTES", 256 << 10)
    for name, odd, reader in (("late", json.dumps(_X), "compiled"), ("late_odd", _ODD, "compiled, pieces with DuckDB")):
        path = tmp_path / f"{name}.json.gz"
        path.write_bytes(_late(_long_trace(odd, 0.5)))
        fast = _check(path, tmp_path / name, monkeypatch)
        assert fast.details["gzip"] == "read as inflated" and fast.details["reader"] == reader
        ops = pq.read_table(tmp_path / name / "compiled" / "ops").column("ts_ns").to_pylist()
        assert min(ops) == 1_700_000_000_000_000_000 + 1_000_000  # the first op: 1000 us after the base


@pytest.mark.parametrize(
    "base, why",
    [("9000000000000000000", "beyond the base the readers add"), ('"1700000000000000000"', "not an integer")],
)
def test_a_late_clock_base_the_readers_do_not_take_is_read_the_other_ways(base, why, tmp_path, monkeypatch):
    """A base after the events that the readers do not take: what they read is dropped and the trace is read the other
    ways, with the DuckDB reader's result (the tables, or its error)."""
    monkeypatch.setattr(kineto_stream, "PIECE_BYTES", 256 << 10)
    path = tmp_path / "late.json.gz"
    path.write_bytes(_late(_long_trace(json.dumps(_X), 0.5), base))
    fast = _check(path, tmp_path / "late", monkeypatch)
    assert isinstance(fast, str) or fast.details["gzip"] == "decompressed to a scratch file, then read", why


def test_a_time_past_64_bits_once_a_late_base_is_added_drops_what_was_read(tmp_path, monkeypatch):
    """A time that passes 64-bit nanoseconds only once the late base is added: moving the times fails, nothing the
    readers wrote is kept, and the trace is read the other ways (with the DuckDB reader's result)."""
    monkeypatch.setattr(kineto_stream, "PIECE_BYTES", 256 << 10)
    far = json.dumps({**_X, "ts": 4_700_000_000_000_000})  # 4.7e18 ns: beyond int64 with a 4.6e18 base
    text = _long_trace(far, 0.5, base=1_700_000_000_000_000_000)
    path = tmp_path / "late.json.gz"
    path.write_bytes(_late(text, str(4_600_000_000_000_000_000)))
    calls = []
    real = kineto_fast.shift_outputs
    monkeypatch.setattr(kineto_fast, "shift_outputs", lambda *a: calls.append(real(*a)) or calls[-1])
    fast = _check(path, tmp_path / "late", monkeypatch)
    assert calls == [False]
    assert isinstance(fast, str) or fast.details["gzip"] == "decompressed to a scratch file, then read"
    assert not list((tmp_path / "late").rglob("*.shifted"))


def test_a_gzipped_trace_cut_short_is_read_the_other_ways(tmp_path, monkeypatch):
    """A stream cut short: what the readers had is dropped and the file is read as far as it is valid, as the DuckDB
    reader reads it."""
    monkeypatch.setattr(kineto_stream, "PIECE_BYTES", 256 << 10)
    whole = gzip.compress(_long_trace(json.dumps(_X), 0.5).encode())
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    fast = _check(cut, tmp_path / "cut", monkeypatch)
    assert fast.details.get("gzip") != "read as inflated" and fast.truncated


@pytest.mark.parametrize(
    "name, streamed",
    [
        ("vllm_b200_tp8_gptoss_mxfp4_prefill_eager.rank0.json.gz", True),
        ("hta_a100_ddp_nccl_2rank.rank0.json.gz", True),
        ("hta_a100_ddp_nccl_2rank.rank0.json.gz", False),
    ],
)
def test_progress_of_a_gzipped_trace_rises_to_its_size(name: str, streamed: bool, tmp_path: Path, monkeypatch):
    """Read as inflated (the vLLM trace, its base first; the HTA one, its base last) or decompressed first (the HTA
    one, the stream not taken), the progress a command's bar draws never goes back and ends at the file's size."""
    import lltrace

    if not streamed:
        monkeypatch.setattr(kineto_stream, "_head", lambda _path: None)
    path = DATA / "torch" / name
    seen: list[tuple[int, int]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lltrace.ingest([path], store=tmp_path / "store", progress=lambda _p, done, total: seen.append((done, total)))
    dones = [d for d, _ in seen]
    assert len(seen) > 1 and dones == sorted(dones) and seen[-1] == (path.stat().st_size, path.stat().st_size)


def test_a_streamed_trace_whose_every_piece_is_declined_goes_to_duckdb_without_a_second_try(tmp_path, monkeypatch):
    """Every piece declined while inflating: the whole array is DuckDB's at once (the compiled reader does not read
    the decompressed file again, which would decline the same events), and the tables are the DuckDB reader's."""
    monkeypatch.setattr(kineto_stream, "PIECE_BYTES", 64 << 10)
    odd = json.loads(_ODD)
    events = [{**odd, "ts": 1000 + i} for i in range(5000)]
    path = tmp_path / "odd.json.gz"
    path.write_bytes(gzip.compress(_doc(events, baseTimeNanoseconds=1_700_000_000_000_000_000).encode()))
    calls = []
    real_stage = kineto_fast.stage
    monkeypatch.setattr(kineto_fast, "stage", lambda *a, **k: calls.append(1) or real_stage(*a, **k))
    fast = _check(path, tmp_path / "stages", monkeypatch)
    assert fast.details["reader"] == "duckdb" and "escaped nested value" in fast.details["reader_note"]
    assert len(calls) == 1

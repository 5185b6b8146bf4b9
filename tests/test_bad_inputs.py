"""The bad-input corpus (tests/data/bad, built from real traces by make_corpus.py) and a property test that
mutates real traces: every input either ingests (with a warning that counts what was dropped) or fails with
the one-line error and exit code 1; never a traceback, never a partial run, never an unreadable store."""

from __future__ import annotations

import json
import re
import shutil
import warnings
from pathlib import Path

import pytest
from conftest import DATA, REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mutations import mutate
from typer.testing import CliRunner

import lltrace
from lltrace.cli import app

BAD = REPO / "tests" / "data" / "bad"
EXPECTED: dict[str, str] = json.loads((BAD / "expected.json").read_text())
ORIGINALS = {  # a glued log must read like the log it was made from
    "vllm_glued_lines.log": DATA / "serving" / "log_excerpts" / "vllm_v1_loggers_log_lines.txt",
    "sglang_glued_lines.log": DATA / "serving" / "log_excerpts" / "sglang_scheduler_log_lines.txt",
}


def _store_is_sound(store: Path) -> list[str]:
    """The store opens, every committed run's tables read, and nothing is left half-written."""
    st_ = lltrace.Store(store)
    con = st_.connect()
    con.close()
    for rid in st_.run_ids():
        run = lltrace.Run(rid, st_)
        for t in lltrace.tables.TABLES:
            run.table(t)
    staging = store / ".staging"
    assert not staging.exists() or not any(staging.iterdir())
    return st_.run_ids()


def test_the_corpus_is_what_make_corpus_writes() -> None:
    files = {p.name for p in BAD.iterdir() if p.name not in ("make_corpus.py", "expected.json")}
    assert files == set(EXPECTED) and len(files) >= 30


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_input(name: str, tmp_path: Path) -> None:
    path = BAD / name
    store = tmp_path / "store"
    r = CliRunner().invoke(app, ["ingest", str(path), "--store", str(store)])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert "Traceback" not in r.output
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("lltrace: error:")]
    warned = [ln for ln in r.stderr.splitlines() if ln.startswith(f"lltrace: warning: {path}:")]
    runs = _store_is_sound(store)
    want = EXPECTED[name]
    if want == "error":
        assert r.exit_code == 1 and runs == []
        assert r.stderr.splitlines() == errors and len(errors) == 1  # one line ...
        assert errors[0].startswith(f"lltrace: error: {path}")  # ... naming the file
    else:
        assert r.exit_code == 0 and runs == [r.stdout.strip()], r.output
        # nothing committed may crash the analysis: every value passed the physical checks
        a = CliRunner().invoke(app, ["analyze", runs[0], "--store", str(store), "--json", "-q"])
        assert a.exit_code == 0 and a.exception is None, (a.exception, a.output[-500:])
        assert json.loads(a.stdout)["run"]["checks"] is not None  # the run went through the checks
        if want == "warning":
            assert warned and all(re.search(r"\d", w) for w in warned)  # says how much was dropped
        elif name in ORIGINALS:
            glued, original = (
                lltrace.Run(runs[0], lltrace.Store(store)),
                lltrace.ingest([ORIGINALS[name]], store=tmp_path / "original"),
            )
            for t in ("engine_steps", "engine_stats", "requests"):
                assert (
                    glued.table(t)
                    .drop("part", "run_id", "client_id", strict=False)
                    .equals(original.table(t).drop("part", "run_id", "client_id", strict=False))
                ), t
        else:  # no warning beyond the one the real SGLang excerpt itself gives (an epoch in a duration field)
            assert [w for w in warned if "forward_duration beyond 1e9 ms" not in w] == []


_SEEDS = {
    "json": (BAD / "out_of_order.json").read_bytes(),
    "csv": (BAD / "azure_extra_column.csv").read_bytes(),
    "jsonl": (BAD / "mooncake_truncated.jsonl").read_bytes(),
}


@st.composite
def _mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(sorted(_SEEDS)))
    return kind, mutate(draw, _SEEDS[kind])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_mutated())
def test_mutated_real_traces_never_crash_or_leave_a_partial_run(case: tuple[str, bytes], tmp_path: Path) -> None:
    kind, data = case
    work = tmp_path / "m"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    path = work / f"mutated.{kind}"
    path.write_bytes(data)
    store = work / "store"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            run = lltrace.ingest([path], store=store)
        except lltrace.LltraceError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)  # the one-line error names the file
            assert _store_is_sound(store) == []
            return
    assert _store_is_sound(store) == [run.id]

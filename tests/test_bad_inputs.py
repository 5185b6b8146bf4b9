"""The bad-input corpus (tests/data/bad, built from real traces by make_corpus.py) and a property test that
mutates real traces: every input either ingests (with a warning that counts what was dropped) or fails with
the one-line error and exit code 1; never a traceback, never a partial run, never an unreadable store."""

from __future__ import annotations

import json
import re
import shutil
import sys
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
CASES: dict[str, dict[str, str]] = json.loads((BAD / "expected.json").read_text())  # outcome, kind, format
EXPECTED: dict[str, str] = {name: c["outcome"] for name, c in CASES.items()}
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


def test_every_kind_of_damage_has_three_cases_in_every_format_it_applies_to() -> None:
    sys.path.insert(0, str(BAD))
    import make_corpus  # noqa: PLC0415 (the corpus' own tables: kinds, the formats each applies to)

    have: dict[tuple[str, str], int] = {}
    for c in CASES.values():
        have[(c["kind"], c["format"])] = have.get((c["kind"], c["format"]), 0) + 1
    short = {
        (kind, fmt): have.get((kind, fmt), 0)
        for kind, formats in make_corpus.APPLIES.items()
        for fmt in formats
        if have.get((kind, fmt), 0) < 3
    }
    assert short == {} and len(CASES) >= 150
    assert {c["kind"] for c in CASES.values()} <= {*make_corpus.APPLIES, "structure"}


def _sniffs_as(path: Path) -> str | None:
    try:
        fmt = lltrace.parsers.detect(path)
    except lltrace.LltraceError:
        return None
    return fmt.name if fmt else None


def test_every_case_that_sniffs_is_labelled_with_the_format_it_sniffs_as() -> None:
    sniffed = {name: _sniffs_as(BAD / name) for name in CASES}
    wrong = {n: (f, CASES[n]["format"]) for n, f in sniffed.items() if f is not None and f != CASES[n]["format"]}
    assert wrong == {} and sum(f is not None for f in sniffed.values()) > 0.8 * len(CASES)


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
        else:  # no warning beyond those the real excerpts themselves give: an epoch in the SGLang excerpt's duration
            # field; launches whose kernels the profiler excerpt's cut left out (make_corpus._base)
            excerpts = ("forward_duration beyond 1e9 ms", "kernel launches ran no GPU op in the trace")
            assert [w for w in warned if not any(e in w for e in excerpts)] == []


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


# where make_corpus.py put the damage (a line number counted from 1, header included)
_DAMAGE_AT = {
    "damaged_middle_line_mooncake.jsonl": 91,  # lines[90] cut short
    "damaged_middle_line_otlp.otlp.jsonl": 4,  # spans[3]
    "int64_mooncake.jsonl": 8,  # m[7]
    "int64_azure.csv": 7,  # rows_[5], after the header
    "clock_2200_azure.csv": 58,  # dated[57]
    "int64_llmperf.individual.json": 22,  # rows[1] of an indent=1 dump: the number's own line
}


@pytest.mark.parametrize("name", sorted(_DAMAGE_AT))
def test_the_message_names_the_line_of_the_damage(name: str, tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["ingest", str(BAD / name), "--store", str(tmp_path / "s")])
    said = [ln for ln in r.stderr.splitlines() if ln.startswith("lltrace: ")]
    assert said and f": line {_DAMAGE_AT[name]}: " in said[0], said


def _ingest_warned(path: Path, store: Path, words: str) -> tuple[lltrace.Run, list[str]]:
    """``path`` ingested into ``store``, with the warnings that hold ``words``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = lltrace.ingest([path], store=store)
    return run, [str(w.message) for w in caught if words in str(w.message)]


def test_a_file_the_user_may_not_read_is_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Permission denied (made here by the opener, as the suite may run as root, whom no mode bit stops): one line
    naming the file and why, exit 1, no traceback, nothing in the store."""
    path = tmp_path / "bench.json"
    shutil.copy(DATA / "vllm_cpu_incidents/K_steady/bench/chat.json", path)

    def denied(p: str | Path, size: int = 0) -> bytes:
        raise PermissionError(13, "Permission denied", str(p))

    monkeypatch.setattr("lltrace.parsers.read_head", denied)
    store = tmp_path / "store"
    r = CliRunner().invoke(app, ["analyze", str(path), "--store", str(store)])
    assert r.exit_code == 1 and "Traceback" not in r.output
    (line,) = r.stderr.splitlines()  # the reader's own words ("byte 0: cannot read") or the CLI's: one line
    assert line.startswith(f"lltrace: error: {path}: ") and "Permission denied" in line, line
    assert _store_is_sound(store) == []


def test_a_file_name_holding_a_newline_stays_on_the_error_line(tmp_path: Path) -> None:
    """The name is shown with its control characters visible (\\n, \\x1b), the error on one line."""
    path = tmp_path / "run\nx\x1b[2J.json"
    path.write_text('{"traceEvents": [{"ph": "X", "ts": "soon"')  # a profiler trace, cut short
    r = CliRunner().invoke(app, ["ingest", str(path), "--store", str(tmp_path / "store")])
    assert r.exit_code == 1
    (line,) = r.stderr.splitlines()
    assert line.startswith("lltrace: error: ") and "run\\nx\\x1b[2J.json" in line and "\x1b" not in line


@pytest.mark.parametrize(
    ("source", "name", "reverse"),
    [
        ("vllm_cpu_limits/L_aiperf/bench/profile_export.jsonl", "profile_export.jsonl", "aiperf"),
        ("vllm_cpu_limits/K_guidellm/bench/benchmarks.json", "benchmarks.json", "guidellm"),
    ],
)
def test_client_records_that_end_before_they_start_lose_their_latencies_with_a_warning(
    source: str, name: str, reverse: str, tmp_path: Path
) -> None:
    """A real client file whose first record's end is moved before its start: that record's TTFT and e2e are NULL,
    one warning names the file and the count, every other record is read as the original."""
    path = tmp_path / name
    if reverse == "aiperf":
        lines = (DATA / source).read_text().splitlines()
        first = json.loads(lines[0])
        first["metadata"]["request_end_ns"] = first["metadata"]["request_start_ns"] - 5_000_000
        path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    else:
        data = json.loads((DATA / source).read_text())
        r = data["benchmarks"][0]["requests"]["successful"][0]
        r["request_end_time"] = r["request_start_time"] - 0.005
        path.write_text(json.dumps(data))
    damaged, said = _ingest_warned(path, tmp_path / "store", "end before they start")
    assert len(said) == 1 and said[0].startswith(f"{path}: 1 record(s)"), said
    original = lltrace.ingest([DATA / source], store=tmp_path / "original")
    cols = ["request_id", "client_index", "arrival_s", "input_tokens", "output_tokens", "ttft_s", "e2e_s", "status"]
    got = damaged.table("requests").select(cols).sort("client_index", "arrival_s")
    want = original.table("requests").select(cols).sort("client_index", "arrival_s")
    changed = [i for i in range(got.height) if got.row(i) != want.row(i)]
    assert len(changed) == 1
    row = got.row(changed[0], named=True)
    assert row["ttft_s"] is None and row["e2e_s"] is None


def test_an_iteration_log_copied_into_itself_drops_the_copies_and_one_renumbered_keeps_them_with_a_warning(
    tmp_path: Path,
) -> None:
    """A real server log (K_steady's) with every iteration line written twice: the copies are dropped with one warning
    and the steps are the original's; with every iteration numbered 0: kept as written, with one warning."""
    text = (DATA / "vllm_cpu_incidents/K_steady/server.log").read_text()
    lines = text.splitlines()
    doubled = tmp_path / "doubled" / "server.log"
    doubled.parent.mkdir()
    doubled.write_text("\n".join(x for ln in lines for x in ([ln, ln] if "Iteration(" in ln else [ln])) + "\n")
    zeroed = tmp_path / "zeroed" / "server.log"
    zeroed.parent.mkdir()
    zeroed.write_text(re.sub(r"Iteration\(\d+\)", "Iteration(0)", text))
    cols = ["step_id", "prefill_tokens", "decode_tokens", "wall_s", "log_stamp"]
    original = lltrace.ingest([DATA / "vllm_cpu_incidents/K_steady/server.log"], store=tmp_path / "s0")
    want = original.table("engine_steps").select(cols)
    for path, words, same in ((doubled, "repeat an earlier line whole", True), (zeroed, "reuse an earlier", False)):
        run, said = _ingest_warned(path, tmp_path / f"s-{path.parent.name}", words)
        assert len(said) == 1 and said[0].startswith(f"{path}: "), said
        got = run.table("engine_steps").select(cols)
        assert got.height == want.height
        if same:
            assert got.equals(want)


def test_otlp_latency_attributes_of_the_wrong_type_are_null_with_a_warning(tmp_path: Path) -> None:
    """K_steady's real spans with one span's e2e latency written as a string and another's TTFT as a null: those
    two values NULL, one warning naming the file, the count and the attributes; every other value as the original."""
    src = DATA / "vllm_cpu_incidents/K_steady/otlp/traces.otlp.jsonl"
    changed = {"gen_ai.latency.e2e": {"stringValue": "0.25"}, "gen_ai.latency.time_to_first_token": None}
    out = []
    for line in src.read_text().splitlines():
        doc = json.loads(line)
        for rs in doc.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for span in ss.get("spans", []):
                    for a in span.get("attributes", []):
                        if a["key"] in changed and changed:
                            a["value"] = changed.pop(a["key"])
        out.append(json.dumps(doc))
    assert not changed  # both were placed
    path = tmp_path / "traces.otlp.jsonl"
    path.write_text("\n".join(out) + "\n")
    damaged, said = _ingest_warned(path, tmp_path / "store", "not a number")
    assert len(said) == 1 and said[0].startswith(f"{path}: 2 latency attribute(s)"), said
    assert "gen_ai.latency.e2e" in said[0] and "gen_ai.latency.time_to_first_token" in said[0]
    original = lltrace.ingest([src], store=tmp_path / "original")
    cols = ["engine_request_id", "server_e2e_s", "server_ttft_s", "queue_s", "prefill_s", "decode_s"]
    got = damaged.table("requests").select(cols).sort("engine_request_id")
    want = original.table("requests").select(cols).sort("engine_request_id")
    assert got.null_count().sum_horizontal()[0] == want.null_count().sum_horizontal()[0] + 2


def test_mooncake_hash_ids_of_the_wrong_type_lose_their_blocks_with_a_warning(tmp_path: Path) -> None:
    """The real Mooncake trace with one line's hash ids as strings and another's with a fraction: those two lines'
    prefix blocks NULL (not cast), one warning with the count; every other line as the original."""
    src = DATA / "serving/mooncake/conversation_trace.jsonl"
    lines = src.read_text().splitlines()
    a, b = json.loads(lines[3]), json.loads(lines[7])
    a["hash_ids"] = [str(x) for x in a["hash_ids"]]
    b["hash_ids"] = [x + 0.5 for x in b["hash_ids"]]
    lines[3], lines[7] = json.dumps(a), json.dumps(b)
    path = tmp_path / "conversation_trace.jsonl"
    path.write_text("\n".join(lines) + "\n")
    damaged, said = _ingest_warned(path, tmp_path / "store", "hash_ids")
    assert len(said) == 1 and said[0].startswith(f"{path}: 2 line(s)"), said
    original = lltrace.ingest([src], store=tmp_path / "original")
    got = damaged.table("requests")["prefix_block_ids"].to_list()
    want = original.table("requests")["prefix_block_ids"].to_list()
    assert len(got) == len(want)
    assert [i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w] == [3, 7]
    assert got[3] is None and got[7] is None


@pytest.mark.parametrize("log", ["sglang", "vllm"])
def test_a_log_dated_centuries_off_is_one_line_naming_the_line(log: str, tmp_path: Path) -> None:
    """Real log lines dated in the year 2200: SGLang's own stamps moved there, and K_steady's vLLM log with a
    collector's RFC 3339 stamp before each line (as Kubernetes writes it), in 2200: the one-line error naming the
    file and the line, nothing in the store."""
    if log == "sglang":
        text = (DATA / "serving/log_excerpts/sglang_scheduler_log_lines.txt").read_text()
        dated = re.sub(r"\[20\d\d-", "[2200-", text)
        assert dated != text
        path = tmp_path / "sglang.log"
    else:
        lines = (DATA / "vllm_cpu_incidents/K_steady/server.log").read_text().splitlines()[:400]
        dated = "\n".join(f"2200-01-01T00:00:{i % 60:02d}.000000000Z stdout F {ln}" for i, ln in enumerate(lines))
        path = tmp_path / "server.log"
    path.write_text(dated + "\n")
    store = tmp_path / "store"
    r = CliRunner().invoke(app, ["ingest", str(path), "--store", str(store)])
    assert r.exit_code == 1, r.output
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"lltrace: error: {path}: line ") and "dated 2200-" in line and "in the future" in line
    assert _store_is_sound(store) == []

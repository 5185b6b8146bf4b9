"""Damage that is not a file's bytes: files a folder holds but nobody can read, a log dated on a day no year
has inside a run, impossible values in a run held to the declared physical limits (``lltrace.ingest.checks``),
and ``--strict`` turning those into the one-line error."""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from pathlib import Path

import pytest
from conftest import DATA
from typer.testing import CliRunner

import lltrace
from lltrace.cli import app
from lltrace.errors import TraceFormatError
from lltrace.ingest import files

RUN_A = DATA / "vllm_cpu" / "A_baseline"
BENCH = RUN_A / "bench" / "bench_profiled_8req.json"


def _error_line(r) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("lltrace: error:")]
    assert r.exit_code == 1 and len(lines) == 1 and "Traceback" not in r.output, r.output
    return lines[0]


@pytest.mark.parametrize("kind", ["fifo", "link_loop", "dangling_link", "device"])
def test_a_file_nobody_can_read_is_one_line_alone_and_skipped_with_its_reason_in_a_folder(kind, tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(BENCH, folder / BENCH.name)
    bad = folder / kind
    if kind == "fifo":
        os.mkfifo(bad)
    elif kind == "link_loop":
        bad.symlink_to(bad)
    elif kind == "dangling_link":
        bad.symlink_to(tmp_path / "nowhere")
    else:
        bad.symlink_to("/dev/zero")
    store = ["--store", str(tmp_path / "store")]
    line = _error_line(CliRunner().invoke(app, ["ingest", str(bad), *store]))
    assert line.startswith(f"lltrace: error: {bad}: byte 0: cannot read")
    r = CliRunner().invoke(app, ["ingest", str(folder), *store])
    assert r.exit_code == 0, r.output
    assert f"skipped{bad}:cannotread" in "".join(r.stderr.split())  # rich may wrap the line anywhere
    meta = lltrace.Run(r.stdout.strip(), lltrace.Store(tmp_path / "store")).metadata
    assert [s["reason"][:11] for s in meta["skipped"]] == ["cannot read"]


def test_a_permission_error_while_sniffing_is_a_reason_not_a_traceback(tmp_path, monkeypatch):
    # the machines run as root, where no mode bit stops a read: the sniffer's own error stands in for one
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(BENCH, folder / BENCH.name)
    locked = folder / "locked.json"
    locked.write_text("{}")
    real = files.detect

    def detect(p):
        if Path(p).name == "locked.json":
            raise PermissionError(13, "Permission denied", str(p))
        return real(p)

    monkeypatch.setattr(files, "detect", detect)
    with pytest.raises(TraceFormatError, match=r"locked.json: byte 0: cannot read \(Permission denied\)"):
        lltrace.ingest([locked], store=tmp_path / "s1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = lltrace.ingest([folder], store=tmp_path / "s2")
    assert run.metadata["skipped"] == [
        {"path": str(locked), "reason": "cannot read (Permission denied)", "kind": "unreadable"}
    ]


def test_a_log_dated_on_an_impossible_day_inside_a_run_keeps_the_other_lines_on_the_run_clock(tmp_path):
    folder = tmp_path / "A"
    shutil.copytree(RUN_A, folder)
    log = (folder / "server.log").read_text()
    stats = re.findall(r"INFO (\d\d-\d\d) (\d\d:\d\d:\d\d)[^\n]*Avg prompt throughput", log)
    first = f"INFO {stats[0][0]} {stats[0][1]}"
    (folder / "server.log").write_text(log.replace(first, f"INFO 11-31 {stats[0][1]}", 1))
    with pytest.warns(
        lltrace.errors.InputWarning, match=r"server.log: line \d+: 1 line\(s\) stamped with an impossible"
    ):
        run = lltrace.ingest([folder], store=tmp_path / "store")
    placed = run.table("engine_stats").filter(run.table("engine_stats")["source"] == "log")
    assert placed["ts_s"].null_count() == 1 and placed.height == len(stats)  # the one line has no time, the rest do


def _bench_with(tmp_path: Path, **change) -> Path:
    b = json.loads(BENCH.read_text())
    for key, (i, value) in change.items():
        b[key][i] = value
    out = tmp_path / "bench.json"
    out.write_text(json.dumps(b))
    return out


def test_impossible_values_are_nulled_counted_and_shown_and_strict_rejects_them(tmp_path):
    raw = json.loads(BENCH.read_text())
    path = _bench_with(tmp_path, ttfts=(1, raw["latencies"][1] + 5.0), latencies=(3, -2.5))
    with pytest.warns(lltrace.errors.InputWarning, match=r"bench.json: requests: 2 rows break physical limits"):
        run = lltrace.ingest([path], store=tmp_path / "store")
    v = {(x["rule"], tuple(x["columns"])): x["rows"] for x in run.metadata["checks"]["violations"]}
    assert v == {(">= 0", ("e2e_s",)): 1, ("ttft_s <= e2e_s", ("ttft_s", "e2e_s")): 1}
    req = run.table("requests").sort("client_index")
    assert req["e2e_s"][3] is None and req["ttft_s"][3] == pytest.approx(raw["ttfts"][3])  # only the bad value
    assert req["ttft_s"][1] is None and req["e2e_s"][1] is None  # which of the two is wrong is unknown
    assert req["e2e_s"].drop_nulls().min() >= 0
    doc = lltrace.analyze(run.id, store=tmp_path / "store").document
    assert doc.run.checks is not None and doc.run.checks.values_nulled == 2
    r = CliRunner().invoke(app, ["analyze", run.id, "--store", str(tmp_path / "store")])
    assert "physical checks: 2 broken" in r.stdout
    line = _error_line(CliRunner().invoke(app, ["ingest", str(path), "--strict", "--store", str(tmp_path / "s2")]))
    assert line.startswith(f"lltrace: error: {path}: requests.")
    assert not (tmp_path / "s2").exists() or lltrace.Store(tmp_path / "s2").run_ids() == []


def test_every_real_run_passes_every_check(tmp_path):
    for folder in sorted(p for p in (DATA / "vllm_cpu").iterdir() if (p / "server.log").exists()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = lltrace.ingest([folder], store=tmp_path / "store")
        checks = run.metadata["checks"]
        assert checks["rules_checked"] > 50 and checks["violations"] == [], folder.name


def test_a_damaged_part_of_a_run_folder_is_a_warning_in_analyze_not_silence(tmp_path):
    folder = tmp_path / "A"
    shutil.copytree(RUN_A, folder, ignore=shutil.ignore_patterns("metrics_rate*"))
    trace = next((folder / "profiler").glob("*.json.gz"))
    trace.write_bytes(b"\x00garbage\xff" * 100)  # no longer sniffs as a profiler trace
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = lltrace.ingest([folder], store=tmp_path / "store")
    reasons = {Path(s["path"]).name: s["reason"] for s in run.metadata["skipped"]}
    assert "named like a profiler trace" in reasons[trace.name]
    r = CliRunner().invoke(app, ["analyze", run.id, "--store", str(tmp_path / "store")])
    flat = "".join(ch for ch in r.stdout if not ch.isspace() and ch != "│")  # rich wraps inside the panel
    assert f"warning:skipped{trace}".replace(" ", "") in flat and "adamagedpartoftherun?" in flat


def test_the_next_write_removes_the_staging_of_a_writer_that_is_gone(tmp_path):
    import subprocess
    import sys

    from lltrace.store import _HOST

    store = tmp_path / "store"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lltrace.ingest([BENCH], store=store)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = store / ".staging" / f"A_baseline-1234abcd-{_HOST}-{int(dead.stdout)}-0123abcd"
    alive = store / ".staging" / f"B-1234abcd-{_HOST}-{os.getpid()}-4567abcd"  # this process: still writing
    for d in (gone, alive):
        (d / "ops").mkdir(parents=True)
        (d / "ops" / "part-00000.parquet").write_bytes(b"x" * 1000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lltrace.ingest([BENCH], store=store, force=True)
    assert not gone.exists() and alive.exists()


def _bomb(path: Path, filler_gib: float) -> None:
    """A real trace's events with ``filler_gib`` GiB of white space between two of them, gzipped (~1 MB/GiB)."""
    import zlib

    doc = json.loads((Path(__file__).parent / "data" / "bad" / "out_of_order.json").read_text())
    events = [json.dumps(e) for e in doc.pop("traceEvents")]
    co = zlib.compressobj(6, zlib.DEFLATED, 31)
    block = b" " * (64 << 20)
    with open(path, "wb") as f:
        f.write(co.compress((json.dumps(doc)[:-1] + ', "traceEvents": [' + ",".join(events[:200]) + ",").encode()))
        for _ in range(round(filler_gib * 16)):
            f.write(co.compress(block))
        f.write(co.compress((",".join(events[200:]) + "]}").encode()) + co.flush())


def test_a_gzip_bomb_is_read_in_bounded_memory_with_a_warning(tmp_path):
    import subprocess
    import sys

    bomb = tmp_path / "bomb.json.gz"
    _bomb(bomb, 1.0)
    assert bomb.stat().st_size < 10 << 20
    code = (  # the child reports its own peak (RUSAGE_SELF, KiB on Linux)
        "import resource, sys, warnings, lltrace; warnings.simplefilter('always');"
        "lltrace.ingest([sys.argv[1]], store=sys.argv[2]);"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    r = subprocess.run([sys.executable, "-c", code, str(bomb), str(tmp_path / "store")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-500:]
    assert "far beyond a real trace" in r.stderr
    peak_kib = int(r.stdout.split()[-1])
    assert peak_kib < 1 << 20, f"peak RSS {peak_kib / 1024:.0f} MiB"  # under 1 GiB for a 1 GiB bomb


def test_run_metadata_is_strict_json_even_when_a_source_wrote_infinities(tmp_path):
    b = json.loads(BENCH.read_text())
    b["request_rate"] = float("inf")
    b["goodput_config"] = float("nan")  # a figure the summary keeps as written; json writes bare NaN
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = lltrace.ingest([path], store=tmp_path / "store")
    text = (tmp_path / "store" / "runs" / f"{run.id}.json").read_text()

    def no_constants(name: str) -> None:
        raise AssertionError(f"non-standard JSON constant {name}")

    json.loads(text, parse_constant=no_constants)


def test_a_source_dated_far_outside_the_runs_window_is_reported(tmp_path):
    scrapes = tmp_path / "scrapes"
    shutil.copytree(RUN_A / "metrics_rate40", scrapes)
    moved = sorted(scrapes.glob("*.prom"))[2]
    text = moved.read_text()
    stamp = re.search(r"# scrape_unix_ts (\S+)", text).group(1)
    moved.write_text(text.replace(stamp, str(float(stamp) - 11 * 86_400), 1))  # eleven days out of order
    with pytest.warns(lltrace.errors.InputWarning, match=rf"{moved.name}: 1 rows dated far outside the run's window"):
        run = lltrace.ingest([scrapes], store=tmp_path / "store")
    (far,) = run.metadata["clock"]["outside_window"]
    assert far["source"] == str(moved) and far["furthest_days"] == 11.0
    for folder in sorted(p for p in (DATA / "vllm_cpu").iterdir() if (p / "server.log").exists()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            real = lltrace.ingest([folder], store=tmp_path / "real")
        assert real.metadata["clock"]["outside_window"] == [], folder.name  # every real run is one window


@pytest.mark.parametrize(
    ("source", "codec", "fmt"),
    [
        (DATA / "vllm_cpu" / "A_baseline" / "server.log", "utf-16", "vllm-server-log"),  # BOM, as PowerShell 5 writes
        (DATA / "vllm_cpu" / "B_kvpressure" / "metrics" / "metrics_01.prom", "utf-16-le", "prometheus"),  # no BOM
        (DATA / "vllm_cpu" / "A_baseline" / "server.log", "utf-16-be", "vllm-server-log"),
    ],
)
def test_a_utf16_file_says_what_it_is_and_how_to_convert_it(source: Path, codec: str, fmt: str, tmp_path: Path):
    """A real file saved as UTF-16 is named for the format its content has, with the command that converts it:
    alone an error (exit 1), in a folder a skipped file with that reason, never 'not a format lltrace reads'."""
    path = tmp_path / "run" / source.name
    path.parent.mkdir()
    path.write_bytes(source.read_text().encode(codec))
    r = CliRunner().invoke(app, ["ingest", str(path), "--store", str(tmp_path / "s")])
    assert r.exit_code == 1
    line = r.output.strip()
    assert f"UTF-16 text (a {fmt} file by its content)" in line and f"iconv -f UTF-16 -t UTF-8 {path.name}" in line
    assert "Traceback" not in r.output and "\n" not in line
    (tmp_path / "run" / "other.prom").write_text(
        (DATA / "vllm_cpu" / "B_kvpressure" / "metrics" / "metrics_02.prom").read_text()
    )
    found, skipped = files.expand_inputs([path.parent])
    assert [f.name for f, _ in found] == ["other.prom"]
    assert [(Path(s.path).name, s.reason.split(":")[0]) for s in skipped] == [
        (path.name, f"UTF-16 text (a {fmt} file by its content)")
    ]

"""`lltrace export perfetto`: a valid Chrome trace, one lane per request, on the run clock."""

from __future__ import annotations

import json

from conftest import DATA, write_journey_span
from typer.testing import CliRunner

import lltrace
from lltrace.cli import app


def test_perfetto_export_of_run_b2(tmp_path):
    store = tmp_path / "s"
    run = lltrace.ingest([DATA / "vllm_cpu" / "B2_kv2x"], store=store)
    out = tmp_path / "trace.json"
    r = CliRunner().invoke(app, ["export", "perfetto", "--store", str(store), run.id, "-o", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    ev = doc["traceEvents"]
    lanes = {e["tid"] for e in ev if e.get("pid") == "requests" and e["ph"] == "X"}
    assert len(lanes) == 96
    req = run.table("requests").sort("arrival_s").to_dicts()[0]
    first = sorted(
        (e for e in ev if e.get("pid") == "requests" and e["ph"] == "X" and e["tid"] == 0), key=lambda e: e["ts"]
    )
    assert [e["name"] for e in first] == ["queue", "prefill", "decode"]
    assert abs(first[0]["ts"] - req["queued_s"] * 1e6) < 1 and abs(first[-1]["dur"] - req["decode_s"] * 1e6) < 1
    steps = [e for e in ev if e.get("cat") == "step"]
    assert {e["tid"] for e in steps} == {"steps (profiler)", "steps (log)"}  # both step sources, one clock
    # the export is itself a Chrome trace lltrace reads back
    back = lltrace.ingest([out], store=tmp_path / "s2")
    assert back.metadata["sources"][0]["rows"]["annotations"] + back.metadata["sources"][0]["rows"]["ops"] == sum(
        1 for e in ev if e["ph"] == "X"
    )


def test_perfetto_export_has_preempted_slices(tmp_path):
    """A request with journey events (fixture from the documented span events) gets a 'preempted' slice."""
    path = tmp_path / "journey.json"
    write_journey_span(path)
    run = lltrace.ingest([path], store=tmp_path / "s")
    out = tmp_path / "t.json"
    r = CliRunner().invoke(app, ["export", "perfetto", "--store", str(tmp_path / "s"), run.id, "-o", str(out)])
    assert r.exit_code == 0, r.output
    pre = [e for e in json.loads(out.read_text())["traceEvents"] if e.get("name") == "preempted"]
    assert len(pre) == 1 and abs(pre[0]["dur"] - 150_000) < 1  # 150 ms preempted, in microseconds

"""`lltrace export perfetto`: a valid Chrome trace, one lane per request, on the run clock."""

from __future__ import annotations

import json

from conftest import DATA
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
    t0, ms = 1_800_000_000_000_000_000, 1_000_000

    def ev(name, t):
        return {"name": f"journey.{name}", "timeUnixNano": str(t0 + t * ms), "attributes": []}

    span = {
        "traceId": "t",
        "spanId": "s",
        "name": "llm_request",
        "kind": 2,
        "startTimeUnixNano": str(t0),
        "endTimeUnixNano": str(t0 + 1000 * ms),
        "attributes": [
            {"key": "gen_ai.request.id", "value": {"stringValue": "cmpl-j-0"}},
            {"key": "gen_ai.latency.time_in_queue", "value": {"doubleValue": 0.1}},
            {"key": "gen_ai.latency.time_in_model_prefill", "value": {"doubleValue": 0.2}},
            {"key": "gen_ai.latency.time_in_model_decode", "value": {"doubleValue": 0.6}},
            {"key": "gen_ai.latency.time_to_first_token", "value": {"doubleValue": 0.3}},
        ],
        "events": [
            ev("QUEUED", 0),
            ev("SCHEDULED", 100),
            ev("FIRST_TOKEN", 300),
            ev("PREEMPTED", 500),
            ev("SCHEDULED", 650),
            ev("FINISHED", 900),
        ],
    }
    path = tmp_path / "journey.json"
    path.write_text(
        json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [span]}]}]})
    )
    run = lltrace.ingest([path], store=tmp_path / "s")
    out = tmp_path / "t.json"
    r = CliRunner().invoke(app, ["export", "perfetto", "--store", str(tmp_path / "s"), run.id, "-o", str(out)])
    assert r.exit_code == 0, r.output
    pre = [e for e in json.loads(out.read_text())["traceEvents"] if e.get("name") == "preempted"]
    assert len(pre) == 1 and abs(pre[0]["dur"] - 150_000) < 1  # 150 ms preempted, in microseconds

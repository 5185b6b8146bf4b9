"""Nothing is ever counted twice: for every real run in sample_traces/ (other people's and lltrace's own), the
requests lltrace holds are as many as the distinct requests its sources describe, counted here from the raw files."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from conftest import DATA, SAMPLES, raw_llm_spans

import lltrace
from lltrace.errors import UnknownFormat


def _lines(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip())


def described(path: Path) -> int:
    """The distinct requests one shared serving file describes, read with json/csv (0 for files that describe
    none one by one: summaries, metrics, iteration stats, engine logs without per-request lines)."""
    name = path.name
    if name.endswith(".profile_export.jsonl") or path.parent.name == "mooncake":
        return _lines(path)
    if name.endswith(".csv") and path.parent.name.startswith("azure_llm"):
        with path.open() as f:
            return sum(1 for _ in csv.DictReader(f))
    if path.parent.name == "llmperf":
        return len(json.loads(path.read_text())) if name.startswith("individual__") else 0
    if name.endswith(".benchmarks.json"):
        doc = json.loads(path.read_text())
        return sum(len(v) for b in doc["benchmarks"] for v in b["requests"].values() if isinstance(v, list))
    if name == "sglang_scheduler_log_lines.txt":
        return path.read_text().count("Req Time Stats(")
    return 0


SERVING = sorted(p for p in (DATA / "serving").iterdir() if p.is_dir())


@pytest.mark.parametrize("folder", SERVING, ids=lambda p: p.name)
def test_each_serving_folder_holds_each_request_once(folder, tmp_path):
    try:
        run = lltrace.ingest([folder], store=tmp_path)
    except UnknownFormat:
        return  # none of its files is read (so none is counted): the formats issue 17 adds
    skipped = {Path(s["path"]).name for s in run.metadata["skipped"]}
    read = [p for p in sorted(folder.iterdir()) if p.is_file() and p.name not in skipped]
    assert run.sql("SELECT count(*) FROM requests").item() == sum(described(p) for p in read)


def _vllm_runs() -> list[Path]:
    return sorted(p for p in (DATA / "vllm_cpu").iterdir() if (p / "otlp").is_dir()) + sorted(
        p for p in (SAMPLES / "vllm_cpu_limits").iterdir() if (p / "otlp").is_dir()
    )


def _client_records(doc: dict) -> int:
    """The requests a client's result file lists: a vLLM bench file's input_lens, a guidellm report's requests,
    GenAI-Perf's records (AIPerf's other JSON files list none: its records are profile_export.jsonl's lines)."""
    if "input_lens" in doc:
        return len(doc["input_lens"])
    if "experiments" in doc:  # GenAI-Perf's profile_export.json: perf_analyzer's records per experiment
        return sum(len(e.get("requests") or []) for e in doc["experiments"])
    groups = [b["requests"] for b in doc.get("benchmarks", [])]
    return sum(len(g.get(k) or []) for g in groups for k in ("successful", "incomplete", "errored"))


def _raw_spans(folder: Path) -> int:
    ids = set()
    for line in (folder / "otlp" / "traces.otlp.jsonl").read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    if sp["name"] == "llm_request":
                        ids.update(
                            a["value"]["stringValue"] for a in sp["attributes"] if a["key"] == "gen_ai.request.id"
                        )
    return len(ids)


@pytest.mark.parametrize("folder", _vllm_runs(), ids=lambda p: p.name)
def test_each_vllm_run_holds_each_request_once(folder, tmp_path):
    """Every request of these runs the server did not refuse reached the engine: its bench record and its span are
    one request (the
    ground truth says so where the run has one: no span missing, none unjoined). SGLang's bench lists its
    requests one result per line and sends warm-up requests it does not list (``warmup_requests`` in the arguments
    its log prints once per run as ``benchmark_args``)."""
    bench = sum(_client_records(json.loads(f.read_text())) for f in (folder / "bench").rglob("*.json")) + sum(
        len(f.read_text().splitlines())
        for f in (folder / "bench").glob("profile_export.jsonl")  # AIPerf's records
    )
    bench += sum(
        len(json.loads(line)["input_lens"])
        for f in (folder / "bench").glob("sglang*.jsonl")
        for line in f.read_text().splitlines()
    )
    warm = sum(
        int(n)
        for f in (folder / "bench").glob("sglang*.log")
        for n in re.findall(r"benchmark_args=Namespace\(.*warmup_requests=(\d+)", f.read_text())
    )
    spans = _raw_spans(folder)
    truth = folder / "GROUND_TRUTH.json"
    if truth.exists():
        gt = json.loads(truth.read_text())
        assert gt["unjoined_llm_request_spans"] == 0
        assert all(c["missing_spans"] == 0 for c in gt.get("per_client", {}).values())
    # requests the server refused before they reached the engine (uvicorn's access lines: a 4xx to a POST):
    # listed by the client, failed, with no span
    log = (folder / "server.log").read_text()
    refused = len(re.findall(r'"POST /v1/\S+ HTTP/1\.1" 4\d\d ', log))
    assert bench + warm == spans + refused
    # requests the server log says were aborted (--enable-log-requests): vLLM exports no span for them, and no
    # client of the run lists them (run T's own curl clients gave up)
    aborted = len(re.findall(r"Aborted request\(s\) ", log))
    run = lltrace.ingest([folder], store=tmp_path)
    assert run.sql("SELECT count(*) FROM requests").item() == spans + aborted + refused
    assert run.sql("SELECT count(*) FROM requests WHERE status = 'aborted'").item() == aborted
    assert run.sql("SELECT count(*) FROM requests WHERE status = 'error'").item() == refused
    assert run.sql("SELECT count(*) FROM requests WHERE matched_by IS NULL").item() == warm + aborted + refused


def test_the_raw_span_reader_agrees_with_the_shared_helper():
    assert _raw_spans(DATA / "vllm_cpu" / "E_prefix") == len(raw_llm_spans("E_prefix")) == 120

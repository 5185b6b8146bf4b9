"""Production arrival traces and lltrace's own request schema, checked against independent readings."""

from __future__ import annotations

import csv
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import data_file

import lltrace
from lltrace.errors import TraceFormatError


def _epoch_ns(text: str) -> int:
    """Independent parse of an Azure timestamp (any fraction digits; zone or none = UTC)."""
    date, _, rest = text.partition(".")
    frac, zone = rest, ""
    for sign in "+-":
        if sign in rest:
            frac, zone = rest.split(sign, 1)[0], sign + rest.split(sign, 1)[1]
    dt = datetime.strptime(date, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
    ns = int(dt.timestamp()) * 10**9 + int((frac or "0").ljust(9, "0")[:9])
    if zone:
        h, m = int(zone[1:3]), int(zone[4:6])
        ns -= (1 if zone[0] == "+" else -1) * (h * 3600 + m * 60) * 10**9
    return ns


@pytest.mark.parametrize(
    "parts",
    [
        ("azure_llm_2023", "AzureLLMInferenceTrace_code.csv"),
        ("azure_llm_2023", "AzureLLMInferenceTrace_conv.csv"),
        ("azure_llm_2024", "notebook_output_excerpt_code_1week.csv"),
        ("azure_llm_2024", "notebook_output_excerpt_conv_1week.csv"),
    ],
)
def test_azure_traces(parts, store):
    path = data_file("serving", *parts)
    rows = list(csv.DictReader(path.open()))
    run = lltrace.ingest([path], store=store)
    got = run.table("requests").sort(["arrival_ns", "input_tokens", "output_tokens"])
    assert got.height == len(rows)
    if parts[1].endswith("code.csv"):
        assert got.height == 8819
    expect = sorted((_epoch_ns(r["TIMESTAMP"]), int(r["ContextTokens"]), int(r["GeneratedTokens"])) for r in rows)
    assert list(zip(got["arrival_ns"], got["input_tokens"], got["output_tokens"], strict=True)) == expect
    assert got["request_id"].null_count() == got.height  # the trace has no request ids
    version = run.metadata["sources"][0]["version"]
    assert version.startswith("2024") if "2024" in parts[0] else version.startswith("2023")


def test_mooncake_keeps_prefix_block_ids(store):
    path = data_file("serving", "mooncake", "conversation_trace.jsonl")
    raw = [json.loads(line) for line in path.open()]
    run = lltrace.ingest([path], store=store)
    got = run.table("requests")
    assert got.height == len(raw) == 12031
    key = sorted((r["timestamp"] * 10**6, r["input_length"], r["output_length"], r["hash_ids"]) for r in raw)
    rows = sorted(
        zip(
            got["arrival_ns"], got["input_tokens"], got["output_tokens"], got["prefix_block_ids"].to_list(), strict=True
        )
    )
    assert rows == key


def test_burstgpt_both_schemas(store, tmp_path):
    """No real BurstGPT file here: fixtures built from the documented columns (HPMLL/BurstGPT README)."""
    v11 = tmp_path / "burst_v11.csv"
    v11.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n45,GPT-4,1087,0,1087,API log\n"
    )
    run = lltrace.ingest([v11], store=store)
    rows = run.table("requests").sort("arrival_s").to_dicts()
    assert [(r["arrival_s"], r["client_id"], r["status"], r["output_tokens"]) for r in rows] == [
        (5.0, "ChatGPT/Conversation log", "ok", 18),
        (45.0, "GPT-4/API log", "error", None),
    ]
    assert run.metadata["sources"][0]["failed_requests"] == 1
    v12 = tmp_path / "burst_v12.csv"
    v12.write_text(
        "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,17,2.5,ChatGPT,472,18,490,Conversation log\n"
    )
    rows = lltrace.ingest([v12], store=store).table("requests").to_dicts()
    assert (rows[0]["e2e_s"], rows[0]["input_tokens"]) == (2.5, 472)


def test_own_schema_csv_jsonl_parquet(store, tmp_path):
    import polars as pl

    df = pl.DataFrame(
        {
            "request_id": ["a", "b"],
            "arrival_time": ["2026-01-02T03:04:05.5Z", "2026-01-02T03:04:06Z"],
            "input_tokens": [100, 200],
            "output_tokens": [10, 20],
            "num_preemptions": [0, 2],
        }
    )
    expect = [_epoch_ns("2026-01-02 03:04:05.5"), _epoch_ns("2026-01-02 03:04:06")]
    for kind in ("csv", "jsonl", "parquet"):
        path = tmp_path / f"own.{kind}"
        {"csv": df.write_csv, "jsonl": df.write_ndjson, "parquet": df.write_parquet}[kind](path)
        run = lltrace.ingest([path], store=store)
        got = run.table("requests").sort("request_id")
        assert got["arrival_ns"].to_list() == expect, kind
        assert got["num_preemptions"].to_list() == [0, 2]
        assert run.metadata["sources"][0]["format"] == "lltrace-requests"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("request_id,arrival_s,input_tokens\na,1.0,5\n", "missing required column(s): output_tokens"),
        ("request_id,arrival_s,input_tokens,output_tokens\na,1.0,5,1\na,2.0,6,2\n", "1 duplicate request ids"),
    ],
)
def test_own_schema_bad_input(text, message, store, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    if "output_tokens" not in text:
        with pytest.raises(lltrace.UnknownFormat):  # without its required columns it is not this format
            lltrace.ingest([path], store=store)
        return
    with pytest.raises(TraceFormatError, match=message):
        lltrace.ingest([path], store=store)
    assert lltrace.Store(store).run_ids() == []


def test_azure_bad_timestamp_is_an_error(store, tmp_path):
    path = tmp_path / "az.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.97,10,2\n16/11/2023 18:17,3,4\n")
    with pytest.raises(TraceFormatError, match='line 3: "16/11/2023 18:17" is not a TIMESTAMP_NS'):
        lltrace.ingest([path], store=store)


def test_every_serving_sample_is_read(store):
    """The whole sample_traces/serving folder as one ingest: no file left unread, counts from the raw files."""
    import json as _json

    from conftest import DATA

    folder = DATA / "serving"
    run = lltrace.ingest([folder], store=store)
    # Files added to serving/ for issue 17 that lltrace does not read yet, named so that this fails when one
    # starts to be read or another file appears unread.
    # the Kubernetes manifests beside inference-perf's reports say how the server ran; lltrace does not read
    # YAML (named so that this fails when another file appears unread)
    not_yet_read = {
        f"inference_perf/{d}/manifests.yaml" for d in ("kubecon-na-2025_vllm", "kubecon-na-2025_vllm_batch_size")
    }
    assert {str(Path(s.path).relative_to(folder)) for s in run.skipped} == not_yet_read
    files = sorted(p for p in folder.rglob("*") if p.is_file() and str(p.relative_to(folder)) not in not_yet_read)
    srcs = {s["path"]: s for s in run.metadata["sources"]}
    assert sorted(srcs) == sorted(str(p) for p in files)
    stats_csv = folder / "vllm_engine_stats_scrape" / "liao4s_vllm_log_scale100_prompt500.csv"
    assert srcs[str(stats_csv)]["records"] == len(stats_csv.read_text().strip().splitlines()) - 1 == 538
    cfg = folder / "vllm_engine_stats_scrape" / "liao4s_server_log.json"
    text, dec, pos, n = cfg.read_text(), _json.JSONDecoder(), 0, 0
    while pos < len(text.rstrip()):
        _, pos = dec.raw_decode(text, pos)
        n += 1
    assert srcs[str(cfg)]["records"] == n
    kv = run.sql("SELECT max(kv_usage) AS kv FROM engine_stats WHERE source = 'scrape'").to_dicts()[0]["kv"]
    assert kv == pytest.approx(0.192519706741635)  # the CSV's percent column, as a fraction

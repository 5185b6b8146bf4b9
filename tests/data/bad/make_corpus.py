"""Build the bad-input corpus of this folder from real traces (deterministic: run it again, get the same files).

    python tests/data/bad/make_corpus.py

Sources: the SGLang MI300X profiler trace in sample_traces/ (real events), the vLLM V1 and SGLang log
excerpts, the Azure 2023 conversation trace, the Mooncake trace and run A's OTLP spans in sample_traces/.
Each case is a kind of damage seen in the field; ``expected.json`` says what lltrace must do with it:
``error`` (the one-line error, exit 1, nothing stored), ``warning`` (ingested, with a warning that counts
what was dropped) or ``ok`` (ingested as is; glued log lines are split and read like the original lines).
"""

from __future__ import annotations

import gzip
import json
import random
import re
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
DATA = REPO / "sample_traces"
TRACE = REPO / "sample_traces" / "torch" / "sglang_mi300x_qwen3-8b_decode_step.AMD.json.gz"
AIPERF_AGG = (
    REPO / "tests" / "data" / "real" / "aiperf" / "aiperf-2025-10_gpt-oss-20b_c100_cancel10.profile_export_aiperf.json"
)


def _base() -> tuple[dict, bytes]:
    """The real trace cut to 450 of its kernel, op, runtime and flow events and 50 Python stack events, in
    time order (small enough to keep in the repository)."""
    doc = json.loads(gzip.decompress(TRACE.read_bytes()))
    events = doc["traceEvents"]
    python = [e for e in events if e.get("cat") == "python_function"][:50]
    rest = [e for e in events if e.get("cat") != "python_function"][:450]
    doc["traceEvents"] = sorted(python + rest, key=lambda e: e.get("ts", 0))
    return doc, json.dumps(doc).encode()


def _with_events(doc: dict, events: list) -> bytes:
    return json.dumps({**doc, "traceEvents": events}).encode()


def build() -> dict[str, str]:
    rng = random.Random(20261129)
    doc, base = _base()
    events = doc["traceEvents"]
    full_gz = TRACE.read_bytes()
    out: dict[str, bytes] = {}
    expected: dict[str, str] = {}

    def case(name: str, data: bytes, what: str) -> None:
        out[name] = data
        expected[name] = what

    for k, cut in enumerate(sorted(rng.sample(range(200, len(base) - 10), 4))):
        case(f"truncated_{k}.json", base[:cut], "warning")
    for k, cut in enumerate(sorted(rng.sample(range(2000, len(full_gz) - 10), 3))):
        case(f"truncated_gzip_{k}.json.gz", full_gz[:cut], "warning")
    for k in range(2):
        data = bytearray(full_gz)
        for _ in range(3):
            pos = rng.randrange(100, len(data))
            data[pos] ^= 1 << rng.randrange(8)
        case(f"bitflip_gzip_{k}.json.gz", bytes(data), "error")
    data = bytearray(base)
    for pos in rng.sample(range(500, len(base)), 40):
        data[pos] ^= 1 << rng.randrange(8)
    case("bitflip.json", bytes(data), "error")
    case("empty.json", b"", "error")
    case("empty.json.gz", b"", "error")
    case("empty_gzip_stream.json.gz", gzip.compress(b"", mtime=0), "error")
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    case("only_metadata.json", _with_events(head, []), "error")
    names = [{"ph": "M", "name": "process_name", "pid": 251, "args": {"name": "python"}}]
    case("only_metadata_events.json", _with_events(head, names), "error")
    case("bare_array.json", json.dumps(events).encode(), "ok")
    case("array_of_numbers.json", b"[1, 2, 3]", "error")
    text = base.decode()
    nan = text.replace('"dur": 13.7', '"dur": NaN', 1).replace('"dur": 6.', '"dur": Infinity', 1)
    case("nan_infinity.json", nan.encode(), "error")
    case("invalid_utf8.json", base.replace(b'"aten::arange"', b'"aten::ar\xff\xfenge"', 1), "error")
    case("control_chars.json", base.replace(b'"aten::arange"', b'"aten::ar\x01an\nge"', 1), "error")
    huge = base.replace(b'"External id": 223530', b'"External id": 99999999999999999999999', 1)
    case("int_beyond_int64.json", huge, "warning")
    dup = [e for i, e in enumerate(events) for _ in range(2 if i % 10 == 5 else 1)]
    case("duplicate_events.json", _with_events(doc, dup), "warning")
    odd = [dict(e) for e in events]
    xs = [e for e in odd if e.get("ph") == "X" and e.get("cat") != "python_function"]
    for e in xs[10:14]:
        e["dur"] = 0
    for e in xs[20:23]:
        e["dur"] = -5.0
    case("zero_negative_durations.json", _with_events(doc, odd), "warning")
    whole = json.loads(gzip.decompress(full_gz))  # the real trace with its kernels
    one = next(e["args"]["correlation"] for e in whole["traceEvents"] if e.get("cat") == "kernel")
    whole["traceEvents"] = [
        {**e, "args": {**e["args"], "correlation": one}} if e.get("cat") == "kernel" and "args" in e else e
        for e in whole["traceEvents"]
    ]
    shared = gzip.compress(json.dumps(whole).encode(), mtime=0)
    case("one_correlation_for_every_kernel.json.gz", shared, "warning")
    early = json.loads(gzip.decompress(full_gz))  # every kernel 5 ms before its own launch
    early["traceEvents"] = [
        {**e, "ts": e["ts"] - 5000.0} if e.get("cat") == "kernel" and "ts" in e else e for e in early["traceEvents"]
    ]
    case("kernels_before_their_launch.json.gz", gzip.compress(json.dumps(early).encode(), mtime=0), "warning")
    shuffled = list(events)
    rng.shuffle(shuffled)
    case("out_of_order.json", _with_events(doc, shuffled), "ok")
    other = [dict(e) for e in events]
    for e in other[300::3]:
        if "ts" in e:
            e["ts"] = round(e["ts"] - 4909914000000.0, 3)  # a relative clock inside an absolute one
    case("another_clock.json", _with_events(doc, other), "warning")
    log = (DATA / "serving" / "log_excerpts" / "vllm_v1_loggers_log_lines.txt").read_text()
    lines = log.splitlines(keepends=True)
    glued = "".join(ln.rstrip("\n") if i % 3 == 1 and i < len(lines) - 1 else ln for i, ln in enumerate(lines))
    case("vllm_glued_lines.log", glued.encode(), "ok")
    slog = (DATA / "serving" / "log_excerpts" / "sglang_scheduler_log_lines.txt").read_text()
    slines = slog.splitlines(keepends=True)
    sglued = "".join(ln.rstrip("\n") if i % 4 == 2 and i < len(slines) - 1 else ln for i, ln in enumerate(slines))
    case("sglang_glued_lines.log", sglued.encode(), "ok")
    azure = (DATA / "serving" / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv").read_text().splitlines()[:200]
    case("azure_missing_column.csv", "\n".join(",".join(r.split(",")[:2]) for r in azure).encode() + b"\n", "error")
    extra = "\n".join(r + (",extra" if i else ",Note") for i, r in enumerate(azure))
    case("azure_extra_column.csv", extra.encode() + b"\n", "ok")
    short = [r if i % 50 != 7 else ",".join(r.split(",")[:2]) for i, r in enumerate(azure)]
    case("azure_short_rows.csv", "\n".join(short).encode() + b"\n", "warning")
    moon = (DATA / "serving" / "mooncake" / "conversation_trace.jsonl").read_bytes().splitlines(keepends=True)[:300]
    case("mooncake_truncated.jsonl", b"".join(moon)[:-40], "warning")
    otlp = (DATA / "vllm_cpu" / "A_baseline" / "otlp" / "traces.otlp.jsonl").read_bytes().splitlines(keepends=True)
    case("otlp_truncated.otlp.jsonl", b"".join(otlp[:3])[:-100], "warning")

    # regression cases from benchmarks/fuzz_parsers.py findings (each crashed a parser once)
    case("fuzz_vllm_bad_float.log", log.replace(": 0.0 tokens/s", ": 0..0 tokens/s", 2).encode(), "warning")
    prom = (DATA / "vllm_cpu" / "B2_kv2x" / "metrics_final.prom").read_bytes()
    case("fuzz_prometheus_invalid_utf8.prom", prom[:14] + b"\x83" + prom[15:], "error")
    first_sample = next(ln for ln in prom.splitlines() if ln.startswith(b"vllm:"))
    bad_number = first_sample.rsplit(b" ", 1)[0] + b" 179.963237.164084562"
    case("fuzz_prometheus_bad_number.prom", prom.replace(first_sample, bad_number, 1), "error")
    spans = b"".join(otlp[:2])
    case("fuzz_otlp_invalid_utf8.otlp.jsonl", spans[:348] + b"\xda" + spans[349:], "error")
    case("fuzz_otlp_attribute_without_key.otlp.jsonl", spans.replace(b'{"key":', b'{"kex":', 1), "error")
    stamp = next(iter(__import__("re").findall(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", slog)))
    impossible = slog.replace(stamp, stamp[:5] + "13-45" + stamp[10:], 1)
    case("fuzz_sglang_impossible_date.log", impossible.encode(), "warning")

    _request_level_damage(case, log)
    _clock_damage(case, doc, otlp, prom, azure)
    _policies(case, base, otlp, prom)
    _engine_value_damage(case, prom, log, slog)
    _line_damage(case, otlp, moon)
    _client_damage(case, otlp, moon, azure)
    _prometheus_api_damage(case)

    _specific(case, base)
    _fixture_specific(case)
    counts: dict[tuple[str, str], int] = {}
    for name in expected:
        counts[label(name)] = counts.get(label(name), 0) + 1
    _top_up(case, counts, base)

    for old in HERE.iterdir():
        if old.name not in out and old.name not in ("make_corpus.py", "expected.json"):
            old.unlink()
    for name, data in out.items():
        (HERE / name).write_bytes(data)
    table = {
        name: {"outcome": what, "kind": label(name)[0], "format": label(name)[1]} for name, what in expected.items()
    }
    (HERE / "expected.json").write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    return expected


def _request_level_damage(case: Callable[[str, bytes, str], None], v1_log: str) -> None:
    """Damage in request-level sources and logs (issue 16): numbers beyond int64 and JSON nested past any
    tool's output (one-line errors with the line or byte); impossible values (infinite or negative latencies,
    TTFT after the end, text where a summary has numbers) and impossible log dates (warnings, values NULL)."""
    otlp_line = next(
        ln
        for ln in (DATA / "vllm_cpu" / "A_baseline" / "otlp" / "traces.otlp.jsonl").read_text().splitlines()
        if '"llm_request"' in ln and "gen_ai.latency.e2e" in ln
    )
    bench = (DATA / "vllm_cpu" / "A_baseline" / "bench" / "bench_profiled_8req.json").read_text().rstrip()
    llmperf = json.loads((DATA / "serving" / "llmperf" / "individual__lepton_70b.json").read_text())[:6]
    aiperf = (DATA / "serving" / "aiperf" / "aiperf-2025-11_qwen3-0.6b_c1_rtx6000ada.profile_export.jsonl").read_text()
    aiperf_lines = aiperf.splitlines()[:5]
    guidellm = (DATA / "serving" / "guidellm" / "guidellm-0.3dev_stripped_1req.benchmarks.json").read_text().rstrip()
    v0_log = (DATA / "serving" / "log_excerpts" / "vllm_v0_metrics_log_lines.txt").read_text()
    big = "99999999999999999999999"
    deep = "[" * 20_000 + "]" * 20_000

    def attr(line: str, key: str, value: str) -> str:
        found = re.search(rf'"key": ?"{re.escape(key)}", ?"value": ?\{{"(?:double|int)Value": ?("?[0-9.e+-]+"?)', line)
        assert found, key
        return line.replace(found.group(0), found.group(0)[: -len(found.group(1))] + value, 1)

    # numbers beyond int64: one-line errors naming the line
    case(
        "int64_otlp_intvalue.otlp.jsonl",
        (attr(otlp_line, "gen_ai.usage.prompt_tokens", f'"{big}"') + "\n").encode(),
        "error",
    )
    b = json.loads(bench)
    b["output_lens"][2] = int(big)
    case("int64_vllm_bench_list.json", json.dumps(b).encode(), "error")
    rows = [dict(r) for r in llmperf]
    rows[1]["number_input_tokens"] = int(big)
    case("int64_llmperf.individual.json", json.dumps(rows, indent=1).encode(), "error")
    lines = list(aiperf_lines)
    lines[1] = re.sub(r'("input_sequence_length":\{"value":)\d+', rf"\g<1>{big}", lines[1], count=1)
    assert big in lines[1]
    case("int64_aiperf.profile_export.jsonl", ("\n".join(lines) + "\n").encode(), "error")
    # JSON nested deeper than any tool writes, after the keys that identify the format
    case("deep_otlp.otlp.jsonl", (otlp_line.rstrip()[:-1] + f', "x": {deep}}}\n').encode(), "error")
    case("deep_vllm_bench.json", (bench[:-1] + f', "x": {deep}}}').encode(), "error")
    case("deep_guidellm.benchmarks.json", (guidellm[:-1] + f', "x": {deep}}}').encode(), "error")
    # identity: two requests with one id (an error, never one request), a re-exported file, a span without ids
    ids = re.findall(r'"key": ?"gen_ai.request.id", ?"value": ?\{"stringValue": ?"([^"]+)"', otlp_line)
    assert len(set(ids)) >= 2
    case("dup_request_id_otlp.otlp.jsonl", (otlp_line.replace(ids[1], ids[0]) + "\n").encode(), "error")
    case("reexported_otlp.otlp.jsonl", (otlp_line + "\n" + otlp_line + "\n").encode(), "warning")
    bare = json.loads(otlp_line)
    spans = [sp for rs in bare["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]]
    first = next(sp for sp in spans if sp["name"] == "llm_request")
    first["attributes"] = []
    case("span_without_attributes_otlp.otlp.jsonl", (json.dumps(bare) + "\n").encode(), "warning")
    # impossible per-request values: ingested with a warning, the values NULL
    case("inf_otlp_e2e.otlp.jsonl", (attr(otlp_line, "gen_ai.latency.e2e", "Infinity") + "\n").encode(), "warning")
    case(
        "inf_text_otlp_e2e.otlp.jsonl", (attr(otlp_line, "gen_ai.latency.e2e", '"Infinity"') + "\n").encode(), "warning"
    )
    case(
        "nan_otlp_ttft.otlp.jsonl",
        (attr(otlp_line, "gen_ai.latency.time_to_first_token", '"NaN"') + "\n").encode(),
        "warning",
    )
    case(
        "ttft_after_e2e_otlp.otlp.jsonl",
        (attr(otlp_line, "gen_ai.latency.time_to_first_token", "99.5") + "\n").encode(),
        "warning",
    )
    b = json.loads(bench)
    b["ttfts"][1] = b["latencies"][1] + 5.0
    case("ttft_after_e2e_vllm_bench.json", json.dumps(b).encode(), "warning")
    b = json.loads(bench)
    b["latencies"][3] = -2.5
    case("negative_e2e_vllm_bench.json", json.dumps(b).encode(), "warning")
    rows = [dict(r) for r in llmperf]
    rows[2]["ttft_s"] = rows[2]["end_to_end_latency_s"] + 3.0
    case("ttft_after_e2e_llmperf.individual.json", json.dumps(rows, indent=1).encode(), "warning")
    rows = [dict(r) for r in llmperf]
    rows[3]["end_to_end_latency_s"] = -1.0
    case("negative_e2e_llmperf.individual.json", json.dumps(rows, indent=1).encode(), "warning")
    # token counts with a fraction (no tool writes one; truncating would hide it): NULL, counted
    b = json.loads(bench)
    b["output_lens"][1] = 10.5
    case("fractional_tokens_vllm_bench.json", json.dumps(b).encode(), "warning")
    rows = [dict(r) for r in llmperf]
    rows[1]["number_output_tokens"] = 150.5
    case("fractional_tokens_llmperf.individual.json", json.dumps(rows, indent=1).encode(), "warning")
    lines = list(aiperf_lines)
    lines[1] = re.sub(r'("output_sequence_length":\{"value":)(\d+)', r"\g<1>\g<2>.5", lines[1], count=1)
    case("fractional_tokens_aiperf.profile_export.jsonl", ("\n".join(lines) + "\n").encode(), "warning")
    token = re.search(r'"key": ?"gen_ai.usage.prompt_tokens", ?"value": ?\{"intValue": ?"(\d+)"\}', otlp_line)
    assert token
    frac = otlp_line.replace(
        token.group(0), f'"key": "gen_ai.usage.prompt_tokens", "value": {{"doubleValue": {token.group(1)}.5}}', 1
    )
    case("fractional_tokens_otlp.otlp.jsonl", (frac + "\n").encode(), "warning")
    # a summary's figures as text, a boolean, a negative count: dropped from the summary with a warning
    for name, key, value in (
        ("completed_text", "completed", "8"),
        ("duration_bool", "duration", True),
        ("failed_negative", "failed", -3),
    ):
        b = json.loads(bench)
        b[key] = value
        case(f"summary_{name}_vllm_bench.json", json.dumps(b).encode(), "warning")
    # impossible log dates: the line's values kept, its time NULL, counted
    stamp = re.search(r"(?:INFO|WARNING) (\d\d-\d\d) \d\d:\d\d:\d\d", v1_log)
    assert stamp
    case("date_11_31_vllm_v1.log", v1_log.replace(stamp.group(1), "11-31").encode(), "warning")
    case("date_13_01_vllm_v1.log", v1_log.replace(stamp.group(1), "13-01").encode(), "warning")
    stamp0 = re.search(r"(?:INFO|WARNING) (\d\d-\d\d) \d\d:\d\d:\d\d", v0_log)
    assert stamp0
    case("date_02_30_vllm_v0.log", v0_log.replace(stamp0.group(1), "02-30").encode(), "warning")


def _clock_damage(case: Callable[[str, bytes, str], None], doc: dict, otlp: list[bytes], prom: bytes, azure: list[str]):
    """Wall clocks no real run has (before 2015 or in the future): one-line errors naming the line or field."""
    for name, base in (("2256", 9_000_000_000_000_000_000), ("1970", 5_000_000_000), ("negative", -1_000_000_000)):
        case(
            f"clock_{name}_kineto.json", _with_events({**doc, "baseTimeNanoseconds": base}, doc["traceEvents"]), "error"
        )
    line = next(ln for ln in otlp if b'"llm_request"' in ln).decode()
    start = re.search(r'"startTimeUnixNano": ?"(\d+)"', line)
    assert start
    for name, ns in (("2200", "7258118400000000000"), ("1970", "1000000000")):
        case(f"clock_{name}_otlp.otlp.jsonl", line.replace(start.group(1), ns, 1).encode(), "error")
    end = re.search(r'"endTimeUnixNano": ?"(\d+)"', line)
    assert end
    case("clock_end_2200_otlp.otlp.jsonl", line.replace(end.group(1), "7258118400000000000", 1).encode(), "error")
    text = prom.decode()
    stamp = re.search(r"# scrape_unix_ts (\S+)", text)
    if stamp:
        for name, ts in (("2200", "7258118400"), ("1970", "86400"), ("negative", "-5")):
            case(f"clock_{name}_prometheus.prom", text.replace(stamp.group(1), ts, 1).encode(), "error")
    aiperf = (DATA / "serving" / "aiperf" / "aiperf-2025-11_qwen3-0.6b_c1_rtx6000ada.profile_export.jsonl").read_text()
    first, *rest = aiperf.splitlines()[:5]
    start = re.search(r'"request_start_ns":(\d+)', first)
    assert start
    for name, ns in (("2200", "7258118400000000000"), ("1970", "1000000000000")):
        dated = first.replace(start.group(0), f'"request_start_ns":{ns}', 1)
        case(f"clock_{name}_aiperf.profile_export.jsonl", ("\n".join([dated, *rest]) + "\n").encode(), "error")
    guidellm = (DATA / "serving" / "guidellm" / "guidellm-0.3dev_stripped_1req.benchmarks.json").read_text()
    request = json.loads(guidellm)["benchmarks"][0]["requests"]["successful"][0]["start_time"]
    dated = guidellm.replace(f'"start_time": {request}', '"start_time": 7258118400.0')
    assert dated != guidellm
    case("clock_2200_guidellm.benchmarks.json", dated.encode(), "error")
    rows = list(azure)
    for name, year in (("2200", "2200"), ("1970", "1970"), ("2014", "2014")):
        dated = list(rows)
        dated[57] = year + dated[57][4:]
        case(f"clock_{name}_azure.csv", ("\n".join(dated) + "\n").encode(), "error")


def _policies(case: Callable[[str, bytes, str], None], trace: bytes, otlp: list[bytes], prom: bytes) -> None:
    """One policy in every reader: a UTF-8 byte-order mark is accepted (read as if absent); a key named twice
    in one object is the one-line error (which value was meant is unknown)."""
    bom = b"\xef\xbb\xbf"
    line = next(ln for ln in otlp if b'"llm_request"' in ln)
    bench = (DATA / "vllm_cpu" / "A_baseline" / "bench" / "bench_profiled_8req.json").read_bytes()
    aiperf = (DATA / "serving" / "aiperf" / "aiperf-2025-11_qwen3-0.6b_c1_rtx6000ada.profile_export.jsonl").read_bytes()
    aiperf = b"".join(aiperf.splitlines(keepends=True)[:5])
    case("bom_kineto.json", bom + trace, "ok")
    case("bom_otlp.otlp.jsonl", bom + line, "ok")
    case("bom_vllm_bench.json", bom + bench, "ok")
    case("bom_prometheus.prom", bom + prom, "ok")
    case("bom_aiperf.profile_export.jsonl", bom + aiperf, "ok")
    text = bench.decode()
    case(
        "dupkey_vllm_bench.json",
        text.replace('"ttfts":', '"ttfts": [0, 0, 0, 0, 0, 0, 0, 0], "ttfts":', 1).encode(),
        "error",
    )
    case("dupkey_otlp.otlp.jsonl", line.replace(b'"spanId":', b'"spanId": "00", "spanId":', 1), "error")
    first, rest = aiperf.split(b"\n", 1)
    case(
        "dupkey_aiperf.profile_export.jsonl",
        first.replace(b'"metrics":', b'"metrics": {}, "metrics":', 1) + b"\n" + rest,
        "error",
    )


def _engine_value_damage(case: Callable[[str, bytes, str], None], prom: bytes, v1_log: str, slog: str) -> None:
    """Engine values no engine can have (negative counts, KV usage above 100 %, infinite gauges), a series twice
    in one scrape (summed, it read as a load that never was), a scrape cut inside a sample value: warnings, the
    values NULL, the cut line dropped."""
    text = prom.decode()

    def sample(name: str, value: str) -> bytes:
        line = next(ln for ln in text.splitlines() if ln.startswith(name + "{"))
        return text.replace(line, line.rsplit(" ", 1)[0] + " " + value, 1).encode()

    case("negative_running_prometheus.prom", sample("vllm:num_requests_running", "-3.0"), "warning")
    case("kv_250pct_prometheus.prom", sample("vllm:kv_cache_usage_perc", "2.5"), "warning")
    case("inf_waiting_prometheus.prom", sample("vllm:num_requests_waiting", "+Inf"), "warning")
    case("fractional_running_prometheus.prom", sample("vllm:num_requests_running", "1.5"), "warning")
    for metric in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        line = next(ln for ln in text.splitlines() if ln.startswith(metric + "{"))
        short = metric.split(":")[1]
        case(f"duplicated_{short}_prometheus.prom", text.replace(line, line + "\n" + line, 1).encode(), "warning")
    for k, cut in enumerate((3, 9, 17)):
        case(f"cut_scrape_{k}_prometheus.prom", text.rstrip("\n")[:-cut].encode(), "warning")
    kv = re.search(r"GPU KV cache usage: ([\d.]+)%", v1_log)
    assert kv
    case("kv_250pct_vllm_v1.log", v1_log.replace(kv.group(0), "GPU KV cache usage: 250.0%", 1).encode(), "warning")
    case("kv_750pct_vllm_v1.log", v1_log.replace(kv.group(0), "GPU KV cache usage: 750.0%", 1).encode(), "warning")
    trt = json.loads((DATA / "serving" / "trtllm" / "trtllm-serve_metrics_iter154.docs-example.json").read_text())
    for name, change in (
        ("negative_active", lambda r: r.update(numActiveRequests=-1)),
        (
            "used_blocks_over_max",
            lambda r: r["kvCacheStats"].update(usedNumBlocks=3 * r["kvCacheStats"]["maxNumBlocks"]),
        ),
        ("negative_latency", lambda r: r.update(iterLatencyMS=-7.0)),
    ):
        rows = json.loads(json.dumps(trt))
        change(rows[0])
        case(f"{name}_trtllm_iterations.json", json.dumps(rows, indent=4).encode(), "warning")
    for day in ("02-30", "00-10"):
        stamp = re.search(r"\[\d{4}-(\d\d-\d\d) ", slog)
        assert stamp
        case(f"date_{day.replace('-', '_')}_sglang.log", slog.replace(stamp.group(1), day, 1).encode(), "warning")
    usage = re.search(r"token usage: ([\d.]+)", slog)
    assert usage
    case("token_usage_7_sglang.log", slog.replace(usage.group(0), "token usage: 7.50", 1).encode(), "warning")


def _line_damage(case: Callable[[str, bytes, str], None], otlp: list[bytes], moon: list[bytes]) -> None:
    """Line-based files with one damaged line in the middle, or the last cut off: only that line lost,
    counted (the rest read)."""
    spans = otlp[:8]
    case("damaged_middle_line_otlp.otlp.jsonl", b"".join(spans[:3] + [spans[3][:200] + b"\n"] + spans[4:]), "warning")
    lines = moon[:200]
    case("damaged_middle_line_mooncake.jsonl", b"".join(lines[:90] + [lines[90][:25] + b"\n"] + lines[91:]), "warning")
    aiperf = (DATA / "serving" / "aiperf" / "aiperf-2025-11_qwen3-0.6b_c1_rtx6000ada.profile_export.jsonl").read_bytes()
    alines = aiperf.splitlines(keepends=True)[:8]
    case(
        "damaged_middle_line_aiperf.profile_export.jsonl",
        b"".join(alines[:3] + [alines[3][:90] + b"\n"] + alines[4:]),
        "warning",
    )
    sg = (DATA / "serving" / "sglang_bench_serving" / "datacrunch-h200__llama_3_3_70b_online_output.jsonl").read_bytes()
    slines = sg.splitlines(keepends=True)
    case(
        "damaged_middle_line_sglang_bench.jsonl",
        b"".join(slines[:2] + [slines[2][:60] + b"\n"] + slines[3:]),
        "warning",
    )
    case("cut_last_line_sglang_bench.jsonl", sg.rstrip(b"\n")[:-30], "warning")
    bench = (DATA / "vllm_cpu" / "A_baseline" / "bench" / "bench_profiled_8req.json").read_bytes().strip()
    case("cut_appended_result_vllm_bench.json", bench + b"\n" + bench[: len(bench) // 2], "warning")


def _client_damage(case: Callable[[str, bytes, str], None], otlp: list[bytes], moon: list[bytes], azure: list[str]):
    """The damage kinds above in the other client and trace formats (issue 17's readers among them), each
    made from a real file: guidellm 0.3, LLMPerf, AIPerf of both record schemas and its aggregate, an
    inference-perf stage, SGLang bench lines, Mooncake and Azure rows, run A's spans in a Jaeger export and a
    flat span list; the inference-perf per-request and GenAI-Perf files are built from their sources."""
    big = "99999999999999999999999"
    deep = "[" * 20_000 + "]" * 20_000
    serving = DATA / "serving"
    guidellm = json.loads((serving / "guidellm" / "guidellm-0.3dev_stripped_1req.benchmarks.json").read_text())
    llm = json.loads((serving / "llmperf" / "individual__lepton_70b.json").read_text())[:6]
    llm_summary = json.loads((serving / "llmperf" / "summary__lepton_70b.json").read_text())
    old = (serving / "aiperf" / "aiperf-2025-10_gpt-oss-20b_c100_cancel10.profile_export.jsonl").read_text()
    old_lines = [json.loads(x) for x in old.splitlines()[10:16]]  # successful records of the pre-release schema
    agg = json.loads(AIPERF_AGG.read_text())
    stage = json.loads(
        (serving / "inference_perf" / "kubecon-na-2025_vllm" / "stage_0_lifecycle_metrics.json").read_text()
    )
    sg_lines = (
        (serving / "sglang_bench_serving" / "datacrunch-h200__llama_3_3_70b_online_output.jsonl")
        .read_text()
        .splitlines()
    )

    def dumps_lines(objs: list) -> bytes:
        return "".join(json.dumps(o) + "\n" for o in objs).encode()

    def g_with(**change: object) -> bytes:
        d = json.loads(json.dumps(guidellm))
        d["benchmarks"][0]["requests"]["successful"][0].update(change)
        return json.dumps(d).encode()

    req = guidellm["benchmarks"][0]["requests"]["successful"][0]
    # guidellm 0.3: overflow, impossible values, BOM, duplicate key, deep nesting elsewhere
    case("int64_guidellm.benchmarks.json", g_with(prompt_tokens=int(big)), "error")
    # 0.3 records carry the figures guidellm computed beside the times: the damage is in those
    case("negative_e2e_guidellm.benchmarks.json", g_with(request_latency=-0.5), "warning")
    case(
        "ttft_after_e2e_guidellm.benchmarks.json",
        g_with(time_to_first_token_ms=req["request_latency"] * 5e3),
        "warning",
    )
    case("fractional_tokens_guidellm.benchmarks.json", g_with(output_tokens=12.5), "warning")
    case("bom_guidellm.benchmarks.json", b"\xef\xbb\xbf" + json.dumps(guidellm).encode(), "ok")
    text = json.dumps(guidellm)
    case(
        "dupkey_guidellm.benchmarks.json",
        text.replace('"prompt_tokens": ', '"prompt_tokens": 1, "prompt_tokens": ', 1).encode(),
        "error",
    )
    # LLMPerf individual responses
    rows = [dict(r) for r in llm]
    case("deep_llmperf.individual.json", (json.dumps(rows)[:-1] + f", {deep}]").encode(), "error")
    rows = [dict(r) for r in llm]
    rows[2]["ttft_s"] = float("inf")
    case("inf_llmperf.individual.json", json.dumps(rows).encode(), "warning")
    case("bom_llmperf.individual.json", b"\xef\xbb\xbf" + json.dumps(llm).encode(), "ok")
    case(
        "dupkey_llmperf.individual.json",
        json.dumps(llm).replace('"ttft_s": ', '"ttft_s": 0, "ttft_s": ', 1).encode(),
        "error",
    )
    # LLMPerf summary: text where a figure belongs is dropped, counted
    case("bom_llmperf.summary.json", b"\xef\xbb\xbf" + json.dumps(llm_summary).encode(), "ok")
    text = json.dumps(llm_summary)
    case("truncated_llmperf.summary.json", text[: len(text) // 2].encode(), "error")
    case(
        "text_figure_llmperf.summary.json",
        text.replace('"results_ttft_s_mean": ', '"results_ttft_s_mean": "n/a", "was": ', 1).encode(),
        "warning",
    )
    case(
        "dupkey_llmperf.summary.json",
        text.replace('"results_ttft_s_mean": ', '"results_ttft_s_mean": 0, "results_ttft_s_mean": ', 1).encode(),
        "error",
    )
    # AIPerf pre-release schema
    dup = [json.loads(json.dumps(r)) for r in old_lines]
    dup[3]["metadata"]["x_request_id"] = dup[1]["metadata"]["x_request_id"]
    case("dup_request_id_aiperf.profile_export.jsonl", dumps_lines(dup), "error")
    neg = [json.loads(json.dumps(r)) for r in old_lines]
    neg[2]["metrics"]["request_latency"]["value"] = -5.0
    case("negative_e2e_aiperf.profile_export.jsonl", dumps_lines(neg), "warning")
    late = [json.loads(json.dumps(r)) for r in old_lines]
    late[2]["metrics"]["ttft"]["value"] = late[2]["metrics"]["request_latency"]["value"] * 2
    case("ttft_after_e2e_aiperf.profile_export.jsonl", dumps_lines(late), "warning")
    lines = [json.dumps(r) for r in old_lines]
    lines[2] = lines[2][:-1] + f', "x": {deep}}}'
    case("deep_aiperf.profile_export.jsonl", ("\n".join(lines) + "\n").encode(), "error")
    nan = [json.loads(json.dumps(r)) for r in old_lines]
    nan[1]["metrics"]["ttft"]["value"] = float("nan")
    case("nan_aiperf.profile_export.jsonl", dumps_lines(nan), "warning")
    # AIPerf's aggregate
    case("bom_aiperf.summary.json", b"\xef\xbb\xbf" + json.dumps(agg).encode(), "ok")
    case("deep_aiperf.summary.json", (json.dumps(agg)[:-1] + f', "x": {deep}}}').encode(), "error")
    case("dupkey_aiperf.summary.json", json.dumps(agg).replace('"avg": ', '"avg": 0, "avg": ', 1).encode(), "error")
    # inference-perf stage report
    case("bom_inference_perf.lifecycle.json", b"\xef\xbb\xbf" + json.dumps(stage).encode(), "ok")
    case("deep_inference_perf.lifecycle.json", (json.dumps(stage)[:-1] + f', "x": {deep}}}').encode(), "error")
    case(
        "dupkey_inference_perf.lifecycle.json",
        json.dumps(stage).replace('"count": ', '"count": 0, "count": ', 1).encode(),
        "error",
    )
    broken = json.loads(json.dumps(stage))
    broken["load_summary"] = [broken["load_summary"]]
    case("structure_inference_perf.lifecycle.json", json.dumps(broken).encode(), "error")
    broken = json.loads(json.dumps(agg))
    broken["records"] = list(broken["records"].values())
    case("structure_aiperf.summary.json", json.dumps(broken).encode(), "error")
    # inference-perf per-request records (built from reportgen's per_request dump)
    per = _inference_perf_requests()
    p = json.loads(json.dumps(per))
    p[2]["info"]["input_tokens"] = int(big)
    case("int64_inference_perf.requests.json", json.dumps(p).encode(), "error")
    p = json.loads(json.dumps(per))
    p[3]["end_time"] = p[3]["start_time"] - 2.0
    case("negative_e2e_inference_perf.requests.json", json.dumps(p).encode(), "warning")
    p = json.loads(json.dumps(per))
    p[1]["info"]["response_metrics"]["output_tokens"] = 3.5
    case("fractional_tokens_inference_perf.requests.json", json.dumps(p).encode(), "warning")
    # SGLang bench summary lines
    sg = [json.loads(x) for x in sg_lines]
    sg[1]["completed"] = "300"
    case("summary_completed_text_sglang_bench.jsonl", dumps_lines(sg), "warning")
    case("bom_sglang_bench.jsonl", b"\xef\xbb\xbf" + ("\n".join(sg_lines) + "\n").encode(), "ok")
    # Mooncake and Azure rows
    m = [json.loads(x) for x in moon[:50]]
    m[7]["input_length"] = int(big)
    case("int64_mooncake.jsonl", dumps_lines(m), "warning")  # a line Mooncake's reader cannot take: dropped, counted
    m = [json.loads(x) for x in moon[:50]]
    m[9]["output_length"] = -3
    case("negative_tokens_mooncake.jsonl", dumps_lines(m), "warning")
    head, *rows_ = azure[:40]
    cells = rows_[5].split(",")
    cells[1] = big
    case("int64_azure.csv", ("\n".join([head, *rows_[:5], ",".join(cells), *rows_[6:]]) + "\n").encode(), "error")
    cells = rows_[5].split(",")
    cells[2] = "-7"
    case(
        "negative_tokens_azure.csv",
        ("\n".join([head, *rows_[:5], ",".join(cells), *rows_[6:]]) + "\n").encode(),
        "warning",
    )
    case("bom_azure.csv", ("\ufeff" + "\n".join([head, *rows_]) + "\n").encode(), "ok")
    # run A's spans in the other wrappers: a flat span list and a Jaeger export with duplicated request ids
    spans = [
        sp
        for ln in otlp[:40]
        for rs in json.loads(ln)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for sp in ss["spans"]
    ]
    requests = [sp for sp in spans if sp["name"] == "llm_request"][:6]
    case("bom_flat_spans.otlp.json", b"\xef\xbb\xbf" + json.dumps({"spans": requests}).encode(), "ok")
    twice = json.loads(json.dumps(requests))
    for sp in twice[3:]:
        for a in sp["attributes"]:
            if a["key"] == "gen_ai.request.id":
                a["value"] = {"stringValue": "cmpl-same-0"}
    for sp in twice[:3]:
        for a in sp["attributes"]:
            if a["key"] == "gen_ai.request.id":
                a["value"] = {"stringValue": "cmpl-same-0"}
    case("dup_request_id_flat_spans.otlp.json", json.dumps({"spans": twice}).encode(), "error")
    inf = json.loads(json.dumps(requests))
    for a in inf[1]["attributes"]:
        if a["key"] == "gen_ai.latency.e2e":
            a["value"] = {"doubleValue": "Infinity"}
    case("inf_e2e_flat_spans.otlp.json", json.dumps({"spans": inf}).encode(), "warning")
    jaeger = {
        "data": [
            {
                "traceID": "t",
                "spans": [
                    {
                        "traceID": sp["traceId"],
                        "spanID": sp["spanId"],
                        "operationName": sp["name"],
                        "startTime": int(sp["startTimeUnixNano"]) // 1000,
                        "duration": (int(sp["endTimeUnixNano"]) - int(sp["startTimeUnixNano"])) // 1000,
                        "tags": [
                            {"key": a["key"], "type": "x", "value": next(iter(a["value"].values()))}
                            for a in sp["attributes"]
                        ],
                    }
                    for sp in requests
                ],
                "processes": {},
            }
        ]
    }
    late = json.loads(json.dumps(jaeger))
    late["data"][0]["spans"][2]["startTime"] = 7_258_118_400_000_000  # 2200, in µs
    case("clock_2200_jaeger.json", json.dumps(late).encode(), "error")
    neg = json.loads(json.dumps(jaeger))
    for t in neg["data"][0]["spans"][1]["tags"]:
        if t["key"] == "gen_ai.latency.time_in_queue":
            t["value"] = -0.5
    case("negative_queue_jaeger.json", json.dumps(neg).encode(), "warning")


def _prometheus_api_damage(case: Callable[[str, bytes, str], None]) -> None:
    """A Prometheus server's query_range answer made from run B's first timed scrapes (the gauges, counters and
    histogram sums of one replica), and the API's edge cases: NaN samples, a counter reset, an error answer."""
    answer = _prometheus_api_answer()

    case("ok_prometheus_api.json", answer(), "ok")
    case(
        "nan_prometheus_api.json",
        answer(
            lambda n, v: [
                [t, "NaN"] if i == 2 and n == "vllm:num_requests_running" else [t, x] for i, (t, x) in enumerate(v)
            ]
        ),
        "warning",
    )
    case(
        "counter_reset_prometheus_api.json",
        answer(
            lambda n, v: [
                [t, "0"] if i >= 4 and n == "vllm:generation_tokens_total" else [t, x] for i, (t, x) in enumerate(v)
            ]
        ),
        "warning",
    )
    compact = answer().decode().replace(", ", ",").replace(": ", ":")  # as the server writes it
    case("truncated_prometheus_api.json", compact[: len(compact) * 2 // 3].encode(), "error")
    case(
        "three_element_pair_prometheus_api.json",
        answer(
            lambda n, v: [
                [t, x, x] if i == 3 and n == "vllm:num_requests_waiting" else [t, x] for i, (t, x) in enumerate(v)
            ]
        ),
        "error",
    )
    case(
        "word_for_a_value_prometheus_api.json",
        answer(
            lambda n, v: [
                [t, "lots"] if i == 1 and n == "vllm:kv_cache_usage_perc" else [t, x] for i, (t, x) in enumerate(v)
            ]
        ),
        "error",
    )
    case(
        "duplicate_key_prometheus_api.json",
        compact.replace('"status":"success"', '"status":"success","status":"success"', 1).encode(),
        "error",
    )
    case(
        "error_answer_prometheus_api.json",
        json.dumps({"status": "error", "errorType": "bad_data", "error": 'invalid parameter "query"'}).encode(),
        "error",
    )


# ---- the audit: every kind of damage of issue 16, at least three cases in every format it applies to ----

# kind of damage -> name patterns of the cases above (a case matching none is "structure": a file that is
# empty, corrupt or of the wrong shape); the format is read from the name and checked against the sniffer
KINDS: tuple[tuple[str, str], ...] = (
    (
        r"^(truncated_|truncation_|cut_last|cut_appended|damaged_middle_line_|mooncake_truncated|otlp_truncated|azure_short)",
        "truncation",
    ),
    (r"^(int64_|int_beyond_int64)", "int64"),
    (r"^deep_", "deep"),
    (r"^bom_", "bom"),
    (r"^(dupkey_|duplicate_key_)", "dupkey"),
    (r"^(clock_|another_clock)", "clock"),
    (r"^(date_|fuzz_sglang_impossible_date)", "log_date"),
    (
        r"^(dup_request_id_|reexported_|span_without_attributes_|one_correlation_|kernels_before_|duplicate_events)",
        "identity",
    ),
    (
        r"^(negative_e2e_|ttft_after_e2e_|fractional_tokens_|inf_(otlp|text_otlp|llmperf|e2e_flat)|nan_(otlp|aiperf)"
        r"|negative_tokens_|negative_queue_|request_value_)",
        "request_value",
    ),
    (
        r"^(negative_running|kv_\d+pct|inf_waiting|fractional_running|duplicated_|cut_scrape|negative_active|used_blocks"
        r"|negative_latency_trtllm|token_usage|nan_prometheus_api|counter_reset|engine_value_)",
        "engine_value",
    ),
    (r"^(summary_|text_figure_)", "summary_figure"),
)
FORMAT_OF_NAME: tuple[tuple[str, str], ...] = (
    (r"aggregate\.csv$", "aiperf-summary-csv"),
    (r"(_otlp|\.otlp\.|jaeger|flat_spans)", "otlp-traces"),
    (r"vllm_bench", "vllm-bench"),
    (r"vllm_stats", "vllm-stats-csv"),
    (r"sglang_bench", "sglang-bench"),
    (r"llmperf\.summary", "llmperf-summary"),
    (r"llmperf", "llmperf"),
    (r"aiperf\.summary", "aiperf-summary"),
    (r"aiperf", "aiperf-export"),
    (r"guidellm", "guidellm-benchmarks"),
    (r"inference_perf\.lifecycle", "inference-perf-lifecycle"),
    (r"inference_perf\.prometheus", "inference-perf-prometheus"),
    (r"inference_perf\.requests", "inference-perf-requests"),
    (r"mooncake", "mooncake-trace"),
    (r"azure", "azure-llm-trace"),
    (r"prometheus_api", "prometheus-api"),
    (r"\.prom$", "prometheus"),
    (r"(vllm_v[01]\.log|vllm_glued|fuzz_vllm)", "vllm-server-log"),
    (r"(sglang\.log|sglang_glued|fuzz_sglang)", "sglang-scheduler-log"),
    (r"trtllm_iterations", "trtllm-iteration-log"),
    (r"client_log", "vllm-bench-client-log"),
    (r"burstgpt", "burstgpt"),
    (r"trtllm_report", "trtllm-bench-report"),
    (r"trtllm_bench", "trtllm-bench-requests"),
    (r"tgi\.log", "tgi-log"),
    (r"tgi_headers", "tgi-response-headers"),
    (r"genai_perf", "genai-perf-export"),
    (r"own_requests", "lltrace-requests"),
    (r"replay_config", "burstgpt-replay-config"),
)
JSON_FORMATS = (
    "pytorch-kineto", "otlp-traces", "vllm-bench", "sglang-bench", "llmperf", "llmperf-summary", "aiperf-export",
    "aiperf-summary", "guidellm-benchmarks", "inference-perf-lifecycle", "inference-perf-prometheus",
    "inference-perf-requests", "mooncake-trace", "prometheus-api", "trtllm-iteration-log",
)  # fmt: skip
TEXT_FORMATS = ("azure-llm-trace", "prometheus", "vllm-server-log", "sglang-scheduler-log", "vllm-stats-csv")
REQUEST_FORMATS = (
    "otlp-traces", "vllm-bench", "llmperf", "aiperf-export", "guidellm-benchmarks", "inference-perf-requests",
    "mooncake-trace", "azure-llm-trace",
)  # fmt: skip
# the formats read only from fixtures built from their tools' sources (no real file in sample_traces/)
FIXTURE_JSON_FORMATS = ("trtllm-bench-requests", "tgi-response-headers", "genai-perf-export", "lltrace-requests")
FIXTURE_FORMATS = (*FIXTURE_JSON_FORMATS, "burstgpt", "tgi-log")
FIXTURE_SUMMARIES = ("trtllm-bench-report",)  # a summary only: no request values, ids or clocks to damage
CSV_SUMMARIES = ("aiperf-summary-csv",)  # a summary as CSV: its figures and its encoding can be damaged
# kind -> the formats it applies to (issue 16's classes; where a format cannot carry a kind it is absent:
# deep nesting and duplicated keys need JSON, impossible dates need a log, identity needs request ids)
APPLIES: dict[str, tuple[str, ...]] = {
    "int64": (*REQUEST_FORMATS, "sglang-bench", "pytorch-kineto", *(f for f in FIXTURE_FORMATS if f != "tgi-log")),
    "deep": (*JSON_FORMATS, *FIXTURE_JSON_FORMATS, *FIXTURE_SUMMARIES, "burstgpt-replay-config"),
    "log_date": ("vllm-server-log", "sglang-scheduler-log"),
    "summary_figure": (
        "vllm-bench",
        "sglang-bench",
        "llmperf-summary",
        "aiperf-summary",
        "inference-perf-lifecycle",
        "inference-perf-prometheus",
        "trtllm-bench-report",
        *CSV_SUMMARIES,
    ),  # fmt: skip
    "request_value": (*REQUEST_FORMATS, *FIXTURE_FORMATS),
    "engine_value": (
        "prometheus",
        "prometheus-api",
        "vllm-server-log",
        "sglang-scheduler-log",
        "trtllm-iteration-log",
        "vllm-stats-csv",
    ),  # fmt: skip
    "clock": (
        "pytorch-kineto",
        "otlp-traces",
        "prometheus",
        "prometheus-api",
        "azure-llm-trace",
        "aiperf-export",
        "guidellm-benchmarks",
        "genai-perf-export",
        "tgi-log",
        "lltrace-requests",
    ),  # fmt: skip
    "identity": (
        "pytorch-kineto",
        "otlp-traces",
        "aiperf-export",
        "guidellm-benchmarks",
        "trtllm-bench-requests",
        "lltrace-requests",
    ),  # fmt: skip
    "truncation": (
        *JSON_FORMATS,
        *TEXT_FORMATS,
        *FIXTURE_FORMATS,
        *FIXTURE_SUMMARIES,
        "vllm-bench-client-log",
        "burstgpt-replay-config",
    ),  # fmt: skip
    "bom": (
        *JSON_FORMATS,
        *TEXT_FORMATS,
        *FIXTURE_FORMATS,
        *FIXTURE_SUMMARIES,
        *CSV_SUMMARIES,
        "vllm-bench-client-log",
        "burstgpt-replay-config",
    ),  # fmt: skip
    "dupkey": (*JSON_FORMATS, *FIXTURE_JSON_FORMATS, *FIXTURE_SUMMARIES, "burstgpt-replay-config"),
}


def label(name: str) -> tuple[str, str]:
    """(kind of damage, format) of a case, from its name."""
    kind = next((k for pattern, k in KINDS if re.search(pattern, name)), "structure")
    fmt = next((f for pattern, f in FORMAT_OF_NAME if re.search(pattern, name)), "pytorch-kineto")
    return kind, fmt


def _prometheus_api_answer() -> Callable[[Callable[[str, list], list] | None], bytes]:
    """A Prometheus server's query_range answer made from run B's first timed scrapes under load (the gauges,
    counters and histogram sums of one replica); ``change(name, values)`` alters a series' samples."""
    scrapes = sorted((DATA / "vllm_cpu" / "B_kvpressure" / "metrics").glob("metrics_*.prom"))[5:11]
    series: dict[tuple, list] = {}
    for path in scrapes:
        text = path.read_text()
        ts = float(re.search(r"^# scrape_unix_ts (\S+)", text, re.M).group(1))
        for name, labels, value in re.findall(r"^(vllm:[\w:]+)(?:\{([^}]*)\})? (\S+)$", text, re.M):
            if name.endswith("_bucket"):
                continue
            lab = dict(re.findall(r'(\w+)="([^"]*)"', labels)) | {"instance": "replica-b:8000"}
            series.setdefault((name, tuple(sorted(lab.items()))), []).append([ts, value])

    def answer(change: Callable[[str, list], list] | None = None) -> bytes:
        result = [
            {"metric": {"__name__": n, **dict(lab)}, "values": change(n, v) if change else v}
            for (n, lab), v in series.items()
        ]
        return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()

    return answer


def _inference_perf_requests() -> list[dict]:
    """inference-perf per-request records as its reportgen's per_request dump writes them (no real file)."""
    return [
        {
            "start_time": 100.0 + i,
            "end_time": 100.5 + i,
            "request": "{}",
            "response": "",
            "info": {
                "input_tokens": 64,
                "request_metrics": {"text": {"input_tokens": 64}},
                "response_metrics": {"output_tokens": 16, "output_token_times": [100.1 + i]},
            },
            "error": None,
        }
        for i in range(6)
    ]


def _lines(path: Path, n: int, skip: int = 0) -> bytes:
    return b"".join(path.read_bytes().splitlines(keepends=True)[skip : skip + n])


def _bases(kineto: bytes) -> dict[str, tuple[str, str, list[bytes], tuple[str, ...]]]:
    """Per format: its file-name ending, its shape (``doc``: one JSON object, ``array``: one JSON array,
    ``lines``: JSON lines, ``text``), up to three real files of it cut small, and three keys it writes (the
    generic kinds below are made from these)."""
    s = DATA / "serving"
    v = DATA / "vllm_cpu"
    ip = s / "inference_perf"
    agg = AIPERF_AGG

    def rows(path: Path, n: int) -> bytes:
        return json.dumps(json.loads(path.read_text())[:n]).encode()

    def stages(kind: str, picks: tuple[int, int, int]) -> list[bytes]:
        """Two stages of the rate sweep and one of the batch-size sweep."""
        runs = ("kubecon-na-2025_vllm", "kubecon-na-2025_vllm", "kubecon-na-2025_vllm_batch_size")
        return [(ip / run / f"stage_{n}_{kind}_metrics.json").read_bytes() for run, n in zip(runs, picks, strict=True)]

    return {
        "pytorch-kineto": ("kineto.json", "doc", [kineto], ('"name"', '"args"', '"dur"')),
        "otlp-traces": (
            "otlp.otlp.jsonl",
            "lines",
            [_lines(v / r / "otlp" / "traces.otlp.jsonl", 6) for r in ("A_baseline", "B_kvpressure", "D_chunked")],
            ('"traceId"', '"startTimeUnixNano"', '"attributes"'),
        ),
        "vllm-bench": (
            "vllm_bench.json",
            "doc",
            [
                (v / "A_baseline" / "bench" / "bench_profiled_8req.json").read_bytes(),
                (s / "vllm_bench" / "vllm-ascend-nightly_llama3-8b_tp1_qps1.summary-subset.json").read_bytes(),
                (v / "D_chunked" / "bench" / "bench_long_30req_in1000_out32_rate0.8.json").read_bytes(),
            ],
            ('"latencies"', '"completed"', '"input_lens"'),
        ),
        "sglang-bench": (
            "sglang_bench.jsonl",
            "lines",
            [p.read_bytes() for p in sorted((s / "sglang_bench_serving").glob("*.jsonl"))],
            ('"completed"', '"duration"', '"total_input_tokens"'),
        ),
        "llmperf": (
            "llmperf.individual.json",
            "array",
            [rows(p, 6) for p in sorted((s / "llmperf").glob("individual__*.json"))],
            ('"ttft_s"', '"end_to_end_latency_s"', '"number_output_tokens"'),
        ),
        "llmperf-summary": (
            "llmperf.summary.json",
            "doc",
            [p.read_bytes() for p in sorted((s / "llmperf").glob("summary__*.json"))],
            ('"results_ttft_s_mean"', '"results_num_completed_requests"', '"mean_input_tokens"'),
        ),
        "aiperf-export": (
            "aiperf.profile_export.jsonl",
            "lines",
            [_lines(p, 5, 10) for p in sorted((s / "aiperf").glob("*.jsonl"))],
            ('"metadata"', '"metrics"', '"value"'),
        ),
        "aiperf-summary": ("aiperf.summary.json", "doc", [agg.read_bytes()], ('"records"', '"avg"', '"unit"')),
        "guidellm-benchmarks": (
            "guidellm.benchmarks.json",
            "doc",
            [(s / "guidellm" / "guidellm-0.3dev_stripped_1req.benchmarks.json").read_bytes()],
            ('"request_latency"', '"output_tokens"', '"benchmarks"'),
        ),
        "inference-perf-lifecycle": (
            "inference_perf.lifecycle.json",
            "doc",
            stages("lifecycle", (0, 3, 1)),
            ('"count"', '"load_summary"', '"successes"'),
        ),
        "inference-perf-prometheus": (
            "inference_perf.prometheus.json",
            "doc",
            stages("prometheus", (0, 4, 2)),
            ('"successes"', '"count"', '"request_latency"'),
        ),
        "inference-perf-requests": (
            "inference_perf.requests.json",
            "array",
            [json.dumps(_inference_perf_requests()).encode()],
            ('"start_time"', '"info"', '"output_tokens"'),
        ),
        "mooncake-trace": (
            "mooncake.jsonl",
            "lines",
            [_lines(s / "mooncake" / "conversation_trace.jsonl", 50, skip) for skip in (0, 300, 600)],
            ('"timestamp"', '"input_length"', '"output_length"'),
        ),
        "prometheus-api": (
            "prometheus_api.json",
            "doc",
            [_prometheus_api_answer()(None)],
            ('"status"', '"data"', '"values"'),
        ),
        "trtllm-iteration-log": (
            "trtllm_iterations.json",
            "array",
            [(s / "trtllm" / "trtllm-serve_metrics_iter154.docs-example.json").read_bytes()],
            ('"iterLatencyMS"', '"kvCacheStats"', '"numActiveRequests"'),
        ),
        "azure-llm-trace": (
            "azure.csv",
            "text",
            [
                _lines(p, 40)
                for p in sorted((s / "azure_llm_2023").glob("*.csv")) + sorted((s / "azure_llm_2024").glob("*.csv"))
            ][:3],
            (),
        ),
        "prometheus": (
            "prometheus.prom",
            "text",
            [(v / r / "metrics_final.prom").read_bytes() for r in ("D_chunked", "E_prefix", "B2_kv2x")],
            (),
        ),
        "vllm-server-log": (
            "vllm_v1.log",
            "text",
            [
                (s / "log_excerpts" / "vllm_v1_loggers_log_lines.txt").read_bytes(),
                (s / "log_excerpts" / "vllm_v0_metrics_log_lines.txt").read_bytes(),
            ],
            (),
        ),
        "sglang-scheduler-log": (
            "sglang.log",
            "text",
            [(s / "log_excerpts" / "sglang_scheduler_log_lines.txt").read_bytes()],
            (),
        ),
        "vllm-bench-client-log": (
            "client_log.log",
            "text",
            [
                (v / r / "bench" / f).read_bytes()
                for r, f in (
                    ("A_baseline", "bench_profiled_8req.client.log"),
                    ("B_kvpressure", "bench_kvpressure_64req.client.log"),
                    ("B2_kv2x", "bench_kvpressure_64req.client.log"),
                )
            ],
            (),
        ),
        "burstgpt-replay-config": (
            "replay_config.json",
            "objects",  # JSON objects back to back, no separator
            [(s / "vllm_engine_stats_scrape" / "liao4s_server_log.json").read_bytes()],
            ('"event_name"', '"server_config"', '"model path"'),
        ),
        "vllm-stats-csv": (
            "vllm_stats.csv",
            "text",
            [_lines(s / "vllm_engine_stats_scrape" / "liao4s_vllm_log_scale100_prompt500.csv", 80)],
            (),
        ),
    }


def _fixture_bases() -> dict[str, tuple[str, str, list[bytes], tuple[str, ...]]]:
    """The formats with no real file in ``sample_traces/``, as ``_bases``: records built field by field from
    each tool's documented schema, as ``tests/test_more_formats.py`` and ``tests/test_workloads.py`` build
    them (BurstGPT's README columns, trtllm-bench's request records, TGI's router log line and response
    headers, GenAI-Perf's profile export, lltrace's own request schema)."""
    burst = ["Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    for i in range(30):
        req, resp = 300 + 17 * i, (0 if i == 11 else 20 + 3 * i)
        model, kind = ("ChatGPT", "Conversation log") if i % 2 else ("GPT-4", "API log")
        burst.append(f"{5 + 3 * i},{100 + i % 7},{1.5 + (i % 5) * 0.25},{model},{req},{resp},{req + resp},{kind}")
    trt = [
        {
            "id": i,
            "num_input_tokens": 128 + 8 * i,
            "error_tokens": 0,
            "start_timestamp": 1_000_000_000 + 100_000_000 * i,
            "first_token_timestamp": 1_050_000_000 + 100_000_000 * i,
            "end_timestamp": 2_000_000_000 + 100_000_000 * i,
            "num_output_tokens": 64 + i,
        }
        for i in range(12)
    ]
    tgi = "".join(
        f"2024-05-01T10:00:{10 + i:02d}.000000Z  INFO generate{{parameters=...}}: text_generation_router::server: "
        f'router/src/server.rs:305: Success total_time="1.{i}9s" validation_time="204.8µs" queue_time="2{i}.1µs" '
        f'inference_time="1.{i}8s" time_per_token="19.9ms" seed="None"\n'
        for i in range(10)
    )
    headers = "".join(
        json.dumps(
            {
                "x-compute-time": f"1.{i}9",
                "x-total-time": str(1210 + 10 * i),
                "x-validation-time": "1",
                "x-queue-time": str(23 + i),
                "x-inference-time": str(1186 + 10 * i),
                "x-time-per-token": "19",
                "x-prompt-tokens": str(550 + i),
                "x-generated-tokens": str(62 + i),
            }
        )
        + "\n"
        for i in range(10)
    )
    s, t0 = 1_000_000_000, 1_700_000_000 * 1_000_000_000

    def chunk(content: str | None = None, usage: dict | None = None) -> dict:
        body = {
            "id": "abc",
            "object": "chat.completion.chunk",
            "choices": [] if usage else [{"index": 0, "delta": {"content": content}}],
        }
        if usage:
            body["usage"] = usage
        return {"response": "data: " + json.dumps(body) + "\n\n"}

    genai = {
        "service_kind": "openai",
        "endpoint": "v1/chat/completions",
        "version": "0.0.8",
        "experiments": [
            {
                "experiment": {"mode": "concurrency", "value": 4},
                "requests": [
                    {
                        "timestamp": t0 + i * s,
                        "request_inputs": {"payload": json.dumps({"messages": [], "model": "m", "stream": True})},
                        "response_timestamps": [t0 + i * s + k * s // 10 for k in (3, 5, 8, 9)],
                        "response_outputs": [
                            chunk("I"),
                            chunk(" like"),
                            chunk(usage={"prompt_tokens": 7 + i, "completion_tokens": 2, "total_tokens": 9 + i}),
                            {"response": "data: [DONE]\n\n"},
                        ],
                    }
                    for i in range(6)
                ],
            }
        ],
    }
    own = "".join(
        json.dumps(
            {
                "request_id": f"r{i}",
                "arrival_time": f"2026-01-02T03:04:{5 + i:02d}.5Z",
                "input_tokens": 100 + 10 * i,
                "output_tokens": 10 + i,
                "ttft_s": 0.05 + 0.01 * i,
                "e2e_s": 1.0 + 0.1 * i,
            }
        )
        + "\n"
        for i in range(20)
    )
    return {
        "aiperf-summary-csv": ("aggregate.csv", "text", [_aiperf_csv().encode()], ()),
        "trtllm-bench-report": (
            "trtllm_report.json",
            "doc",
            [json.dumps(_trtllm_report(trt), indent=4).encode()],
            ('"performance"', '"request_info"', '"num_requests"'),
        ),
        "burstgpt": ("burstgpt.csv", "text", [("\n".join(burst) + "\n").encode()], ()),
        "trtllm-bench-requests": (
            "trtllm_bench.requests.json",
            "array",
            [json.dumps(trt).encode()],
            ('"num_input_tokens"', '"start_timestamp"', '"id"'),
        ),
        "tgi-log": ("tgi.log", "text", [tgi.encode()], ()),
        "tgi-response-headers": (
            "tgi_headers.jsonl",
            "lines",
            [headers.encode()],
            ('"x-total-time"', '"x-prompt-tokens"', '"x-queue-time"'),
        ),
        "genai-perf-export": (
            "genai_perf.profile_export.json",
            "doc",
            [json.dumps(genai).encode()],
            ('"experiments"', '"timestamp"', '"response_timestamps"'),
        ),
        "lltrace-requests": (
            "own_requests.jsonl",
            "lines",
            [own.encode()],
            ('"request_id"', '"input_tokens"', '"arrival_time"'),
        ),
    }


def _aiperf_csv() -> str:
    """AIPerf's profile_export_aiperf.csv of the real 2025-10 aggregate (tests/data/real), as its csv_exporter
    writes it: request metrics under Metric + STAT_KEYS, a blank row, system metrics under Metric,Value."""
    agg = AIPERF_AGG
    records = json.loads(agg.read_text())["records"]
    keys = ["avg", "min", "max", "p1", "p5", "p25", "p50", "p75", "p90", "p95", "p99", "std"]

    def name(m: dict) -> str:
        return m["header"] if m["unit"].lower() in ("count", "requests") else f"{m['header']} ({m['unit']})"

    def num(v: object) -> str:
        return "" if v is None else f"{float(v):.2f}"

    request = {t: m for t, m in records.items() if m.get("p50") is not None}
    lines = ["Metric," + ",".join(keys)]
    lines += [",".join([name(m), *(num(m.get(k)) for k in keys)]) for _, m in sorted(request.items())]
    lines += ["", "Metric,Value"]
    lines += [f"{name(m)},{num(m['avg'])}" for t, m in sorted(records.items()) if t not in request]
    return "\r\n".join(lines) + "\r\n"  # csv.writer's line ends


def _trtllm_report(records: list[dict]) -> dict:
    """``trtllm-bench --report_json`` of the request records (``get_statistics_dict`` @0249976575, streamed):
    PercentileStats in ms, rates per second."""
    n = len(records)

    def pct(values: list[float]) -> dict[str, float]:
        v = sorted(values)
        picks = {f"p{q}": v[int(n * q / 100)] for q in (50, 90, 95, 99)}
        return picks | {"minimum": v[0], "maximum": v[-1], "average": sum(v) / n}

    total = max(r["end_timestamp"] for r in records) - min(r["start_timestamp"] for r in records)
    e2e = [(r["end_timestamp"] - r["start_timestamp"]) / 1e6 for r in records]
    ttft = [(r["first_token_timestamp"] - r["start_timestamp"]) / 1e6 for r in records]
    out = sum(r["num_output_tokens"] for r in records)
    return {
        "engine": {"model": "meta-llama/Llama-3.1-8B", "version": "1.1.0", "backend": "Pytorch"},
        "machine": {"name": "NVIDIA H100 80GB HBM3", "memory.total": 79.19, "clocks.mem": 2.619},
        "world_info": {"tp_size": 1, "pp_size": 1, "max_batch_size": 64, "max_num_tokens": 8192},
        "request_info": {
            "num_requests": n,
            "avg_input_length": sum(r["num_input_tokens"] for r in records) / n,
            "avg_output_length": out / n,
        },
        "performance": {
            "total_latency_ms": total / 1e6,
            "avg_request_latency_ms": sum(e2e) / n,
            "request_throughput_req_s": n / total * 1e9,
            "system_output_throughput_tok_s": out / total * 1e9,
            "request_latency_percentiles_ms": pct(e2e),
        },
        "streaming_metrics": {"avg_ttft_ms": sum(ttft) / n, "ttft_percentiles": pct(ttft)},
    }


# what a file cut short must give: a stream of records (lines, rows, the profiler's event stream) keeps what it
# read with a warning; one JSON document cut anywhere has lost an unknown part: the one-line error with the byte
# the bench client's stdout is read for its options line near the top only: a cut in its second half loses
# nothing that is read (its real files end without a line end: tqdm's last bar)
_CUT = {"vllm-bench-client-log": "ok"}
_CUT_RECOVERS = {
    "pytorch-kineto", "otlp-traces", "sglang-bench", "aiperf-export", "mooncake-trace", *TEXT_FORMATS,
    "burstgpt", "tgi-log", "tgi-response-headers", "lltrace-requests",
}  # fmt: skip


# deep nesting is the one-line error where the reader parses the value; the profiler's reader streams the events
# and keeps them when the document around them is too deep (a warning), and Mooncake's reads its four columns
# by name and never parses another key's value
_DEEP = {"pytorch-kineto": "warning", "mooncake-trace": "ok"}


def _deep(shape: str, data: bytes, variant: int) -> bytes:
    """JSON nested past any tool's output, after the keys that identify the format."""
    nest = ("[" * 20_000 + "]" * 20_000, '{"x": ' * 20_000 + "0" + "}" * 20_000, "[" * 100_000 + "]" * 100_000)[
        variant % 3
    ]
    if shape == "lines":
        lines = data.splitlines(keepends=True)
        i = min(1, len(lines) - 1)
        body = lines[i].rstrip()
        lines[i] = body[:-1] + f', "deep": {nest}}}\n'.encode()
        return b"".join(lines)
    body = data.rstrip()
    if shape == "array":
        return body[:-1] + f", {nest}]".encode()
    return body[:-1] + f', "deep": {nest}}}'.encode()


def _dupkey(data: bytes, key: str) -> bytes:
    """``key`` written twice in one object (the first time with another value)."""
    found = re.search(re.escape(key).encode() + rb"\s*:\s*", data)
    assert found, key
    return data[: found.start()] + key.encode() + b": 0, " + data[found.start() :]


def _bom_variants(shape: str, bases: list[bytes]) -> list[bytes]:
    """The files with a UTF-8 byte-order mark; then the same with Windows line ends (JSON re-indented); then
    JSON written compact as servers write it, or text with a blank line at its end."""
    bom = b"\xef\xbb\xbf"
    is_json = shape in ("doc", "array")
    crlf = [(json.dumps(json.loads(b), indent=1) + "\n").encode() if is_json else b for b in bases]
    other = [
        json.dumps(json.loads(b), separators=(",", ":")).encode() if is_json else b.rstrip(b"\r\n") + b"\n\n"
        for b in bases
    ]
    return (
        [bom + b for b in bases]
        + [bom + b.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n") for b in crlf]
        + [bom + b for b in other]
    )


def _cuts(shape: str, data: bytes) -> list[bytes]:
    """A document cut at a third, at two thirds and 7 bytes before its end; a file of lines cut a third, two
    thirds and 7 bytes into a line of its second half (a line of a record that does not read whole)."""
    if shape in ("doc", "array"):
        ats = [len(data) // 3, 2 * len(data) // 3, len(data.rstrip()) - 7]
    else:
        starts = [0, *(m.end() for m in re.finditer(rb"\n", data.rstrip()))]
        start = starts[max(1, len(starts) * 2 // 3)] if len(starts) > 1 else 0
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        ats = [start + (end - start) // 3, start + 2 * (end - start) // 3, end - 7]
    out = []
    for at in ats:
        while data[at - 1 : at] in (b"\n", b"\r", b","):
            at += 1
        out.append(data[:at])
    return out


def _top_up(case: Callable[[str, bytes, str], None], counts: dict[tuple[str, str], int], kineto: bytes) -> None:
    """The generic kinds (a byte-order mark, a duplicated key, deep nesting, a cut) in every format they apply
    to, made from that format's real files until each has three cases."""
    for fmt, (ending, shape, bases, keys) in (_bases(kineto) | _fixture_bases()).items():
        for kind in ("bom", "dupkey", "deep", "truncation"):
            if fmt not in APPLIES[kind]:
                continue
            have = counts.get((kind, fmt), 0)
            if kind == "bom":
                made = [(d, "ok") for d in _bom_variants(shape, bases)]
            elif kind == "dupkey":
                made = [
                    (_dupkey(next(b for b in bases[k % len(bases) :] + bases if key.encode() in b), key), "error")
                    for k, key in enumerate(keys)
                ]
            elif kind == "deep":
                made = [(_deep(shape, bases[k % len(bases)], k), _DEEP.get(fmt, "error")) for k in range(3)]
            else:
                outcome = _CUT.get(fmt, "warning" if fmt in _CUT_RECOVERS else "error")
                whole = [b for b in bases if shape in ("doc", "array") or b.rstrip().count(b"\n")] or bases
                made = [(d, outcome) for b in whole for d in _cuts(shape, b)]
            for k, (data, outcome) in enumerate(made[: max(0, 3 - have)]):
                case(f"{kind}_{k}_{ending}", data, outcome)


def _specific(case: Callable[[str, bytes, str], None], kineto: bytes) -> None:
    """The kinds that need a format's own fields, made from its real files until every format they apply to has
    three cases: integers beyond int64, impossible request and engine values, summary figures that are not
    numbers, wall clocks no run has, two requests under one id."""
    s = DATA / "serving"
    big = "99999999999999999999999"

    def sub(data: bytes | str, pattern: str, repl: str, count: int = 1) -> bytes:
        text = data.decode() if isinstance(data, bytes) else data
        out, n = re.subn(pattern, repl, text, count=count)
        assert n, pattern
        return out.encode()

    # integers beyond int64: one-line errors naming the line (a line-based trace drops the line, counted)
    otlp = _lines(DATA / "vllm_cpu" / "B_kvpressure" / "otlp" / "traces.otlp.jsonl", 6)  # the 6th: requests
    case(
        "int64_otlp_completion_tokens.otlp.jsonl",
        sub(otlp, r'("gen_ai\.usage\.completion_tokens", ?"value": ?\{"intValue": ?)"?\d+"?', rf'\g<1>"{big}"'),
        "error",
    )
    case(
        "int64_otlp_start.otlp.jsonl",
        sub(otlp, r'("name": ?"llm_request"[^{}]*?"startTimeUnixNano": ?)"\d+"', rf'\g<1>"{big}"'),
        "error",
    )
    bench = (DATA / "vllm_cpu" / "B_kvpressure" / "bench" / "bench_kvpressure_32req_profiled.json").read_text()
    b = json.loads(bench)
    b["input_lens"][4] = int(big)
    case("int64_vllm_bench_input_lens.json", json.dumps(b).encode(), "error")
    b = json.loads(bench)
    b["total_input_tokens"] = int(big)
    case("int64_vllm_bench_total.json", json.dumps(b).encode(), "warning")  # a summary figure: dropped, counted
    for path, key in zip(
        sorted((s / "sglang_bench_serving").glob("*.jsonl")),
        ("total_input_tokens", "total_output_tokens", "completed"),
        strict=True,
    ):
        data = sub(path.read_bytes(), rf'("{key}": ?)\d+', rf"\g<1>{big}")
        case(f"int64_{key}_sglang_bench.jsonl", data, "warning")  # a summary figure: dropped, counted
    for n, (path, key) in enumerate(
        zip(
            sorted((s / "llmperf").glob("individual__*.json"))[:2],
            ("number_output_tokens", "number_input_tokens"),
            strict=True,
        )
    ):
        rows = json.loads(path.read_text())[:6]
        rows[n + 2][key] = int(big)
        case(f"int64_{key}_llmperf.individual.json", json.dumps(rows).encode(), "error")
    new = _lines(s / "aiperf" / "aiperf-2025-11_qwen3-0.6b_c1_rtx6000ada.profile_export.jsonl", 5)
    case(
        "int64_output_length_aiperf.profile_export.jsonl",
        sub(new, r'("output_sequence_length":\{"value":)\d+', rf"\g<1>{big}"),
        "error",
    )
    case("int64_start_ns_aiperf.profile_export.jsonl", sub(new, r'("request_start_ns":)\d+', rf"\g<1>{big}"), "error")
    guidellm = (s / "guidellm" / "guidellm-0.3dev_stripped_1req.benchmarks.json").read_text()
    case(
        "int64_output_tokens_guidellm.benchmarks.json",
        sub(guidellm, r'("output_tokens": ?)\d+', rf"\g<1>{big}"),
        "error",
    )
    request_start = json.loads(guidellm)["benchmarks"][0]["requests"]["successful"][0]["start_time"]
    assert f'"start_time": {request_start}' in guidellm  # the request's start (its scheduler record repeats it)

    def g_start(value: str) -> bytes:
        return guidellm.replace(f'"start_time": {request_start}', f'"start_time": {value}').encode()

    case("int64_start_time_guidellm.benchmarks.json", g_start(big), "error")
    for key in ("output_tokens", "input_tokens"):
        p = _inference_perf_requests()
        if key == "output_tokens":
            p[4]["info"]["response_metrics"]["output_tokens"] = int(big)
        else:
            p[1]["info"]["input_tokens"] = int(big)
        case(f"int64_{key}_inference_perf.requests.json", json.dumps(p).encode(), "error")
    moon = [json.loads(x) for x in _lines(s / "mooncake" / "conversation_trace.jsonl", 50).splitlines()]
    for key, row in (("output_length", 11), ("timestamp", 20)):
        m = json.loads(json.dumps(moon))
        m[row][key] = int(big)
        case(f"int64_{key}_mooncake.jsonl", "".join(json.dumps(x) + "\n" for x in m).encode(), "warning")
    for path, col in (
        (s / "azure_llm_2023" / "AzureLLMInferenceTrace_code.csv", 2),
        (s / "azure_llm_2024" / "notebook_output_excerpt_conv_1week.csv", 1),
    ):
        rows = _lines(path, 40).decode().splitlines()
        cells = rows[5].split(",")
        cells[col] = big
        rows[5] = ",".join(cells)
        case(f"int64_col{col}_{path.stem[:14].lower()}_azure.csv", ("\n".join(rows) + "\n").encode(), "error")
    # an id beyond int64 is kept as an id, with a warning; a duration beyond it is no event: the error
    for key, outcome in (("correlation", "warning"), ("dur", "error")):
        case(f"int64_{key}_kineto.json", sub(kineto, rf'("{key}": ?)\d+', rf"\g<1>{big}"), outcome)

    # summary figures that are not numbers: dropped from the summary, counted
    sg = sorted((s / "sglang_bench_serving").glob("*.jsonl"))
    case(
        "summary_duration_text_sglang_bench.jsonl",
        sub(sg[0].read_bytes(), r'("duration": ?)[\d.]+', r'\g<1>"fast"'),
        "warning",
    )
    case(
        "summary_completed_negative_sglang_bench.jsonl",
        sub(sg[2].read_bytes(), r'("completed": ?)\d+', r"\g<1>-5"),
        "warning",
    )
    for path, key, value in (
        (s / "llmperf" / "summary__bedrock_70b.json", "results_num_completed_requests", '"many"'),
        (s / "llmperf" / "summary__fireworks_70b.json", "results_end_to_end_latency_s_mean", "true"),
    ):
        case(
            f"summary_{key}_llmperf.summary.json",
            sub(path.read_bytes(), rf'("{key}": ?)[^,}}]+', rf"\g<1>{value}"),
            "warning",
        )
    agg = AIPERF_AGG
    for name, value in (("text", '"n/a"'), ("negative", "-12.5"), ("bool", "true")):
        d = json.loads(agg.read_text())
        d["records"]["request_latency"]["avg"] = json.loads(value)
        case(f"summary_latency_{name}_aiperf.summary.json", json.dumps(d).encode(), "warning")
    ip = s / "inference_perf" / "kubecon-na-2025_vllm"
    for kind in ("lifecycle", "prometheus"):
        for name, value in (("text", '"937"'), ("negative", "-3.5"), ("bool", "false")):
            d = json.loads((ip / f"stage_2_{kind}_metrics.json").read_text())
            figures = d["successes"]["latency"] if kind == "lifecycle" else d["successes"]
            figures["request_latency"]["mean"] = json.loads(value)
            case(f"summary_latency_{name}_inference_perf.{kind}.json", json.dumps(d).encode(), "warning")

    # impossible per-request values: ingested with a warning, the values NULL
    p = _inference_perf_requests()
    p[2]["info"]["response_metrics"]["output_token_times"] = [p[2]["start_time"] - 1.0]
    case("request_value_token_before_start_inference_perf.requests.json", json.dumps(p).encode(), "warning")
    for key, value, row in (("input_length", 100.5, 13), ("input_length", -40, 17)):
        m = json.loads(json.dumps(moon))
        m[row][key] = value
        what = "fractional" if isinstance(value, float) else "negative"
        case(f"request_value_{what}_{key}_mooncake.jsonl", "".join(json.dumps(x) + "\n" for x in m).encode(), "warning")
    for path, col, value in (
        (s / "azure_llm_2023" / "AzureLLMInferenceTrace_code.csv", 2, "12.5"),
        (s / "azure_llm_2024" / "notebook_output_excerpt_code_1week.csv", 1, "-100"),
    ):
        rows = _lines(path, 40).decode().splitlines()
        cells = rows[6].split(",")
        cells[col] = value
        rows[6] = ",".join(cells)
        case(f"request_value_col{col}_{path.stem[:14].lower()}_azure.csv", ("\n".join(rows) + "\n").encode(), "warning")

    # impossible engine values: warnings, the values NULL
    answer = _prometheus_api_answer()
    case(
        "kv_250pct_prometheus_api.json",
        answer(
            lambda n, v: [
                [t, "2.5"] if i == 3 and n == "vllm:kv_cache_usage_perc" else [t, x] for i, (t, x) in enumerate(v)
            ]
        ),
        "warning",
    )
    v1 = (s / "log_excerpts" / "vllm_v1_loggers_log_lines.txt").read_bytes()
    case("engine_value_negative_running_vllm_v1.log", sub(v1, r"Running: \d+ reqs", "Running: -3 reqs"), "warning")
    slog = (s / "log_excerpts" / "sglang_scheduler_log_lines.txt").read_bytes()
    case("engine_value_negative_running_sglang.log", sub(slog, r"#running-req: \d+", "#running-req: -2"), "warning")
    case("engine_value_negative_queue_sglang.log", sub(slog, r"#queue-req: \d+", "#queue-req: -1"), "warning")
    csv = _lines(s / "vllm_engine_stats_scrape" / "liao4s_vllm_log_scale100_prompt500.csv", 80).decode().splitlines()
    for col, value, name in ((3, "-1", "negative_running"), (6, "250.0", "kv_250pct"), (5, "inf", "inf_pending")):
        rows = list(csv)
        cells = rows[20].split(",")
        cells[col] = value
        rows[20] = ",".join(cells)
        case(f"engine_value_{name}_vllm_stats.csv", ("\n".join(rows) + "\n").encode(), "warning")

    # wall clocks no run has: one-line errors
    for name, ts in (("2200", 7258118400.0), ("1970", 86400.0), ("negative", -5.0)):
        case(
            f"clock_{name}_prometheus_api.json",
            answer(lambda n, v, ts=ts: [[ts, x] if i == 2 else [t, x] for i, (t, x) in enumerate(v)]),
            "error",
        )
    case(
        "clock_negative_aiperf.profile_export.jsonl",
        sub(new, r'("request_start_ns":)\d+', r"\g<1>-1000000000"),
        "error",
    )
    for name, t in (("1970", "86400.5"), ("negative", "-100.0")):
        case(f"clock_{name}_guidellm.benchmarks.json", g_start(t), "error")

    # two requests under one id: the one-line error, never one request
    lines = [json.loads(x) for x in new.splitlines()]
    lines[3]["metadata"]["x_request_id"] = lines[0]["metadata"]["x_request_id"]
    case(
        "dup_request_id_new_schema_aiperf.profile_export.jsonl",
        "".join(json.dumps(x) + "\n" for x in lines).encode(),
        "error",
    )
    lines = [json.loads(x) for x in new.splitlines()]
    for x in lines[1:4]:
        x["metadata"]["x_request_id"] = "same-id"
    case(
        "dup_request_id_three_aiperf.profile_export.jsonl",
        "".join(json.dumps(x) + "\n" for x in lines).encode(),
        "error",
    )
    g = json.loads(guidellm)
    ok = g["benchmarks"][0]["requests"]["successful"]
    later = {**ok[0], "start_time": ok[0]["start_time"] + 1.0, "end_time": ok[0]["end_time"] + 1.0}
    for name, change in (
        ("copy", lambda r: r["successful"].append(dict(r["successful"][0]))),
        ("later", lambda r: r["successful"].append(later)),
        ("errored", lambda r: r.__setitem__("errored", [*r.get("errored", []), later])),
    ):
        d = json.loads(guidellm)
        change(d["benchmarks"][0]["requests"])
        case(f"dup_request_id_{name}_guidellm.benchmarks.json", json.dumps(d).encode(), "error")


def _fixture_specific(case: Callable[[str, bytes, str], None]) -> None:
    """The format-specific kinds in the formats read only from fixtures (``_fixture_bases``): integers beyond
    int64 and wall clocks no run has (one-line errors), impossible request values (warnings, NULL), two
    requests under one id (the error)."""
    fx = {fmt: bases[0] for fmt, (_, _, bases, _) in _fixture_bases().items()}
    big = "99999999999999999999999"

    def csv_cell(data: bytes, row: int, col: int, value: str) -> bytes:
        lines = data.decode().splitlines()
        cells = lines[row].split(",")
        cells[col] = value
        lines[row] = ",".join(cells)
        return ("\n".join(lines) + "\n").encode()

    def records(data: bytes) -> list[dict]:
        return [json.loads(x) for x in data.decode().splitlines() if x.strip()]

    def lines_of(objs: list[dict]) -> bytes:
        return "".join(json.dumps(o) + "\n" for o in objs).encode()

    # BurstGPT (columns: Timestamp, Session ID, Elapsed time, Model, Request tokens, Response tokens, ...)
    burst = fx["burstgpt"]
    for k, (row, col) in enumerate(((3, 4), (8, 5), (15, 4))):
        case(f"int64_{k}_burstgpt.csv", csv_cell(burst, row, col, big), "error")
    for name, (row, col, value) in {
        "negative_tokens": (4, 4, "-12"),
        "fractional_tokens": (9, 5, "12.5"),
        "negative_e2e": (6, 2, "-1.5"),
    }.items():
        case(f"request_value_{name}_burstgpt.csv", csv_cell(burst, row, col, value), "warning")
    # trtllm-bench request records (ns stamps from the benchmark's own clock)
    trt = json.loads(fx["trtllm-bench-requests"])

    def trt_with(i: int, **change: object) -> bytes:
        rows = json.loads(json.dumps(trt))
        rows[i].update(change)
        return json.dumps(rows).encode()

    for k, key in enumerate(("num_input_tokens", "num_output_tokens", "start_timestamp")):
        case(f"int64_{key}_trtllm_bench.requests.json", trt_with(k + 2, **{key: int(big)}), "error")
    case(
        "request_value_end_before_start_trtllm_bench.requests.json",
        trt_with(3, end_timestamp=trt[3]["start_timestamp"] - 1_000_000),
        "warning",
    )
    case(
        "request_value_first_token_after_end_trtllm_bench.requests.json",
        trt_with(4, first_token_timestamp=trt[4]["end_timestamp"] + 5_000_000),
        "warning",
    )
    case("request_value_fractional_tokens_trtllm_bench.requests.json", trt_with(5, num_output_tokens=64.5), "warning")
    for name, change in (
        ("copy", lambda rows: rows.append(dict(rows[2]))),
        ("later", lambda rows: rows.append({**rows[2], "start_timestamp": rows[2]["start_timestamp"] + 7})),
        ("renumbered", lambda rows: rows[5].update(id=rows[4]["id"])),
    ):
        rows = json.loads(json.dumps(trt))
        change(rows)
        case(f"dup_request_id_{name}_trtllm_bench.requests.json", json.dumps(rows).encode(), "error")
    # TGI router log: request values and wall clocks
    tgi = fx["tgi-log"].decode()
    lines = tgi.splitlines(keepends=True)

    def tgi_line(i: int, old: str, new: str) -> bytes:
        assert old in lines[i], old
        return "".join(lines[:i] + [lines[i].replace(old, new, 1)] + lines[i + 1 :]).encode()

    case("request_value_queue_over_total_tgi.log", tgi_line(2, 'queue_time="22.1µs"', 'queue_time="9.5s"'), "warning")
    case(
        "request_value_queue_over_total_ms_tgi.log",
        tgi_line(3, 'queue_time="23.1µs"', 'queue_time="2500.0ms"'),
        "warning",
    )
    case(
        "request_value_queue_just_over_total_tgi.log",
        tgi_line(4, 'queue_time="24.1µs"', 'queue_time="1.5s"'),
        "warning",
    )
    for year in ("2200", "1970", "2014"):
        case(f"clock_{year}_tgi.log", tgi_line(5, "2024-05-01T", f"{year}-05-01T"), "error")
    # TGI response headers (integer ms as text)
    hdr = records(fx["tgi-response-headers"])

    def hdr_with(i: int, **change: str) -> bytes:
        rows = json.loads(json.dumps(hdr))
        rows[i].update({k.replace("_", "-"): v for k, v in change.items()})
        return lines_of(rows)

    for k, key in enumerate(("x_prompt_tokens", "x_generated_tokens", "x_total_time")):
        case(f"int64_{k}_tgi_headers.jsonl", hdr_with(k + 1, **{key: big}), "error")
    case("request_value_negative_tokens_tgi_headers.jsonl", hdr_with(2, x_prompt_tokens="-5"), "warning")
    case("request_value_fractional_tokens_tgi_headers.jsonl", hdr_with(3, x_generated_tokens="6.5"), "warning")
    case("request_value_queue_over_total_tgi_headers.jsonl", hdr_with(4, x_queue_time="99999"), "warning")
    # GenAI-Perf profile export (ns epoch stamps; OpenAI usage inside the response text)
    genai = json.loads(fx["genai-perf-export"])

    def genai_with(change: Callable[[list[dict]], None]) -> bytes:
        doc = json.loads(json.dumps(genai))
        change(doc["experiments"][0]["requests"])
        return json.dumps(doc).encode()

    def usage(r: dict, key: str, value: object) -> None:
        out = r["response_outputs"][2]
        body = json.loads(out["response"][len("data: ") :])
        body["usage"][key] = value
        out["response"] = "data: " + json.dumps(body) + "\n\n"

    case(
        "int64_timestamp_genai_perf.profile_export.json",
        genai_with(lambda rs: rs[1].update(timestamp=int(big))),
        "error",
    )
    case(
        "int64_prompt_tokens_genai_perf.profile_export.json",
        genai_with(lambda rs: usage(rs[2], "prompt_tokens", int(big))),
        "error",
    )
    case(
        "int64_response_timestamp_genai_perf.profile_export.json",
        genai_with(lambda rs: rs[3]["response_timestamps"].__setitem__(0, int(big))),
        "error",
    )
    case(
        "request_value_response_before_request_genai_perf.profile_export.json",
        genai_with(lambda rs: rs[1].update(response_timestamps=[rs[1]["timestamp"] - 5_000_000 + k for k in range(4)])),
        "warning",
    )
    case(
        "request_value_fractional_tokens_genai_perf.profile_export.json",
        genai_with(lambda rs: usage(rs[2], "completion_tokens", 2.5)),
        "warning",
    )
    case(
        "request_value_negative_tokens_genai_perf.profile_export.json",
        genai_with(lambda rs: usage(rs[4], "prompt_tokens", -7)),
        "warning",
    )
    for name, ns in (("2200", 7_258_118_400 * 10**9), ("1970", 86_400 * 10**9), ("negative", -(10**9))):

        def dated(rs: list[dict], ns: int = ns) -> None:
            shift = ns - rs[0]["timestamp"]
            for r in rs:
                r["timestamp"] += shift
                r["response_timestamps"] = [t + shift for t in r["response_timestamps"]]

        case(f"clock_{name}_genai_perf.profile_export.json", genai_with(dated), "error")
    # lltrace's own request schema
    own = records(fx["lltrace-requests"])

    def own_with(i: int, **change: object) -> bytes:
        rows = json.loads(json.dumps(own))
        rows[i].update(change)
        return lines_of(rows)

    for k, key in enumerate(("input_tokens", "output_tokens", "input_tokens")):
        case(f"int64_{k}_own_requests.jsonl", own_with(3 + 4 * k, **{key: int(big)}), "error")
    case("request_value_ttft_after_e2e_own_requests.jsonl", own_with(2, ttft_s=9.0), "warning")
    agg_csv = fx["aiperf-summary-csv"].decode()
    for name, (old, new) in {
        "text": ("Request Throughput (requests/sec),", "Request Throughput (requests/sec),fast"),
        "negative": ("Benchmark Duration (sec),", "Benchmark Duration (sec),-"),
        "nan": ("Output Token Throughput (tokens/sec),", "Output Token Throughput (tokens/sec),nan"),
    }.items():
        head, _, rest = agg_csv.partition(old)
        value, _, tail = rest.partition("\r\n")
        damaged = head + new + ("" if name != "negative" else value) + "\r\n" + tail
        case(f"summary_{name}_aggregate.csv", damaged.encode(), "warning")
    report = json.loads(fx["trtllm-bench-report"])
    for name, (section, key, value) in {
        "throughput_text": ("performance", "request_throughput_req_s", "fast"),
        "count_true": ("request_info", "num_requests", True),
        "latency_negative": ("performance", "avg_request_latency_ms", -12.5),
    }.items():
        damaged = json.loads(json.dumps(report))
        damaged[section][key] = value
        case(f"summary_{name}_trtllm_report.json", json.dumps(damaged, indent=4).encode(), "warning")
    case("request_value_negative_tokens_own_requests.jsonl", own_with(5, input_tokens=-10), "warning")
    case("request_value_fractional_tokens_own_requests.jsonl", own_with(7, output_tokens=10.5), "warning")
    for year in ("2200", "1970", "2014"):
        case(f"clock_{year}_own_requests.jsonl", own_with(4, arrival_time=f"{year}-01-02T03:04:09.5Z"), "error")
    for name, (i, j) in {"first_two": (0, 1), "far_apart": (2, 17), "last_two": (18, 19)}.items():
        rows = json.loads(json.dumps(own))
        rows[j]["request_id"] = rows[i]["request_id"]
        case(f"dup_request_id_{name}_own_requests.jsonl", lines_of(rows), "error")


if __name__ == "__main__":
    print(f"{len(build())} cases written to {HERE}")

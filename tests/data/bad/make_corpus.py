"""Build the bad-input corpus of this folder from real traces (deterministic: run it again, get the same files).

    python tests/data/bad/make_corpus.py

Sources: the SGLang MI300X profiler trace in sample_traces/ (real events), the vLLM V1 and SGLang log
excerpts, the Azure 2023 conversation trace, the Mooncake trace and run A's OTLP spans in ../shared/data.
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
DATA = REPO.parent / "shared" / "data"
TRACE = REPO / "sample_traces" / "sglang_mi300x_qwen3-8b_decode_step.AMD.json.gz"


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
    glued = "".join(ln.rstrip("\n") if i % 3 == 1 else ln for i, ln in enumerate(lines))
    case("vllm_glued_lines.log", glued.encode(), "ok")
    slog = (DATA / "serving" / "log_excerpts" / "sglang_scheduler_log_lines.txt").read_text()
    slines = slog.splitlines(keepends=True)
    sglued = "".join(ln.rstrip("\n") if i % 4 == 2 else ln for i, ln in enumerate(slines))
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

    for name, data in out.items():
        (HERE / name).write_bytes(data)
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
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
    agg = json.loads(
        (
            REPO
            / "tests"
            / "data"
            / "real"
            / "aiperf"
            / "aiperf-2025-10_gpt-oss-20b_c100_cancel10.profile_export_aiperf.json"
        ).read_text()
    )
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
    per = [
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
    scrapes = sorted((DATA / "vllm_cpu" / "B_kvpressure" / "metrics").glob("metrics_*.prom"))[5:11]  # under load
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


if __name__ == "__main__":
    print(f"{len(build())} cases written to {HERE}")

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
    case("fuzz_sglang_impossible_date.log", slog.replace(stamp, stamp[:5] + "13-45" + stamp[10:], 1).encode(), "ok")

    for name, data in out.items():
        (HERE / name).write_bytes(data)
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    return expected


if __name__ == "__main__":
    print(f"{len(build())} cases written to {HERE}")

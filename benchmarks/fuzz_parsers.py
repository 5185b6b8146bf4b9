"""Fuzz every parser with mutated real inputs for a set time; report crashes (anything but a named error).

Each seed is a real file of one format (from sample_traces/, tests/data/bad/ and ../shared/data). Hypothesis
mutates it (truncate, flip bits, delete, insert, duplicate spans), ``lltrace.ingest`` reads it into a
throw-away store, and the outcome is sorted: ingested, rejected with a named ``LltraceError`` (the one-line
error the CLI prints), "unexpected content" (``UnexpectedContent``: still one line, but from the safety
net around the parsers rather than a check of their own: worth a precise error), or a crash (any other
exception: a bug). Hypothesis shrinks a crash to a small input,
which is saved under ``benchmarks/fuzz_findings/`` so it can join the corpus in tests/data/bad/.

    python benchmarks/fuzz_parsers.py                  # 20 s per seed
    python benchmarks/fuzz_parsers.py --seconds 120 --only kineto
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lltrace
from lltrace.errors import UnexpectedContent

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from mutations import mutate  # noqa: E402  (shared with the property test)

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
FINDINGS = REPO / "benchmarks" / "fuzz_findings"

SEEDS = {  # format -> a small real file of it
    "kineto": REPO / "tests" / "data" / "bad" / "out_of_order.json",
    "kineto-gz": REPO / "sample_traces" / "sglang_mi300x_qwen3-8b_decode_step.AMD.json.gz",
    "vllm-log": DATA / "serving" / "log_excerpts" / "vllm_v1_loggers_log_lines.txt",
    "vllm-v0-log": DATA / "serving" / "log_excerpts" / "vllm_v0_metrics_log_lines.txt",
    "sglang-log": DATA / "serving" / "log_excerpts" / "sglang_scheduler_log_lines.txt",
    "otlp": REPO / "tests" / "data" / "bad" / "otlp_truncated.otlp.jsonl",
    "azure": REPO / "tests" / "data" / "bad" / "azure_extra_column.csv",
    "mooncake": REPO / "tests" / "data" / "bad" / "mooncake_truncated.jsonl",
    "llmperf": DATA / "serving" / "llmperf" / "individual__bedrock_70b.json",
    "prometheus": DATA / "vllm_cpu" / "B2_kv2x" / "metrics_final.prom",
}


def _mutations(seed: bytes) -> st.SearchStrategy[bytes]:
    return st.composite(lambda draw: mutate(draw, seed, most=6))()


def _kind(exc: BaseException) -> str:
    """A crash's kind: its type and the last frame in lltrace's code (one finding per kind, not per input)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "lltrace" in f.filename or "/main/" in f.filename]
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
    return f"{type(exc).__name__} at {where}"


def fuzz(name: str, seed_path: Path, seconds: float, found: dict[str, str]) -> Counter:
    """Run one seed for about ``seconds``; returns the outcome counts. Each new kind of crash is saved under
    FINDINGS with the input that showed it and recorded in ``found`` (kind -> message)."""
    outcomes: Counter = Counter()
    seed = seed_path.read_bytes()
    suffix = "".join(seed_path.suffixes[-2:]) if seed_path.suffix == ".gz" else seed_path.suffix
    deadline = time.monotonic() + seconds
    work = Path(tempfile.mkdtemp(prefix="lltrace-fuzz-"))

    @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(data=_mutations(seed))
    def one(data: bytes) -> None:
        path = work / f"input{suffix}"
        path.write_bytes(data)
        store = work / f"store-{outcomes.total()}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                lltrace.ingest([path], store=store)
                outcomes["ingested"] += 1
            except UnexpectedContent:
                outcomes["gave up"] += 1  # one line, but from the safety net, not the parser's own check
            except lltrace.LltraceError:
                outcomes["rejected"] += 1
            except Exception as exc:
                outcomes["crash"] += 1
                kind = f"{name}: {_kind(exc)}"
                if kind not in found:
                    FINDINGS.mkdir(exist_ok=True)
                    out = FINDINGS / f"{name}-{hashlib.sha256(data).hexdigest()[:12]}{suffix}"
                    out.write_bytes(data)
                    found[kind] = f"{str(exc).splitlines()[0][:160] if str(exc) else ''} -> {out.relative_to(REPO)}"
                    print(f"  CRASH {kind}: {found[kind]}")

    while time.monotonic() < deadline:
        one()
    return outcomes


def main() -> None:
    warnings.filterwarnings("ignore", message="Generating overly large repr")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="time per seed")
    ap.add_argument("--only", help="one format of: " + ", ".join(SEEDS))
    args = ap.parse_args()
    total: Counter = Counter()
    found: dict[str, str] = {}
    for name, path in SEEDS.items():
        if args.only and name != args.only:
            continue
        if not path.exists():
            print(f"{name:<12} seed missing: {path}")
            continue
        c = fuzz(name, path, args.seconds, found)
        total += c
        print(
            f"{name:<12} {c.total():>6} inputs: {c['ingested']:>5} ingested, {c['rejected']:>5} rejected, "
            f"{c['gave up']:>4} unexpected content, {c['crash']} crashes"
        )
    print(f"{'all':<12} {total.total():>6} inputs, {total['crash']} crashes of {len(found)} kinds")


if __name__ == "__main__":
    main()

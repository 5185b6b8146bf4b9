"""Fuzz every parser and every step after it with mutated real inputs for a set time; report crashes.

Each seed is a real file of one format (from sample_traces/, tests/data/bad/), or a real
run folder with one of its files mutated (the joins and the log clock then run on damage). Hypothesis
mutates it (truncate, flip bits, delete, insert, duplicate spans), ``lltrace.ingest`` reads it into a
throw-away store, and the outcome is sorted: ingested, rejected with a named ``LltraceError`` (the one-line
error the CLI prints), "unexpected content" (``UnexpectedContent``: still one line, but from the safety
net around the parsers rather than a check of their own: worth a precise error), or a crash (any other
exception: a bug). What ingests then goes through every step a user runs on a run: ``analyze``, ``report``
(HTML, no PNGs), ``replay`` and ``export_perfetto``; a committed run that crashes one is a crash too
("poisoned": nothing that breaks the analysis may be committed). Hypothesis shrinks a crash to a small
input, which is saved under ``benchmarks/fuzz_findings/`` so it can join the corpus in tests/data/bad/.

With ``--readers``, each profiler trace is read twice, by the compiled reader and by DuckDB's
(``LLTRACE_PURE=1``), and any difference in outcome (tables, or the error) counts as a finding too.

    python benchmarks/fuzz_parsers.py                  # 20 s per seed
    python benchmarks/fuzz_parsers.py --seconds 120 --only kineto
    python benchmarks/fuzz_parsers.py --readers --only kineto-gz
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lltrace
from lltrace.errors import UnexpectedContent

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from mutations import mutate  # noqa: E402  (shared with the property test)

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "sample_traces"
FINDINGS = REPO / "benchmarks" / "fuzz_findings"

RUN_A = DATA / "vllm_cpu" / "A_baseline"
SEEDS = {  # format -> a small real file of it
    "kineto": REPO / "tests" / "data" / "bad" / "out_of_order.json",
    "kineto-gz": REPO / "sample_traces" / "torch" / "sglang_mi300x_qwen3-8b_decode_step.AMD.json.gz",
    "vllm-log": DATA / "serving" / "log_excerpts" / "vllm_v1_loggers_log_lines.txt",
    "vllm-v0-log": DATA / "serving" / "log_excerpts" / "vllm_v0_metrics_log_lines.txt",
    "sglang-log": DATA / "serving" / "log_excerpts" / "sglang_scheduler_log_lines.txt",
    "otlp": REPO / "tests" / "data" / "bad" / "otlp_truncated.otlp.jsonl",
    "azure": REPO / "tests" / "data" / "bad" / "azure_extra_column.csv",
    "mooncake": REPO / "tests" / "data" / "bad" / "mooncake_truncated.jsonl",
    "llmperf": DATA / "serving" / "llmperf" / "individual__bedrock_70b.json",
    "prometheus": DATA / "vllm_cpu" / "B2_kv2x" / "metrics_final.prom",
    "vllm-bench": DATA / "vllm_cpu" / "A_baseline" / "bench" / "bench_profiled_8req.json",
    "aiperf": DATA / "serving" / "aiperf" / "aiperf-2025-11_qwen3-0.6b_c1_rtx6000ada.profile_export.jsonl",
    "guidellm": DATA / "serving" / "guidellm" / "guidellm-0.3dev_stripped_1req.benchmarks.json",
    "sglang-bench": DATA / "serving" / "sglang_bench_serving" / "datacrunch-h200__llama_3_3_70b_online_output.jsonl",
    "aiperf-old": DATA / "serving" / "aiperf" / "aiperf-2025-10_gpt-oss-20b_c100_cancel10.profile_export.jsonl",
    "aiperf-summary": REPO / "tests" / "data" / "bad" / "bom_aiperf.summary.json",
    "inference-perf": DATA / "serving" / "inference_perf" / "kubecon-na-2025_vllm" / "stage_3_lifecycle_metrics.json",
    "inference-perf-server": DATA
    / "serving"
    / "inference_perf"
    / "kubecon-na-2025_vllm"
    / "stage_3_prometheus_metrics.json",
    "llmperf-summary": DATA / "serving" / "llmperf" / "summary__lepton_70b.json",
    "flat-spans": REPO / "tests" / "data" / "bad" / "bom_flat_spans.otlp.json",
    "prometheus-api": REPO / "tests" / "data" / "bad" / "ok_prometheus_api.json",
    "trtllm-iterations": DATA / "serving" / "trtllm" / "trtllm-serve_metrics_iter154.docs-example.json",
    "vllm-stats-csv": DATA / "serving" / "vllm_engine_stats_scrape" / "liao4s_vllm_log_scale100_prompt500.csv",
    "replay-config": DATA / "serving" / "vllm_engine_stats_scrape" / "liao4s_server_log.json",
    "client-log": RUN_A / "bench" / "bench_profiled_8req.client.log",
    # the formats with no real file: the corpus' records built from their tools' sources (make_corpus.py)
    **{
        name: REPO / "tests" / "data" / "bad" / f"bom_0_{ending}"
        for name, ending in (
            ("burstgpt", "burstgpt.csv"),
            ("trtllm-bench", "trtllm_bench.requests.json"),
            ("tgi-log", "tgi.log"),
            ("tgi-headers", "tgi_headers.jsonl"),
            ("genai-perf", "genai_perf.profile_export.json"),
            ("own-requests", "own_requests.jsonl"),
        )
    },
}
# a run folder: the file mutated, and the real files it is ingested beside (joins, log clock, checks)
RUN = DATA / "vllm_cpu" / "A_baseline"
FOLDERS = {
    "run-bench": (RUN / "bench" / "bench_profiled_8req.json", [RUN / "server.log", RUN / "otlp" / "traces.otlp.jsonl"]),
    "run-log": (RUN / "server.log", [RUN / "bench" / "bench_profiled_8req.json", RUN / "metrics_final.prom"]),
}


def _mutations(seed: bytes) -> st.SearchStrategy[bytes]:
    return st.composite(lambda draw: mutate(draw, seed, most=6))()


def _kind(exc: BaseException) -> str:
    """A crash's kind: its type and the last frame in lltrace's code (one finding per kind, not per input)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "lltrace" in f.filename or "/main/" in f.filename]
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
    return f"{type(exc).__name__} at {where}"


_PROFILER_TABLES = ("kernels", "ops", "annotations", "flows", "engine_steps")


def _read(path: Path, store: Path, pure: bool) -> str:
    """Ingest with one profiler reader; the outcome as text (the error) or "ok"."""
    os.environ["LLTRACE_PURE"] = "1" if pure else "0"
    try:
        lltrace.ingest([path], store=store)
        return "ok"
    except lltrace.LltraceError as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        os.environ.pop("LLTRACE_PURE", None)


def _readers_differ(path: Path, work: Path) -> str | None:
    """Read one input with both profiler readers; what differs, or None."""
    a, b = work / "pure", work / "compiled"
    outcome = (_read(path, a, True), _read(path, b, False))
    try:
        if outcome[0] != outcome[1]:
            return f"outcomes differ: {outcome[0][:100]!r} vs {outcome[1][:100]!r}"
        if outcome[0] != "ok":
            return None
        con = duckdb.connect()
        for t in _PROFILER_TABLES:
            files = [sorted((d / t).glob("*/*.parquet")) for d in (a, b)]
            if not files[0] and not files[1]:
                continue
            q = [f"SELECT * FROM read_parquet({[str(f) for f in fs]})" for fs in files]
            n = con.execute(f"SELECT count(*) FROM (({q[0]}) EXCEPT ALL ({q[1]}))").fetchone()[0]
            m = con.execute(f"SELECT count(*) FROM (({q[1]}) EXCEPT ALL ({q[0]}))").fetchone()[0]
            if n or m:
                return f"{t}: {n} rows only in DuckDB's reading, {m} only in the compiled reader's"
        return None
    finally:
        shutil.rmtree(a, ignore_errors=True)
        shutil.rmtree(b, ignore_errors=True)


def _record(found: dict[str, str], kind: str, message: str, data: bytes, prefix: str, suffix: str) -> None:
    """Save the first input of each kind of finding under FINDINGS and note it in ``found``."""
    if kind in found:
        return
    FINDINGS.mkdir(exist_ok=True)
    out = FINDINGS / f"{prefix}-{hashlib.sha256(data).hexdigest()[:12]}{suffix}"
    out.write_bytes(data)
    found[kind] = f"{message[:160]} -> {out.relative_to(REPO)}"
    print(f"  {kind}: {found[kind]}")


def _after_ingest(run: lltrace.Run, store: Path, work: Path) -> None:
    """Every step a user runs on a committed run; any exception but a named error propagates."""
    for step in (
        lambda: lltrace.analyze(run.id, store=store),
        lambda: lltrace.report(lltrace.analyze(run.id, store=store), work / "report.html"),
        lambda: lltrace.replay(run.id, store=store),
        lambda: lltrace.export_perfetto(run.id, work / "trace.json", store=store),
    ):
        try:
            step()
        except lltrace.LltraceError:
            pass  # a run the step cannot use (no requests to replay, say) is told in one line


def fuzz(
    name: str,
    seed_path: Path,
    seconds: float,
    found: dict[str, str],
    readers: bool = False,
    beside: list[Path] | None = None,
) -> Counter:
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
        if beside is None:
            path = work / f"input{suffix}"
            target = [path]
        else:  # the mutated file among the run's other real files, ingested as one folder
            folder = work / "run"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            for other in beside:
                shutil.copy(other, folder / other.name)
            path = folder / seed_path.name
            target = [folder]
        path.write_bytes(data)
        if readers and name.startswith("kineto"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    diff = _readers_differ(path, work)
                except Exception as exc:  # a crash in either reader: recorded below by the normal run
                    diff = None
                    outcomes["crash while comparing"] += 1
                    print(f"  crash while comparing: {type(exc).__name__}: {str(exc)[:120]}")
            if diff is not None:
                outcomes["readers differ"] += 1
                _record(found, f"{name}: readers differ ({diff.split(':')[0]})", diff, data, f"{name}-readers", suffix)
        store = work / f"store-{outcomes.total()}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                run = lltrace.ingest(target, store=store)
                outcomes["ingested"] += 1
            except UnexpectedContent:
                outcomes["gave up"] += 1  # one line, but from the safety net, not the parser's own check
            except lltrace.LltraceError:
                outcomes["rejected"] += 1
            except Exception as exc:
                outcomes["crash"] += 1
                message = str(exc).splitlines()[0] if str(exc) else ""
                _record(found, f"{name}: {_kind(exc)}", message, data, name, suffix)
            else:
                try:
                    _after_ingest(run, store, work)
                except Exception as exc:
                    outcomes["poisoned"] += 1
                    message = str(exc).splitlines()[0] if str(exc) else ""
                    _record(found, f"{name}: poisoned run, {_kind(exc)}", message, data, f"{name}-poisoned", suffix)
            shutil.rmtree(store, ignore_errors=True)

    while time.monotonic() < deadline:
        one()
    return outcomes


def main() -> None:
    warnings.filterwarnings("ignore", message="Generating overly large repr")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="time per seed")
    ap.add_argument("--only", help="one seed of: " + ", ".join([*SEEDS, *FOLDERS]))
    ap.add_argument("--readers", action="store_true", help="also compare the two profiler readers")
    args = ap.parse_args()
    total: Counter = Counter()
    found: dict[str, str] = {}
    cases = [(n, p, None) for n, p in SEEDS.items()] + [(n, p, b) for n, (p, b) in FOLDERS.items()]
    for name, path, beside in cases:
        if args.only and name != args.only:
            continue
        if not path.exists():
            print(f"{name:<12} seed missing: {path}")
            continue
        c = fuzz(name, path, args.seconds, found, args.readers, beside)
        total += c
        print(
            f"{name:<12} {c.total():>6} inputs: {c['ingested']:>5} ingested, {c['rejected']:>5} rejected, "
            f"{c['gave up']:>4} unexpected content, {c['crash']} crashes, {c['poisoned']} poisoned runs"
            + (f", readers differ on {c['readers differ']}" if args.readers else "")
        )
    bad = total["crash"] + total["poisoned"]
    print(f"{'all':<12} {total.total():>6} inputs, {bad} crashes or poisoned runs of {len(found)} kinds")


if __name__ == "__main__":
    main()

"""Ingest throughput and peak memory: lltrace vs json.load vs Holistic Trace Analysis, in one run.

Builds large traces from a real one (its events repeated with shifted timestamps and fresh correlation
/ External ids, so linking still works), then measures, each in a fresh child process:

- ``json.load``  the standard library reading the same file (the baseline);
- ``lltrace``    ``lltrace.ingest`` (JSON → Parquet run store, step detection included);
- ``hta``        ``hta.trace_analysis.TraceAnalysis`` loading the same trace (if installed:
                 ``pip install HolisticTraceAnalysis``).

It prints MB/s and peak RSS for each, lltrace's ratios against the baselines, and lltrace's peak RSS at
two file sizes (to show it is bounded by the batch, not the file). These machines are noisy: read
the ratios, not the seconds.

    python benchmarks/ingest.py                       # 300 MB pretty-printed + 100 MB, from the H100 trace
    python benchmarks/ingest.py --size-mb 500 --compact --skip-hta
    python benchmarks/ingest.py --pure --skip-hta    # lltrace without its compiled reader
    python benchmarks/ingest.py --perf --write docs/performance/ingest.md
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _child import compile_bytecode, run_child, run_command  # noqa: E402
from _page import progress, publish  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO / "sample_traces" / "torch" / "hf_transformers_qwen1.5-0.5b_h100_prefill_forward_bs16x559.json.gz"


_DUR = re.compile(r'"dur": ?(-?[0-9.]+(?:[eE][-+]?[0-9]+)?)')


def build_trace(source: Path, out: Path, size_mb: float, compact: bool, noise: bool = False) -> int:
    """Write a trace of at least ``size_mb`` MB by repeating ``source``'s events; returns its size. With
    ``noise``, times as a Python tool writes them after post-processing the trace: each start shifted by a
    float (``json.dump`` then prints 17 significant digits, four or more decimals) and each duration in
    exponent form (``7.460000000000000e+00``)."""
    with gzip.open(source) if source.suffix == ".gz" else open(source, "rb") as f:
        doc = json.load(f)
    events = doc.pop("traceEvents")
    xs = [e for e in events if "ts" in e and e.get("ph") != "M"]
    t0 = min(e["ts"] for e in xs)
    span = max(e["ts"] + e.get("dur", 0) for e in xs) - t0 + 1000.0
    max_corr = max((e.get("args", {}).get("correlation", 0) for e in events), default=0) + 1
    max_ext = max((e.get("args", {}).get("External id", 0) for e in events), default=0) + 1
    max_id = max((e.get("id", 0) for e in events if isinstance(e.get("id"), int)), default=0) + 1
    sep = "," if compact else ",\n  "
    target = size_mb * 1e6
    with open(out, "w") as f:
        head = json.dumps(doc, separators=(",", ":") if compact else None)
        f.write(head[:-1] + ("," if compact else ",\n") + '"traceEvents": [' + ("" if compact else "\n  "))
        first = True
        for e in events:
            if e.get("ph") == "M":
                f.write(("" if first else sep) + json.dumps(e))
                first = False
        k = 0
        while f.tell() < target:
            for e in xs:
                e2 = dict(e)
                e2["ts"] = e["ts"] + k * span + 1 / 3 * 1e-3 if noise else round(e["ts"] + k * span, 3)
                args = e.get("args")
                if args:
                    a2 = dict(args)
                    if "correlation" in a2:
                        a2["correlation"] += k * max_corr
                    if "External id" in a2:
                        a2["External id"] += k * max_ext
                    e2["args"] = a2
                if isinstance(e.get("id"), int):
                    e2["id"] = e["id"] + k * max_id
                text = json.dumps(e2, separators=(",", ":") if compact else None)
                if noise:
                    text = _DUR.sub(lambda m: f'"dur":{float(m.group(1)):.15e}', text)
                f.write(sep + text)
            k += 1
        f.write("\n]}\n" if not compact else "]}")
    return out.stat().st_size


_ODD_EVENT = b'{"ph":"X","cat":"cpu_op","name":"odd","pid":1,"tid":1,"ts":TS,"dur":1,"args":{"Input Dims":["a\\"b"]}}'


def with_one_odd_event(src: Path, out: Path) -> int:
    """``src`` with one event the compiled reader declines (an escape inside a nested value) placed at the middle
    of its event array: the piece around it is read by DuckDB, the others stay on the fast path."""
    size = src.stat().st_size
    with open(src, "rb") as f, open(out, "wb") as o:
        f.seek(size // 2)
        window = f.read(1 << 20)
        at = size // 2 + window.index(b",", window.index(b"}")) + 1  # just after an event's separating comma
        f.seek(0)
        left = at
        while left:
            chunk = f.read(min(left, 64 << 20))
            o.write(chunk)
            left -= len(chunk)
        ts = re.search(rb'"ts": ?([0-9.]+)', window).group(1)  # type: ignore[union-attr]  # a time of the trace's
        o.write(_ODD_EVENT.replace(b"TS", ts) + b",")
        while chunk := f.read(64 << 20):
            o.write(chunk)
    return out.stat().st_size


def gzipped(src: Path, out: Path, base_last: bool = False) -> None:
    """``src`` gzipped (level 6, as PyTorch's ``tensorboard_trace_handler(use_gzip=True)``). With ``base_last``, its
    ``baseTimeNanoseconds`` moved after the events, where Kineto wrote it before it moved it ahead of them (the HTA
    and Hugging Face traces in sample_traces/torch): a reader of the stream knows the base only at its end."""
    with open(src, "rb") as f, gzip.open(out, "wb", compresslevel=6) as o:
        head = f.read(1 << 20)
        events = head.index(b'"traceEvents"')
        found = re.search(rb',?"baseTimeNanoseconds": ?(-?[0-9]+)', head[:events]) if base_last else None
        if base_last and found is None:
            raise SystemExit(f"{src}: no baseTimeNanoseconds before its events to move")
        if found is not None:
            head = head[: found.start()] + head[found.end() :]
        while True:
            chunk = f.read(16 << 20)
            if found is not None and not chunk:  # head ends the document: its closing brace gets the base first
                head = head.rstrip()
                head = head[:-1] + b',"baseTimeNanoseconds":' + found.group(1) + b"}"
            o.write(head)
            if not chunk:
                return
            head = chunk


# (imports, timed work): imports are not timed, for every reader alike.
_CHILD = {
    "json.load": ("import json\n", "with open(PATH) as f:\n    json.load(f)\n"),
    "lltrace": (
        "import tempfile, lltrace\n",
        "with tempfile.TemporaryDirectory() as d:\n    lltrace.ingest([PATH], store=d)\n",
    ),
    "hta": (
        "import os, tempfile, logging\nlogging.disable(logging.WARNING)\n"
        "from hta.trace_analysis import TraceAnalysis\n",
        "with tempfile.TemporaryDirectory() as d:\n"
        "    os.symlink(PATH, os.path.join(d, 'rank0.json'))\n"
        "    TraceAnalysis(trace_dir=d)\n",
    ),
}


def measure(what: str, path: Path) -> dict:
    """Run one reader in a fresh process; returns seconds and the child's peak RSS."""
    imports, work = _CHILD[what]
    return run_child(imports, work, {"PATH": str(path)})


def _against_clean(path: Path, clean_bytes_per_s: float, what: str, note: str) -> None:
    """lltrace's ingest of a variant of the clean file: its MB/s and its throughput over the clean case's."""
    r = measure("lltrace", path)
    if "seconds" in r:
        size = path.stat().st_size
        ratio = (size / r["seconds"]) / clean_bytes_per_s
        print(
            f"- {what} ({size / 1e6:,.0f} MB): {size / 1e6 / r['seconds']:.1f} MB/s, {ratio:.2f}x the clean case's "
            f"throughput ({note})"
        )


def _inflate_seconds(path: Path) -> float:
    """The time zlib takes to decompress the gzip file ``path`` in this process, output thrown away: the floor for
    reading it at all (deflate decompresses on one core)."""
    import zlib

    clock = time.perf_counter()
    inflater = zlib.decompressobj(wbits=31)
    with open(path, "rb") as f:
        while data := f.read(4 << 20):
            while data:
                inflater.decompress(data, 16 << 20)
                data = inflater.unconsumed_tail
    return time.perf_counter() - clock


def _gzip_case(big: Path, gz: Path, clean_bytes_per_s: float, what: str) -> None:
    """The clean file gzipped, as the PyTorch profiler writes a ``.json.gz``: lltrace's ingest of it against the
    plain file's throughput (in decompressed bytes) and against the inflate alone."""
    r = measure("lltrace", gz)
    if "seconds" not in r:
        print(f"- gzip case failed: {r.get('error')}")
        return
    size = big.stat().st_size
    inflate = _inflate_seconds(gz)
    print(
        f"- gzip, {what} ({gz.stat().st_size / 1e6:,.0f} MB, {size / 1e6:,.0f} MB of JSON): {r['seconds']:.2f} s, "
        f"{size / 1e6 / r['seconds']:.1f} MB/s of JSON, {(size / r['seconds']) / clean_bytes_per_s:.2f}x the plain "
        f"file's throughput; the inflate alone {inflate:.2f} s ({r['seconds'] / inflate:.1f}x), peak "
        f"{r['peak_rss'] / 1e6:,.0f} MB"
    )


def _cat_seconds(path: Path) -> float:
    """``cat FILE > /dev/null`` of the page-cached file: the time to read it at all, the fastest of five runs after
    one that fills the cache (the machine is shared: the fastest is the least disturbed, so the ratio against
    it is the strict one)."""
    times = []
    for _ in range(6):
        t = time.perf_counter()
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t)
    return min(times[1:])


def _analyze_gzipped(gz: Path, plain_size: int, store: Path, what: str) -> None:
    """``lltrace analyze FILE.gz`` end to end as a user types it, against the inflate alone, and how
    lltrace read it (as inflated, or decompressed to a file first)."""
    import shutil

    shutil.rmtree(store, ignore_errors=True)
    r = run_command(["analyze", str(gz), "--store", str(store), "--quiet"])
    if "error" in r:
        print(f"- analyze of the gzipped file failed: {r['error']}")
        return
    from lltrace import Store

    st = Store(store)
    how = st.metadata(st.run_ids()[0])["sources"][0].get("gzip")
    inflate = _inflate_seconds(gz)
    print(
        f"- `lltrace analyze` end to end, the same file gzipped, {what} ({gz.stat().st_size / 1e6:,.0f} MB): "
        f"{r['seconds']:.2f} s, peak {r['peak_rss'] / 1e6:,.0f} MB ({r['peak_rss'] / plain_size:.2f}x the JSON); "
        f"the inflate alone {inflate:.2f} s; {r['cpu_seconds']:.1f} CPU-seconds; {how}"
    )
    shutil.rmtree(store, ignore_errors=True)


def _where_the_seconds_go(path: Path, store: Path) -> None:
    """``lltrace analyze FILE`` end to end as a user types it (the interpreter's start, the imports and the report
    on the terminal included), against ``cat`` in the same run, and its ingest's phases from the run's metadata
    (read, parse and write together: the compiled reader does all three as it goes; step detection; assembly;
    checks; the hash still computing when the rest was done)."""
    import shutil

    cat = _cat_seconds(path)
    shutil.rmtree(store, ignore_errors=True)
    r = run_command(["analyze", str(path), "--store", str(store), "--quiet"])
    if "error" in r:
        print(f"- analyze failed: {r['error']}")
        return
    from lltrace import Store

    st = Store(store)
    meta = st.metadata(st.run_ids()[0])
    phases = meta.get("seconds") or {}
    ingest = meta.get("ingest_seconds") or 0.0
    from lltrace.cores import usable_cores

    print(
        f"- `lltrace analyze` end to end ({path.stat().st_size / 1e6:,.0f} MB, {usable_cores()} cores used of "
        f"{os.cpu_count()}): {r['seconds']:.2f} s, peak "
        f"{r['peak_rss'] / 1e6:,.0f} MB ({r['peak_rss'] / path.stat().st_size:.2f}x the file); cat {cat:.2f} s: "
        f"{r['seconds'] / cat:.1f}x cat (target <= 15x)"
    )
    print(
        f"    - CPU: {r['cpu_seconds']:.1f} CPU-seconds in {r['seconds']:.1f} s, "
        f"{r['cpu_seconds'] / r['seconds']:.2f} of {usable_cores()} cores busy on average "
        "(the file's SHA-256 included: its own thread)"
    )
    named = {
        "read": "read, parse, write",
        "steps": "step detection",
        "assemble": "assembly",
        "checks": "checks",
        "hash_wait": "hash (waited for)",
    }
    rest = max(0.0, ingest - sum(phases.values()))
    line = " · ".join(f"{named.get(k, k)} {v:.2f} s" for k, v in phases.items())
    print(
        f"    - ingest {ingest:.2f} s: {line} · commit and the rest {rest:.2f} s; "
        f"analysis {r['seconds'] - ingest:.2f} s"
    )
    src = (meta.get("source_seconds") or [{}])[0]
    split = src.get("reader")
    if split:  # the compiled reader's threads: how each spent its time, summed over them
        threads = " · ".join(f"{k} {split[k]:.2f} s" for k in ("read", "parse", "write", "sort"))
        print(
            f"    - of the reading's {phases.get('read', 0):.2f} s: the compiled reader's threads ({threads}: "
            f"wall time summed over the threads), then the distinct-row count {split.get('duplicates', 0):.2f} s, "
            f"the kernels' links and tables (DuckDB) {src.get('tables', 0):.2f} s; the SHA-256 beside them all, "
            f"on its own low-priority thread: {src.get('sha256', 0):.2f} s"
        )
    shutil.rmtree(store, ignore_errors=True)


# the shared objects a CPU sample can fall in, by what they do for lltrace (first match of the object's name)
_LIBRARIES = (
    ("_kineto_fast", "compiled reader"),
    ("_duckdb", "DuckDB"),
    ("[kernel", "kernel (copies from the page cache, page faults)"),
    ("libcrypto", "SHA-256 (OpenSSL)"),
    ("libc.so", "libc (memcpy, malloc)"),
    ("libarrow", "Arrow and Parquet"),
    ("libparquet", "Arrow and Parquet"),
    ("libpython", "Python"),
    ("_multiarray", "NumPy"),
)


def _cpu_by_library(path: Path, store: Path) -> None:
    """Where the CPU-seconds of ``lltrace analyze FILE`` go, by library: ``perf``'s CPU-clock samples of a second
    run (the timed one runs without a profiler), each placed by the shared object it fell in."""
    import shutil

    if shutil.which("perf") is None:
        print("    - (no perf here: no CPU split by library)")
        return
    shutil.rmtree(store, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        record = ["perf", "record", "-q", "-e", "cpu-clock", "-F", "999", "-o", str(data), "--"]
        r = run_command(["analyze", str(path), "--store", str(store), "--quiet"], prefix=record)
        report = subprocess.run(
            ["perf", "report", "-i", str(data), "--sort", "dso", "--stdio", "-n", "-q"], capture_output=True, text=True
        )
    shutil.rmtree(store, ignore_errors=True)
    samples: dict[str, int] = {}
    for line in report.stdout.splitlines():  # "    26.63%   3003  _kineto_fast.cpython-311-x86_64-linux-gnu.so"
        parts = line.split()
        if len(parts) < 3 or not parts[0].endswith("%") or not parts[1].isdigit():
            continue
        what = next((label for key, label in _LIBRARIES if key in parts[2]), "other")
        samples[what] = samples.get(what, 0) + int(parts[1])
    total = sum(samples.values())
    if "error" in r or not total:
        print(f"    - (perf gave no samples: {r.get('error') or report.stderr.strip()[:120]})")
        return
    split = " · ".join(
        f"{what} {n / total * r['cpu_seconds']:.2f}" for what, n in sorted(samples.items(), key=lambda kv: -kv[1])
    )
    print(
        f"    - CPU-seconds by library (perf, {total:,} samples of a second run, {r['cpu_seconds']:.1f} CPU-s): {split}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="real trace to repeat")
    ap.add_argument("--size-mb", type=float, default=300, help="size of the main file (MB)")
    ap.add_argument("--small-mb", type=float, default=100, help="second size for the memory-growth check")
    ap.add_argument("--compact", action="store_true", help="one-line JSON instead of pretty-printed")
    ap.add_argument("--skip-hta", action="store_true", help="do not run Holistic Trace Analysis")
    ap.add_argument("--workdir", type=Path, default=None, help="where to write the generated traces")
    ap.add_argument("--pure", action="store_true", help="lltrace with DuckDB's JSON reader only (LLTRACE_PURE=1)")
    ap.add_argument("--skip-noise", action="store_true", help="do not run the float-noise case")
    ap.add_argument("--skip-analyze", action="store_true", help="do not run analyze end to end against cat")
    ap.add_argument("--skip-odd", action="store_true", help="do not run the one-declined-event case")
    ap.add_argument("--skip-gzip", action="store_true", help="do not run the gzipped-file case")
    ap.add_argument("--perf", action="store_true", help="split analyze's CPU-seconds by library (needs perf)")
    ap.add_argument("--write", type=Path, help="also write the results as this docs page (docs/performance/ingest.md)")
    args = ap.parse_args()
    style = "compact" if args.compact else "pretty-printed"
    about = f"""
`benchmarks/ingest.py` builds large traces from a real one (the H100 trace's events unless `--source` says otherwise,
repeated with shifted timestamps and fresh correlation and External ids, so linking still works): here
{args.size_mb:,.0f} MB and {args.small_mb:,.0f} MB, {style}. Each is read in a fresh process by `json.load` (the
baseline), by `lltrace.ingest` (JSON to the Parquet run store, step detection included) and, where it is installed,
by Holistic Trace Analysis. Then lltrace alone on variants of the same events (float-noise times, one event the
compiled reader declines, the file gzipped with its clock base first and last), and `lltrace analyze` end to end as a
user types it, against `cat` of the same file.
"""
    publish(lambda: tables(args), args.write, title="Profiler traces", about=about)


def tables(args: argparse.Namespace) -> None:
    """Print the table and the cases (Markdown)."""
    if args.pure:
        os.environ["LLTRACE_PURE"] = "1"  # the children inherit it
    from lltrace.parsers import kineto_fast

    compile_bytecode()  # the commands measured start as they do after pip install
    reader = "compiled reader" if kineto_fast.available() else "DuckDB's JSON reader (compiled one off or not built)"

    work = Path(args.workdir or tempfile.mkdtemp(prefix="lltrace-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    style = "compact" if args.compact else "pretty"
    big = work / f"bench-{int(args.size_mb)}mb-{style}.json"
    small = work / f"bench-{int(args.small_mb)}mb-{style}.json"
    progress(f"work dir {work}")
    try:
        _cases(args, work, big, small, style, reader)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


def _cases(args: argparse.Namespace, work: Path, big: Path, small: Path, style: str, reader: str) -> None:
    for p, mb in ((big, args.size_mb), (small, args.small_mb)):
        if not p.exists():
            t = time.perf_counter()
            build_trace(args.source, p, mb, args.compact)
            progress(f"built {p.name}: {p.stat().st_size / 1e6:,.0f} MB in {time.perf_counter() - t:.0f} s")

    size = big.stat().st_size
    print(f"Source: `{args.source.name}`, {size / 1e6:,.0f} MB of {style} JSON; lltrace reads with its {reader}.\n")
    readers = ["json.load", "lltrace"] + ([] if args.skip_hta else ["hta"])
    labels = {"json.load": "`json.load` (baseline)", "lltrace": "lltrace ingest", "hta": "HTA `TraceAnalysis`"}
    results = {}
    print("| reader | MB/s | seconds | peak RSS MB | RSS / file |")
    print("|---|---|---|---|---|")
    for what in readers:
        r = measure(what, big)
        results[what] = r
        if "error" in r:
            print(f"| {labels[what]} | failed: {r['error']} | | | |")
            continue
        print(
            f"| {labels[what]} | {size / 1e6 / r['seconds']:.1f} | {r['seconds']:.1f} | {r['peak_rss'] / 1e6:,.0f} | "
            f"{r['peak_rss'] / size:.2f} |"
        )
    print()
    ll = results.get("lltrace", {})
    if "seconds" in ll:
        for base in ("json.load", "hta"):
            b = results.get(base, {})
            if "seconds" in b:
                print(
                    f"- lltrace throughput = {b['seconds'] / ll['seconds']:.1f}x {base}  (target >= 7x json.load)"
                    if base == "json.load"
                    else f"- lltrace throughput = {b['seconds'] / ll['seconds']:.1f}x {base}"
                )
        print(f"- lltrace peak RSS = {ll['peak_rss'] / size:.2f}x the file size (target <= 1.0x)")
        s = measure("lltrace", small)
        if "seconds" in s:
            print(
                f"- lltrace peak RSS at {small.stat().st_size / 1e6:,.0f} MB: {s['peak_rss'] / 1e6:,.0f} MB; "
                f"at {size / 1e6:,.0f} MB: {ll['peak_rss'] / 1e6:,.0f} MB (bounded by the batch, not the file)"
            )
    noisy = work / f"bench-{int(args.size_mb)}mb-{style}-noise.json"
    if not args.skip_noise and "seconds" in ll:
        # the same events with float-noise times and exponent durations: the compiled reader reads them itself
        if not noisy.exists():
            build_trace(args.source, noisy, args.size_mb, args.compact, noise=True)
        _against_clean(noisy, size / ll["seconds"], "float-noise times, exponent durations", "target >= 0.67x")
    odd = work / f"bench-{int(args.size_mb)}mb-{style}-odd.json"
    if not args.skip_odd and "seconds" in ll:
        # one event only the DuckDB reader reads: its piece declined, the others read by the compiled reader
        with_one_odd_event(big, odd)
        why = "its piece read by DuckDB, the rest not"
        _against_clean(odd, size / ll["seconds"], "one event the compiled reader declines, mid-file", why)
        odd.unlink(missing_ok=True)
    # the form the profiler writes in vLLM (.pt.trace.json.gz), its clock base before the events (today's Kineto)
    # and after them (earlier Kineto): read as inflated, the times moved once the end shows the base
    gzips = {
        "base first": work / f"bench-{int(args.size_mb)}mb-{style}.json.gz",
        "base last": work / f"bench-{int(args.size_mb)}mb-{style}-base-last.json.gz",
    }
    if not args.skip_gzip and "seconds" in ll:
        for what, gz in gzips.items():
            if not gz.exists():
                gzipped(big, gz, base_last=what == "base last")
            _gzip_case(big, gz, size / ll["seconds"], what)
    if not args.skip_analyze:
        _where_the_seconds_go(big, work / "analyze-store")
        if args.perf:
            _cpu_by_library(big, work / "analyze-store")
        for what, gz in gzips.items():
            if gz.exists() and not args.skip_gzip:
                _analyze_gzipped(gz, size, work / "analyze-store", what)
    if args.workdir is None:
        for gz in gzips.values():
            gz.unlink(missing_ok=True)
        noisy.unlink(missing_ok=True)
        for p in (big, small):
            p.unlink(missing_ok=True)


if __name__ == "__main__":
    main()

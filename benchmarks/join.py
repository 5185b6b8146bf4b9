"""Joining a client file to the engine's spans at scale: by request id (the baseline) and, with the ids
rewritten as a gateway does, on what both saw (``toolkit/ingest/match.py``).

One run of N requests (default 100,000) is made from the real vLLM CPU run D (its bench records and their
spans, joined by id): Poisson sends at D's own rate, each carrying one of D's pairs drawn at random (the span
moved with its send: its lag, latencies and sizes kept), written as one vLLM bench file (one client, its
``perf_counter`` clock) and one OTLP JSON-lines file. Then, each in a fresh process in
the same run:

- ``id join``        the files as written (span ids ``cmpl-<prefix><i>-0``);
- ``feature join``   the same files with every span id replaced by a random one;
- ``order join``     those, and the bench file without ``start_times`` (as SGLang's bench_serving writes its
                     lists): the records in the order sent, aligned with the spans' arrivals
                     (``toolkit/ingest/order.py``).

Prints seconds, requests/s and peak RSS of each ingest, the ratio, and whether the feature join found the
id join's pairs (the share, and the ties). These machines are noisy: read the ratio.

    python benchmarks/join.py
    python benchmarks/join.py --requests 20000
    python benchmarks/join.py --write docs/performance/join.md
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _child import run_child  # noqa: E402
from _page import progress, publish  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "sample_traces" / "vllm_cpu" / "D_chunked"
PREFIX = "bench-"


def _pairs() -> list[tuple[dict, dict]]:
    """D's (bench record, span) pairs, joined by id: (client values, span JSON)."""
    spans = {}
    for line in (DATA / "otlp" / "traces.otlp.jsonl").read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    if sp["name"] == "llm_request":
                        attrs = {a["key"]: a["value"] for a in sp["attributes"]}
                        spans[attrs["gen_ai.request.id"]["stringValue"]] = sp
    out = []
    files = (
        ("bench_long_30req_in1000_out32_rate0.8.json", "long-"),
        ("bench_short_100req_in128_out128_rate3.json", "short-"),
    )
    for f, prefix in files:
        d = json.loads((DATA / "bench" / f).read_text())
        for i in range(len(d["input_lens"])):
            rec = {k: d[k][i] for k in ("input_lens", "output_lens", "ttfts", "latencies", "start_times", "itls")}
            out.append((rec, spans[f"cmpl-{prefix}{i}-0"]))
    return out


def _random_id(k: int) -> str:
    """A gateway's id for request k: nothing in common with the client's."""
    return "cmpl-" + hashlib.sha256(str(k).encode()).hexdigest()[:16] + "-x"


def build(folder: Path, n: int, random_ids: bool, seed: int = 0, send_times: bool = True) -> None:
    """One bench file and one OTLP file of ``n`` requests: Poisson sends at D's own rate, each carrying one of
    D's (bench record, span) pairs, the span moved with its send (its lag, latencies and sizes kept)."""
    import random

    rng = random.Random(seed)
    base = _pairs()
    starts = sorted(r["start_times"] for r, _ in base)
    rate = (len(starts) - 1) / (starts[-1] - starts[0])
    bench = {k: [] for k in ("input_lens", "output_lens", "ttfts", "latencies", "start_times", "itls")}
    lines, batch = [], []
    send = starts[0]
    for k in range(n):
        send += rng.expovariate(rate)
        rec, sp = base[rng.randrange(len(base))]
        shift = send - rec["start_times"]
        for key in bench:
            bench[key].append(rec[key] + shift if key == "start_times" else rec[key])
        span = json.loads(json.dumps(sp))
        for key in ("startTimeUnixNano", "endTimeUnixNano"):
            span[key] = str(int(span[key]) + round(shift * 1e9))
        rid = _random_id(k) if random_ids else f"cmpl-{PREFIX}{k}-0"
        for a in span["attributes"]:
            if a["key"] == "gen_ai.request.id":
                a["value"] = {"stringValue": rid}
        span["events"] = []
        batch.append(span)
        if len(batch) == 1000:
            lines.append(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": batch}]}]}))
            batch = []
    if batch:
        lines.append(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": batch}]}]}))
    folder.mkdir(parents=True)
    header = json.loads((DATA / "bench" / "bench_short_100req_in128_out128_rate3.json").read_text())
    header = {k: v for k, v in header.items() if not isinstance(v, list)}  # the summary fields the format has
    bench = header | bench | {"num_prompts": n, "completed": n}
    if not send_times:
        del bench["start_times"]
    (folder / "bench.json").write_text(json.dumps(bench))
    (folder / "traces.otlp.jsonl").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--write", type=Path, help="also write the tables as this docs page (docs/performance/join.md)")
    args = ap.parse_args()
    about = f"""
`benchmarks/join.py` makes one run of {args.requests:,} requests from the real vLLM CPU run D (Poisson sends at D's
rate, each carrying one of D's bench-record and span pairs), one vLLM bench file and one OTLP file, and ingests it
three ways, each in a fresh process: with the span ids as vLLM writes them (the join by request id: the baseline),
with every span id replaced by a random one, as a gateway does (the join on what both saw), and with the bench's
`start_times` removed as well (the join in the order sent, as for a client that keeps no send times).
"""
    publish(lambda: tables(args.requests), args.write, title="Joining client and engine records", about=about)


def tables(requests: int) -> None:
    """Print the tables (Markdown)."""
    root = Path(tempfile.mkdtemp(prefix="lltrace-join-"))
    try:
        _tables(root, requests)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _tables(root: Path, requests: int) -> None:
    t = time.perf_counter()
    for name, random_ids, send_times in (("ids", False, True), ("random", True, True), ("unsent", True, False)):
        build(root / name, requests, random_ids, send_times=send_times)
    progress(f"built {requests:,} requests from D's pairs, three times, in {time.perf_counter() - t:.0f} s")
    res = {}
    for label, name in (("id join", "ids"), ("feature join", "random"), ("order join", "unsent")):
        work = (
            f"run = lltrace.ingest([{str(root / name)!r}], store={str(root / (name + '-store'))!r})\n"
            "clients = run.metadata['join']['clients']\n"
            "print(json.dumps({'clients': clients}), file=__import__('sys').stderr)\n"
        )
        res[label] = run_child("import lltrace\n", work, {})
    labels = {
        "id join": "by request id (baseline)",
        "feature join": "on what both saw",
        "order join": "in the order sent",
    }
    print("| join | seconds | requests/s | peak RSS MB |")
    print("|---|---|---|---|")
    for label, r in res.items():
        if "error" in r:
            print(f"| {labels[label]} | failed: {r['error']} | | |")
            continue
        print(f"| {labels[label]} | {r['seconds']:.1f} | {requests / r['seconds']:,.0f} | {r['peak_rss'] / 1e6:,.0f} |")
    if all("seconds" in r for r in res.values()):
        print()
        for label in ("feature join", "order join"):
            ratio = res[label]["seconds"] / res["id join"]["seconds"]
            print(f"- the join {labels[label]} takes {ratio:.2f}x the time of the join by request id")
    import lltrace

    runs = {name: lltrace.Store(root / f"{name}-store") for name in ("ids", "random", "unsent")}
    pairs = {}
    for name, store in runs.items():
        if not store.run_ids():
            continue
        (run_id,) = store.run_ids()
        rows = store.run(run_id).sql("SELECT client_index, request_id FROM requests WHERE matched_by IS NOT NULL")
        pairs[name] = dict(rows.rows())
    if "ids" not in pairs:
        return
    back = {_random_id(k): f"cmpl-{PREFIX}{k}-0" for k in range(requests)}
    print("\n| join | joined | the id join's pairs | tied | unmatched |")
    print("|---|---|---|---|---|")
    for label, name in (("feature join", "random"), ("order join", "unsent")):
        if name not in pairs:
            continue
        same = sum(back.get(rid) == pairs["ids"].get(i) for i, rid in pairs[name].items())
        (c,) = runs[name].metadata(runs[name].run_ids()[0])["join"]["clients"]
        print(
            f"| {labels[label]} | {c['matched']:,} of {c['requests']:,} | {same / requests:.2%} | {c['ties']:,} | "
            f"{c['unmatched']:,} |"
        )


if __name__ == "__main__":
    main()

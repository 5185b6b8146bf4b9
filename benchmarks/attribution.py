"""Attribution at scale: one run of ~1 million requests, store → views → analysis document.

The run is made from the real vLLM CPU runs A, B and B2 (ingested first): their requests and engine
samples are repeated with shifted clocks until there are N requests, and written as one run of the store.
Then, each in a fresh process in the same run:

- ``lltrace``       ``lltrace.analyze(run)`` (DuckDB views over the Parquet store → the JSON document);
- ``pandas naive``  the same attribution written the way a notebook would: read the Parquet into pandas,
                    compute each request's components in a row-wise ``apply``, its KV wait by looking up the
                    samples around its queue interval (no KV room: usage near full, or preempted before the
                    next sample: the rule of ``engine_state`` on a timeline of samples), then sum.

Prints seconds, requests/s, peak RSS and the ratio. Targets: lltrace under 60 s for 1 M requests and at
least 5x the naive pandas version.

    python benchmarks/attribution.py                # 1,000,000 requests
    python benchmarks/attribution.py --requests 200000
    python benchmarks/attribution.py --write docs/performance/attribution.md
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pyarrow as pa
import pyarrow.parquet as pq
from _child import run_child  # noqa: E402
from _page import progress, publish  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "sample_traces" / "vllm_cpu"
RUNS = ("A_baseline", "B_kvpressure", "B2_kv2x")


def build(store: Path, n_requests: int) -> str:
    """Write a run of ``n_requests`` resampled from the real runs into ``store``; returns its id."""
    import lltrace
    from lltrace.tables import REQUESTS

    src = Path(tempfile.mkdtemp(prefix="lltrace-attr-src-"))
    reqs, stats = [], []
    for name in RUNS:
        run = lltrace.ingest([DATA / name], store=src, run=name)
        r = pq.read_table(run.store.table_files("requests", [run.id])[0])
        s = pa.concat_tables(
            [pq.read_table(f) for f in run.store.table_files("engine_stats", [run.id])], promote_options="default"
        )
        reqs.append(r)
        stats.append(s.select(["ts_s", "waiting_capacity", "kv_usage", "preemptions_total"]))
    base_r = pa.concat_tables(reqs, promote_options="default")
    base_s = pa.concat_tables(stats, promote_options="default").filter(pa.compute.is_valid(pa.compute.field("ts_s")))
    t_cols = ["arrival_s", "queued_s", "scheduled_s", "first_token_s", "last_token_s", "finished_s"]
    lo = min(pa.compute.min(base_r[c]).as_py() for c in t_cols if base_r[c].null_count < len(base_r))
    hi = max(pa.compute.max(base_r[c]).as_py() for c in t_cols if base_r[c].null_count < len(base_r))
    period = hi - lo + 60.0
    copies = -(-n_requests // base_r.num_rows)
    req_tables, stat_tables = [], []
    for k in range(copies):
        shift = k * period
        cols = {c: base_r[c] for c in REQUESTS.names if c in base_r.column_names}
        for c in t_cols:
            cols[c] = pa.compute.add(base_r[c], shift)
        cols["request_id"] = pa.compute.binary_join_element_wise(base_r["request_id"], pa.scalar(f"#{k}"), "")
        req_tables.append(pa.table(cols))
        stat_tables.append(base_s.set_column(0, "ts_s", pa.compute.add(base_s["ts_s"], shift)))
    requests = pa.concat_tables(req_tables).slice(0, n_requests)
    engine_stats = pa.concat_tables(stat_tables)
    shutil.rmtree(src, ignore_errors=True)  # the tables are in memory
    st = lltrace.Store(store)
    run_id = f"attr-{n_requests}"
    with st.write_run(run_id) as stage:
        for name, table in (("requests", requests), ("engine_stats", engine_stats)):
            (stage / name).mkdir()
            pq.write_table(table, stage / name / "part-00000.parquet", row_group_size=256_000)
        (stage / "run.json").write_text(
            json.dumps(
                {
                    "run_id": run_id,
                    "lltrace_version": lltrace.__version__,
                    "sources": [
                        {"path": f"resampled from {', '.join(RUNS)}", "format": "benchmark", "records": n_requests}
                    ],
                }
            )
        )
    return run_id


_CHILD = {
    "incidents": (
        "import lltrace\nfrom lltrace.analysis.incidents import incidents_section\n",
        "con = lltrace.Store(STORE).connect([RUN])\ntimeline, found = incidents_section(con, 'vllm')\n"
        "assert timeline['windows']\n",
    ),
    "lltrace": (
        "import lltrace\nfrom lltrace.store import Run\n",
        "doc = lltrace.analyze(Run(RUN, lltrace.Store(STORE))).to_dict()\nassert doc['attribution']['requests'] > 0\n",
    ),
    "pandas naive": (
        "import glob, numpy as np, pandas as pd\n",
        "req = pd.read_parquet(glob.glob(STORE + '/requests/run_id=' + RUN + '/*.parquet')[0])\n"
        "st = pd.read_parquet(glob.glob(STORE + '/engine_stats/run_id=' + RUN + '/*.parquet')[0])\n"
        "st = st.dropna(subset=['ts_s']).sort_values('ts_s', kind='stable')\n"
        "ts = st['ts_s'].to_numpy(); usage = st['kv_usage'].to_numpy(); pre = st['preemptions_total'].to_numpy()\n"
        "ends = np.append(ts[1:], ts[-1])\n"
        "# no KV room in a sample's segment: usage near full (the cache's size unknown), or preempted before the next\n"
        "cap = (usage >= 0.95) | (np.append(pre[1:], np.nan) > pre)\n"
        "def attribute(r):\n"
        "    e2e = r['e2e_s'] if pd.notna(r['e2e_s']) else r['server_e2e_s']\n"
        "    q, p, d = r['queue_s'], r['prefill_s'], r['decode_s']\n"
        "    kv = 0.0\n"
        "    if pd.notna(r['queued_s']) and pd.notna(r['scheduled_s']):\n"
        "        i = max(np.searchsorted(ts, r['queued_s'], 'right') - 1, 0)\n"
        "        j = np.searchsorted(ts, r['scheduled_s'], 'left')\n"
        "        for k in range(i, j):\n"
        "            if cap[k]:\n"
        "                kv += max(0.0, min(r['scheduled_s'], ends[k]) - max(r['queued_s'], ts[k]))\n"
        "        kv = min(kv, q)\n"
        "    return pd.Series({'e2e': e2e, 'queue': q, 'prefill': p, 'decode': d,\n"
        "                      'overhead': e2e - (q + p + d), 'kv_wait': kv})\n"
        "ok = req[req['status'] != 'error']\n"
        "parts = ok.apply(attribute, axis=1)\n"
        "totals = parts.sum()\n"
        "shares = {c: totals[c] / totals['e2e'] for c in ('queue', 'prefill', 'decode', 'overhead')}\n",
    ),
}


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def measure(what: str, store: Path, run_id: str) -> dict:
    imports, work = _CHILD[what]
    return run_child(imports, work, {"STORE": str(store), "RUN": run_id})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument(
        "--write", type=Path, help="also write the table as this docs page (docs/performance/attribution.md)"
    )
    args = ap.parse_args()
    about = f"""
`benchmarks/attribution.py` makes one run of {args.requests:,} requests from the real vLLM CPU runs A, B and B2
(their requests and engine samples repeated with shifted clocks) and takes it from the store through the views to the
analysis document, the queue split included (the engine-state step function of the metrics samples against every
request's queue interval). The baseline, in the same run, is a naive pandas version of the same attribution, the way
a notebook would write it: the Parquet read into pandas, each request's parts computed in a row-wise `apply`, its KV
wait found by looking up the samples around its queue interval. Each runs in a fresh process. Targets: lltrace under
60 s for a million requests and at least 5x the pandas version. Beside it, the incident detection alone (the run's
windows of arrival, their levels and the incidents, docs/incidents.md): target under 2 s for a million requests.
"""
    publish(lambda: tables(args.requests), args.write, title="Attribution", about=about)


def tables(requests: int) -> None:
    """Print the table (Markdown)."""
    store = Path(tempfile.mkdtemp(prefix="lltrace-attr-store-"))
    try:
        t = time.perf_counter()
        run_id = build(store, requests)
        progress(
            f"built run {run_id} ({requests:,} requests from {', '.join(RUNS)}) in {time.perf_counter() - t:.0f} s"
        )
        print("| implementation | seconds | requests/s | peak RSS MB |")
        print("|---|---|---|---|")
        res = {}
        for what, label in (
            ("lltrace", "lltrace analyze"),
            ("pandas naive", f"naive pandas {_version('pandas')} (baseline)"),
        ):
            r = measure(what, store, run_id)
            res[what] = r
            if "error" in r:
                print(f"| {label} | failed: {r['error']} | | |")
                continue
            print(f"| {label} | {r['seconds']:.1f} | {requests / r['seconds']:,.0f} | {r['peak_rss'] / 1e6:,.0f} |")
        r = measure("incidents", store, run_id)
        if "error" in r:
            print(f"| incident detection alone (lltrace) | failed: {r['error']} | | |")
        else:
            res["incidents"] = r
            print(
                f"| incident detection alone (lltrace: windows, levels, incidents) | {r['seconds']:.2f} | "
                f"{requests / r['seconds']:,.0f} | {r['peak_rss'] / 1e6:,.0f} |"
            )
        if "incidents" in res:
            print(
                f"\nIncident detection: {res['incidents']['seconds']:.2f} s for {requests:,} requests "
                "(target < 2 s for 1 M requests, beside the attribution)."
            )
        if all(k in res and "seconds" in res[k] for k in ("lltrace", "pandas naive")):
            print(
                f"\nlltrace = {res['pandas naive']['seconds'] / res['lltrace']['seconds']:.1f}x pandas naive "
                f"(target >= 5x); {res['lltrace']['seconds']:.1f} s for {requests:,} requests "
                "(target < 60 s for 1 M requests)."
            )
    finally:
        shutil.rmtree(store, ignore_errors=True)


if __name__ == "__main__":
    main()

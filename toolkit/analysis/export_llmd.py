"""``export llm-d-report``: a run as llm-d's benchmark report (schema 0.2), so lltrace's runs join the comparisons
llm-d's tools make across harnesses.

Every figure is one lltrace prints for the run (the analysis document's ``requests`` and ``workload`` sections,
read from the same views): latencies over the counted requests in seconds, sizes in tokens, the request throughput
over the run window. What lltrace does not know is left out, never filled in: the stack (llm-d's components need
the engine's deployment), an ITL distribution, a stage. The load is described where a client's summary names
the tool and the rate it was asked for; the token source is ``unknown`` (no source says whether prompts were
random or sampled). Schema: ``llm-d/llm-d-benchmark`` ``benchmark_report/br_v0_2_json_schema.json``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lltrace.analysis.client_summary import client_summary
from lltrace.analysis.engine_section import view_row
from lltrace.analysis.incident_explain import utc
from lltrace.analysis.requests_section import requests_section
from lltrace.errors import LltraceError
from lltrace.ingest.targets import Target, as_store, open_run
from lltrace.store import Store
from lltrace.version import __version__

SCHEMA_VERSION = "0.2"

LOAD_TOOLS = {
    "vllm-bench": "vllm-benchmark",
    "guidellm": "guidellm",
    "guidellm-csv": "guidellm",
    "inference-perf": "inference-perf",
    "aiperf": "aiperf",
}
"""lltrace's client format name -> llm-d's ``WorkloadGenerator`` name, where llm-d has one (others keep lltrace's)."""


def _stats(d: dict[str, Any] | None, units: str) -> dict[str, Any] | None:
    """A ``Statistics`` object from lltrace's p50/p90/p99/mean (seconds), or None without a mean."""
    if not d or d.get("mean") is None:
        return None
    out: dict[str, Any] = {"units": units, "mean": d["mean"]}
    out.update({k: d[k] for k in ("p50", "p90", "p99") if d.get(k) is not None})
    return out


def _sizes(w: dict[str, Any], side: str) -> dict[str, Any] | None:
    if w.get(f"{side}_mean") is None:
        return None
    out: dict[str, Any] = {"units": "count", "mean": w[f"{side}_mean"]}
    out.update({p: w[f"{side}_{p}"] for p in ("p50", "p90") if w.get(f"{side}_{p}") is not None})
    return out


def _load(clients: list[dict[str, Any]], w: dict[str, Any]) -> dict[str, Any] | None:
    """``scenario.load`` from the run's one client summary (its tool, asked rate and concurrency); None where the
    run has no client summary or several (a load is one generator's)."""
    if len(clients) != 1 or w.get("input_mean") is None:
        return None
    c = clients[0]
    tool = c["tool"]
    std: dict[str, Any] = {
        "tool": LOAD_TOOLS.get(tool, tool),
        "tool_version": "",  # the schema requires the field; lltrace's sources do not state a client's version
        "source": "unknown",
        "input_seq_len": {"distribution": "other", "value": w["input_mean"]},
    }
    rate = c.get("requested_rate_per_s")
    if isinstance(rate, (int, float)) and rate > 0:
        std["rate_qps"] = rate
    if c.get("max_concurrency") is not None:
        std["concurrency"] = c["max_concurrency"]
    return {"metadata": {"schema_version": "0.0.1"}, "standardized": std, "native": {}}


def llmd_report(run: Target, *, store: Store | str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The run as an llm-d benchmark report (a dict in the schema's shape)."""
    st = as_store(store)
    target = open_run(run, st)
    con = st.connect([target.id])
    try:
        present = st.present([target.id])
        req = requests_section(con) if "requests" in present else None
        w = (view_row(con, "workload_mix") if "requests" in present else None) or {}
        span = (
            con.execute("SELECT min(arrival_s), max(arrival_s + e2e_s) FROM requests_latency WHERE counted").fetchone()
            if "requests" in present
            else (None, None)
        )
    finally:
        con.close()
    if req is None:
        raise LltraceError(f"run {target.id} has no requests: an llm-d report is a run's request performance")
    meta = target.metadata
    outcomes = {e["outcome"]: e["requests"] for e in req["excluded"]}
    requests: dict[str, Any] = {"total": req["count"], "failures": req["errors"]}
    if outcomes.get("incomplete"):
        requests["incomplete"] = outcomes["incomplete"]
    for side in ("input", "output"):
        if (s := _sizes(w, side)) is not None:
            requests[f"{side}_length"] = s
    latency = {
        k: v
        for k, v in (
            ("time_to_first_token", _stats(req["ttft_s"], "s")),
            ("time_per_output_token", _stats(req["tpot_s"], "s/token")),
            ("request_latency", _stats(req["e2e_s"], "s")),
        )
        if v is not None
    }
    aggregate: dict[str, Any] = {"requests": requests}
    if latency:
        aggregate["latency"] = latency
    if w.get("throughput_per_s") is not None:
        aggregate["throughput"] = {"request_rate": {"units": "queries/s", "mean": w["throughput_per_s"]}}
    time: dict[str, Any] = {}
    start, end = span
    if end is not None and utc(start, 0.0) is not None:  # a dated run clock (an undated one counts from its origin)
        time.update(start=utc(start, 0.0), end=utc(end, 0.0))
    if w.get("window_s") is not None:
        time["duration"] = f"PT{w['window_s']:.6f}S"
    sources = meta.get("sources") or []
    report: dict[str, Any] = {
        "version": SCHEMA_VERSION,
        "run": {
            "uid": target.id,
            "description": f"lltrace {__version__} analysis of run {target.id} ({len(sources)} source files)",
            **({"time": time} if time else {}),
        },
    }
    load = _load(client_summary(sources), w)
    if load is not None:
        report["scenario"] = {"load": load}
    report["results"] = {"request_performance": {"aggregate": aggregate}}
    return report


def export_llmd_report(
    run: Target, output: str | os.PathLike[str], *, store: Store | str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """Write the run's llm-d report to ``output``: YAML (as llm-d's converter writes it) unless the name ends in
    ``.json``; returns the report."""
    import json

    import yaml

    report = llmd_report(run, store=store)
    path = Path(output)
    if path.suffix.lower() == ".json":
        text = json.dumps(report, indent=2) + "\n"
    else:
        text = yaml.safe_dump(report, sort_keys=False, allow_unicode=True)
    part = path.with_name(path.name + ".part")  # never a half-written report under the asked name
    part.write_text(text, encoding="utf-8")
    os.replace(part, path)
    return report

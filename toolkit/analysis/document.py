"""``analyze``: the analysis document (``lltrace.documents.AnalysisDocument``) of a run, one builder per section
over the run's query views, then the verdict and the advice drawn from the sections.

A section whose tables the run does not have is null (a list: empty).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import duckdb

from lltrace.analysis.advice import advise, advise_steps, fp8_decode_ratio
from lltrace.analysis.attribution_section import attribution_section
from lltrace.analysis.classify import (
    classify,
    classify_histograms,
    classify_queue,
    classify_steps,
    classify_token_mix,
    has_phases,
)
from lltrace.analysis.client_summary import client_summary
from lltrace.analysis.engine_section import engine_timeline, kv_section, view_row
from lltrace.analysis.incident_replay import replay_incident_advice
from lltrace.analysis.incidents import incidents_section, typical_levels
from lltrace.analysis.incidents_metrics import metrics_incidents
from lltrace.analysis.queue import PARTS
from lltrace.analysis.requests_section import requests_section
from lltrace.analysis.run_section import run_section
from lltrace.analysis.sql import rows
from lltrace.analysis.steps_section import profile_section, steps_section
from lltrace.documents import checked
from lltrace.documents.analysis import AnalysisDocument
from lltrace.documents.vocabulary import QueuePart
from lltrace.ingest.engine import engine_name
from lltrace.ingest.pipeline import ProgressFn
from lltrace.ingest.targets import Target, open_run
from lltrace.physics.catalog import GPU, Model, gpu_of_run, model_or_error
from lltrace.store import Run, Store


@dataclass
class Analysis:
    """The result of ``analyze``: the run and its analysis document (``lltrace.documents.AnalysisDocument``)."""

    run: Run
    document: AnalysisDocument

    def to_dict(self) -> dict[str, Any]:
        """The analysis document as plain JSON values (what ``lltrace analyze --json`` prints)."""
        return self.document.to_builtins()


@dataclass
class _Run:
    """What every section builder reads: the run's views, the tables it has, its metadata, GPU and model."""

    con: duckdb.DuckDBPyConnection
    present: set[str]
    meta: dict[str, Any]
    gpu: GPU | None
    model: Model | None

    def has(self, *tables: str) -> bool:
        """Whether the run has any of these tables."""
        return bool(self.present & set(tables))


def analyze(
    paths_or_run: Target,
    *,
    store: Store | str | os.PathLike[str] | None = None,
    run: str | None = None,
    gpu: str | None = None,
    model: str | None = None,
    keep_python: bool = False,
    strict: bool = False,
    progress: ProgressFn | None = None,
    slo: dict[str, float] | None = None,
    baseline: Target | None = None,
) -> Analysis:
    """The analysis document of one run: a ``Run``, a stored run's id, or the paths of one run (ingested, or
    the stored run reused). Its incidents are windows over the run's own typical level, or over ``slo`` (seconds by
    metric: ``lltrace.analysis.incidents.parse_slo``), or over twice the typical level of the ``baseline`` run."""
    the_run = open_run(paths_or_run, store, run=run, keep_python=keep_python, strict=strict, progress=progress)
    levels = _baseline_levels(baseline, the_run.store, keep_python, strict) if baseline is not None else None
    gpu_obj, gpu_origin = gpu_of_run(the_run.metadata, gpu)
    model_obj: Model | None = model_or_error(model) if model else None
    con = the_run.store.connect([the_run.id])
    try:
        r = _Run(con, the_run.store.present([the_run.id]), the_run.metadata, gpu_obj, model_obj)
        profile = profile_section(con) if r.has("kernels") else None
        a = view_row(con, "attribution_run") if r.has("requests") else None
        timeline, incidents = _incidents(r, slo, levels)
        if timeline is not None and timeline["by"] == "arrival":
            replay_incident_advice(the_run, con, incidents)
        doc: dict[str, Any] = {
            "run": run_section(the_run.id, r.meta, gpu_obj, gpu_origin, model_obj),
            "requests": requests_section(con) if r.has("requests") else None,
            "attribution": attribution_section(con, a, r.has("engine_steps")) if a and a["requests"] else None,
            "classification": None,
            "incidents": incidents,
            "incident_timeline": timeline,
            "steps": steps_section(con, gpu_obj, model_obj, profile) if r.has("engine_steps") else None,
            "profile": profile,
            "kv": kv_section(con) if r.has("engine_stats", "engine_steps") else None,
            "speculative": view_row(con, "engine_speculative") if r.has("engine_stats", "engine_config") else None,
            "workload": view_row(con, "workload_mix") if r.has("requests") else None,
            "client_summary": client_summary(r.meta["sources"]),
            "engine_latency": view_row(con, "engine_latency_histograms") if r.has("engine_stats") else None,
            "replicas": rows(con, "SELECT * EXCLUDE (run_id) FROM engine_replicas ORDER BY engine")
            if r.has("engine_stats")
            else [],
            "engine_quantiles": rows(con, "SELECT * EXCLUDE (run_id) FROM engine_histogram_quantiles ORDER BY metric")
            if r.has("engine_histograms")
            else [],
            "engine_queue_causes": view_row(con, "engine_queue_causes") if r.has("engine_stats") else None,
            "engine_timeline": engine_timeline(con) if r.has("engine_stats") else None,
            "advice": [],
        }
        if doc["kv"] is not None and doc["attribution"] is not None:
            doc["kv"]["kv_wait_s"] = doc["attribution"][QueuePart.KV_WAIT]["total_s"]
        doc["classification"], doc["advice"] = _verdict(r, doc, a)
    finally:
        con.close()
    return Analysis(the_run, checked(doc, "analysis"))


def _incidents(
    r: _Run, slo: dict[str, float] | None, levels: dict[str, float] | None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The run's incident timeline and incidents: from its requests, else from its engine's histograms."""
    timeline, found = (
        incidents_section(r.con, engine_name(r.meta["sources"]), slo, levels) if r.has("requests") else (None, [])
    )
    if timeline is None and r.has("engine_histograms"):
        timeline, found = metrics_incidents(r.con, slo, levels)
    return timeline, found


def _baseline_levels(baseline: Target, store: Store, keep_python: bool, strict: bool) -> dict[str, float]:
    """The baseline run's typical level of each metric (ingested into the same store where given as paths)."""
    base = open_run(baseline, store, keep_python=keep_python, strict=strict)
    con = base.store.connect([base.id])
    try:
        return typical_levels(con)
    finally:
        con.close()


def _verdict(
    r: _Run, doc: dict[str, Any], a: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The classification and the advice, from the best reading the run has: its requests' measured attribution
    (``a``: its ``attribution_run`` row), else the token mix through the latency model, the engine's histograms,
    its steps, or its queue alone."""
    att, causes, engine = doc["attribution"], doc["engine_queue_causes"], engine_name(r.meta["sources"])
    advice: list[dict[str, Any]] = []
    if att is not None and a is not None:
        parts = {p: att[p] for p in (*PARTS, QueuePart.LOAD_WAIT)}
        cls = classify(a, att[QueuePart.KV_WAIT]["total_s"], parts, causes, engine)
        advice = advise(
            a,
            cls["label"],
            parts,
            att["interference"],
            doc["workload"],
            fp8_decode_ratio(r.model, r.gpu, doc["workload"]),
            doc["kv"],
            _prefix_caching(r.con),
            engine,
            doc["speculative"],
        )
    elif r.has("requests") and r.model and r.gpu:
        cls = classify_token_mix(r.con, r.model.name, r.gpu.name)
    elif (doc["engine_latency"] or {}).get("e2e_requests") and classify_histograms(doc["engine_latency"]):
        cls = classify_histograms(doc["engine_latency"], causes)
    elif doc["steps"] and has_phases(doc["steps"]["phase_share"]):
        cls = classify_steps(doc["steps"]["phase_share"], doc["steps"]["detection"], causes)
    else:
        cls = classify_queue(causes)
    return cls, advice + advise_steps(doc["steps"])


def _prefix_caching(con: duckdb.DuckDBPyConnection) -> bool | None:
    """Whether the engine ran with prefix caching, as engine_config resolves it (None: not known)."""
    found = con.execute("SELECT any_value(value) FROM engine_config WHERE setting = 'prefix_caching'").fetchone()
    return None if found is None or found[0] is None else bool(found[0])

"""The ``run`` section of the analysis document: the run, its sources and the files skipped, the checks its values
passed, how its clocks were aligned and its client records joined, and the GPU and model the analysis used."""

from __future__ import annotations

from typing import Any

from lltrace.physics.catalog import GPU, Model


def run_section(
    run_id: str, meta: dict[str, Any], gpu: GPU | None, gpu_origin: str | None, model: Model | None
) -> dict[str, Any]:
    """The section, from the run's metadata and the GPU and model the analysis resolved."""
    return {
        "id": run_id,
        "lltrace_version": meta.get("lltrace_version"),
        "sources": [
            {
                "path": s["path"],
                "format": s["format"],
                "version": s.get("version"),
                "records": s.get("records"),
                "dropped": s.get("dropped"),
                "warnings": s.get("warnings") or [],
                "rank": s.get("rank"),
            }
            for s in meta["sources"]
        ],
        "skipped": meta.get("skipped") or [],
        "checks": meta.get("checks"),
        "clock_alignment": [
            a
            for a in (meta.get("clock") or {}).get("alignment", [])
            if a.get("method", "").startswith("profiler clock") is False
        ],
        "join": _join(meta.get("join")),
        "gpu": {"name": gpu.name, "origin": gpu_origin} if gpu else None,
        "gpu_not_in_catalog": _gpu_not_in_catalog(meta) if gpu is None else None,
        "model": {"name": model.name, "origin": "option --model"} if model else None,
    }


def _join(join: dict[str, Any] | None) -> dict[str, Any] | None:
    """How the client's records were joined to the engine's: per client the method and counts, the feature
    join's residuals and ties, and the engine records no client record took."""
    if not join or not join.get("clients"):
        return None
    keep = (
        "client_id",
        "method",
        "requests",
        "matched",
        "unmatched",
        "unmatched_why",
        "ties",
        "prefix_from",
        "output_token_mismatches",
        "systematic",
        "not_counted",
    )
    features = join.get("features") or {}
    return {
        "clients": [{k: c.get(k) for k in keep if k in c} for c in join["clients"]],
        "unmatched_spans": join.get("unmatched_spans"),
        "features": {k: features[k] for k in ("method", "residuals", "ties", "exact_token_counts") if k in features}
        or None,
    }


def _gpu_not_in_catalog(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The GPU a source names (a trace's ``deviceProperties``) when lltrace's catalog does not know it: said by name,
    so that "unknown" is kept for runs that name none."""
    det = (meta.get("detected") or {}).get("gpu") or {}
    return {"name": det["name"], "origin": det.get("origin")} if det.get("name") else None

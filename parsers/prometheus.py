"""Prometheus ``/metrics`` text scrapes of vLLM and SGLang servers: one file per scrape -> ``engine_stats``.

Metric names across vLLM versions and SGLang's are mapped onto the canonical columns (first present wins);
the scrape time comes from a ``# scrape_unix_ts`` line or the samples' own timestamps, else it is NULL.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import check_wall_clock, strip_bom, write_rows
from lltrace.parsers._lines import read_text
from lltrace.tables import SourceInfo

PROMETHEUS = "prometheus"


def sniff_prometheus(head: bytes) -> bool:
    """Prometheus text exposition with vLLM (or SGLang) metric families."""
    text = strip_bom(head)
    return (
        (text.startswith(b"# ") or text[:5].isalpha())
        and (b"# TYPE " in text or b"# HELP " in text)
        and (b"vllm:" in text or b"sglang:" in text)
    )


# column ← metric names across vLLM versions (first present wins)
_PROM = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs"),
    "swapped": ("vllm:num_requests_swapped",),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
    "preemptions_total": ("vllm:num_preemptions_total", "sglang:num_retracted_reqs_total", "sglang:num_retracted_reqs"),
    "prompt_tokens_total": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total"),
    "generation_tokens_total": ("vllm:generation_tokens_total", "sglang:generation_tokens_total"),
    "prefix_cache_queries_total": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits_total": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "queue_time_sum_s": ("vllm:request_queue_time_seconds_sum", "sglang:queue_time_seconds_sum"),
    "queue_time_count": ("vllm:request_queue_time_seconds_count", "sglang:queue_time_seconds_count"),
    "ttft_sum_s": ("vllm:time_to_first_token_seconds_sum", "sglang:time_to_first_token_seconds_sum"),
    "ttft_count": ("vllm:time_to_first_token_seconds_count", "sglang:time_to_first_token_seconds_count"),
    "e2e_sum_s": ("vllm:e2e_request_latency_seconds_sum", "sglang:e2e_request_latency_seconds_sum"),
    "e2e_count": ("vllm:e2e_request_latency_seconds_count", "sglang:e2e_request_latency_seconds_count"),
    "prefill_time_sum_s": ("vllm:request_prefill_time_seconds_sum",),
    "decode_time_sum_s": ("vllm:request_decode_time_seconds_sum",),
}
_SAMPLE = re.compile(r"^([A-Za-z_:][\w:]*)(?:\{([^}]*)\})?\s+(\S+)(?:\s+(-?\d+))?\s*$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _number(path: str, line: int, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise TraceFormatError(path, f"line {line}", f"not a number: {text[:40]!r}") from None


def ingest_prometheus(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """One scrape → one ``engine_stats`` row per engine; the scrape time comes from a ``# scrape_unix_ts``
    line or the samples' own timestamps, else it stays NULL (a file's mtime is not a scrape time)."""
    info = SourceInfo(path=path, format=PROMETHEUS, version="Prometheus text exposition")
    ts: float | None = None
    per_engine: dict[str, dict[str, float]] = {}
    config: dict[str, Any] = {}
    text = read_text(path)
    lines = text.splitlines()
    if text and not text.endswith("\n") and lines:
        # the exposition format ends every line with a line feed: a last line without one was cut mid-write
        # (a sample value cut short reads as another number: 6.10e-05 as 6.1), so it is dropped
        info.truncated = f"partial line {len(lines)}"
        info.warnings.append(
            f"{path}: truncated: the scrape ends inside line {len(lines)} (no line feed); dropped that line"
        )
        lines = lines[:-1]
    seen: dict[tuple[str, str], int] = {}
    duplicated: set[tuple[str, str]] = set()
    for n, line in enumerate(lines, start=1):
        if line.startswith("# scrape_unix_ts"):
            ts = _number(path, n, line.split()[2] if len(line.split()) > 2 else "")
            check_wall_clock(path, f"line {n}", ts, "the scrape time")
            continue
        if not line.strip() or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            raise TraceFormatError(path, f"line {n}", f"not a Prometheus sample: {line[:80]!r}")
        name, labels, value, sample_ts = m.groups()
        if not name.startswith(("vllm:", "sglang:")):
            continue
        key = (name, ",".join(sorted(f"{k}={v}" for k, v in _LABEL.findall(labels or ""))))
        if key in seen:  # one series twice in one scrape: invalid exposition, and which value holds is unknown
            duplicated.add(key)
            continue
        seen[key] = n
        lab = dict(_LABEL.findall(labels or ""))
        engine = lab.get("engine", "0")
        stats = per_engine.setdefault(engine, {})
        if sample_ts is not None and ts is None:
            ts = int(sample_ts) / 1000
            check_wall_clock(path, f"line {n}", ts, "the sample's timestamp")
        v = _number(path, n, value)
        if name == "vllm:cache_config_info":
            config.update(_cache_config(lab))
            continue
        if name == "vllm:num_requests_waiting_by_reason":
            stats[f"waiting_{lab.get('reason', 'other')}"] = stats.get(f"waiting_{lab.get('reason', 'other')}", 0) + v
            continue
        stats[name] = stats.get(name, 0.0) + v
    for name, labels in duplicated:  # the series' value is NULL for its engine, never a sum of the copies
        lab = dict(kv.split("=", 1) for kv in labels.split(",") if "=" in kv)
        per_engine.get(lab.get("engine", "0"), {}).pop(name, None)
    if duplicated:
        info.dropped["duplicated_series"] = len(duplicated)
        first = sorted(duplicated)[0]
        info.warnings.append(
            f"{path}: line {seen[first]}: {len(duplicated)} series appear more than once in one scrape "
            f"(e.g. {first[0]}{{{first[1]}}}): their values are NULL"
        )
    rows = []
    for engine, stats in sorted(per_engine.items()):
        row: dict[str, Any] = {"part": part, "ts_s": ts, "engine": engine, "source": "prometheus"}
        for col, names in _PROM.items():
            row[col] = next((stats[n] for n in names if n in stats), None)
        row["waiting_capacity"] = stats.get("waiting_capacity")
        row["waiting_deferred"] = stats.get("waiting_deferred")
        rows.append(row)
    if ts is None:
        info.warnings.append(
            f"{path}: no scrape time in the file (# scrape_unix_ts or sample timestamps); ts_s is NULL"
        )
    info.records = write_rows(stage, "engine_stats", part, rows)
    info.details["scrape_unix_ts"] = ts
    if config:
        info.details["engine_config"] = config
        info.details["engine_config_origin"] = dict.fromkeys(config, "Prometheus vllm:cache_config_info")
    return info


_CACHE_INT = {"block_size": "block_size", "num_gpu_blocks": "num_gpu_blocks", "kv_cache_size_tokens": "kv_cache_tokens"}


def _cache_config(labels: dict[str, str]) -> dict[str, Any]:
    """The KV cache's resolved settings from vLLM's ``cache_config_info`` gauge (its labels), where numbers."""
    out: dict[str, Any] = {}
    for label, key in _CACHE_INT.items():
        if labels.get(label, "").isdigit():
            out[key] = int(labels[label])
    if labels.get("enable_prefix_caching") in ("True", "False"):
        out["enable_prefix_caching"] = labels["enable_prefix_caching"] == "True"
    try:
        out["gpu_memory_utilization"] = float(labels["gpu_memory_utilization"])
    except (KeyError, ValueError):
        pass
    return out

"""Prometheus ``/metrics`` text scrapes of vLLM, SGLang and TGI servers: one file per scrape -> ``engine_stats``.

Metric names across vLLM versions, SGLang's and TGI's are mapped onto the canonical columns (first present wins);
the scrape time comes from a ``# scrape_unix_ts`` line or the samples' own timestamps, else it is NULL.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import check_wall_clock, strip_bom, write_rows
from lltrace.parsers._lines import read_text
from lltrace.source_info import SourceInfo

PROMETHEUS = "prometheus"


# the metric families of each engine lltrace reads, by the prefix each engine names its own with (TGI's router:
# tgi_*, router/src/server.rs)
ENGINE_OF_PREFIX = {"vllm:": "vllm", "sglang:": "sglang", "tgi_": "tgi"}
ENGINE_PREFIXES = tuple(ENGINE_OF_PREFIX)
# TGI's families that tell its exposition (gauges of its queue and batch, its request histograms)
_TGI_FAMILIES = (b"tgi_queue_size", b"tgi_batch_current_size", b"tgi_request_")


def sniff_prometheus(head: bytes) -> bool:
    """Prometheus text exposition with vLLM, SGLang or TGI metric families."""
    text = strip_bom(head)
    return (
        (text.startswith(b"# ") or text[:5].isalpha())
        and (b"# TYPE " in text or b"# HELP " in text)
        and (b"vllm:" in text or b"sglang:" in text or any(f in text for f in _TGI_FAMILIES))
    )


PROM_COLUMNS = {
    # TGI: the running batch's size and the queue's (gauges set by its batching loop and queue)
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs", "tgi_batch_current_size"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "tgi_queue_size"),
    "swapped": ("vllm:num_requests_swapped",),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
    # SGLang's sglang:num_retracted_reqs is a gauge of the last logging interval's retractions (the scheduler
    # zeroes it after each log), not a running total: only the counter counts them all
    "preemptions_total": ("vllm:num_preemptions_total", "sglang:num_retracted_requests_total"),
    "prompt_tokens_total": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total"),
    "generation_tokens_total": ("vllm:generation_tokens_total", "sglang:generation_tokens_total"),
    "prefix_cache_queries_total": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits_total": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    # vLLM V1's speculative decoding counters (v1/spec_decode/metrics.py): a draft is one request's proposal in one
    # step; its tokens are checked by the target model in that step, the accepted ones kept
    "spec_drafts_total": ("vllm:spec_decode_num_drafts_total",),
    "spec_draft_tokens_total": ("vllm:spec_decode_num_draft_tokens_total",),
    "spec_accepted_tokens_total": ("vllm:spec_decode_num_accepted_tokens_total",),
    # SGLang's gauge of its last logging interval's accept length (tokens per verify step)
    "spec_accept_length": ("sglang:spec_accept_length",),
    # the API server's responses by status class (vLLM's prometheus-fastapi-instrumentator: http_requests_total
    # {handler, method, status="2xx"}, every handler but its own /metrics, /health and such), summed over handlers
    **{f"http_{k}xx_total": (f"http_requests_total:{k}xx",) for k in "245"},
    "queue_time_sum_s": (
        "vllm:request_queue_time_seconds_sum",
        "sglang:queue_time_seconds_sum",
        "tgi_request_queue_duration_sum",
    ),
    "queue_time_count": (
        "vllm:request_queue_time_seconds_count",
        "sglang:queue_time_seconds_count",
        "tgi_request_queue_duration_count",
    ),
    "ttft_sum_s": ("vllm:time_to_first_token_seconds_sum", "sglang:time_to_first_token_seconds_sum"),
    "ttft_count": ("vllm:time_to_first_token_seconds_count", "sglang:time_to_first_token_seconds_count"),
    # TGI's request duration: its total time, validation to the last token (the x-total-time header's)
    "e2e_sum_s": (
        "vllm:e2e_request_latency_seconds_sum",
        "sglang:e2e_request_latency_seconds_sum",
        "tgi_request_duration_sum",
    ),
    "e2e_count": (
        "vllm:e2e_request_latency_seconds_count",
        "sglang:e2e_request_latency_seconds_count",
        "tgi_request_duration_count",
    ),
    "prefill_time_sum_s": ("vllm:request_prefill_time_seconds_sum",),
    "decode_time_sum_s": ("vllm:request_decode_time_seconds_sum",),
}
"""``engine_stats`` column <- its metric names across vLLM versions and SGLang (the first present wins)."""
_SAMPLE = re.compile(r"^([A-Za-z_:][\w:]*)(?:\{([^}]*)\})?\s+(\S+)(?:\s+(-?\d+))?\s*$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


# histogram family (its _bucket series) -> engine_histograms.metric, across vLLM versions and SGLang
HISTOGRAMS = {
    "vllm:request_queue_time_seconds_bucket": "queue_time",
    "tgi_request_queue_duration_bucket": "queue_time",
    "tgi_request_duration_bucket": "e2e",
    "tgi_request_input_length_bucket": "prompt_tokens",
    "tgi_request_generated_tokens_bucket": "generation_tokens",
    "sglang:queue_time_seconds_bucket": "queue_time",
    "vllm:time_to_first_token_seconds_bucket": "ttft",
    "sglang:time_to_first_token_seconds_bucket": "ttft",
    "vllm:e2e_request_latency_seconds_bucket": "e2e",
    "sglang:e2e_request_latency_seconds_bucket": "e2e",
    "vllm:request_time_per_output_token_seconds_bucket": "tpot",
    "vllm:time_per_output_token_seconds_bucket": "itl",  # V1 before 0.11: observed per output token
    "vllm:inter_token_latency_seconds_bucket": "itl",
    "sglang:inter_token_latency_seconds_bucket": "itl",
    "sglang:time_per_output_token_seconds_bucket": "itl",
    "vllm:request_prefill_time_seconds_bucket": "prefill_time",
    "vllm:request_decode_time_seconds_bucket": "decode_time",
    "vllm:request_prompt_tokens_bucket": "prompt_tokens",
    "vllm:request_generation_tokens_bucket": "generation_tokens",
}


HTTP_REQUESTS = "http_requests_total"
"""The API server's responses counter (prometheus-fastapi-instrumentator, which vLLM's server mounts)."""


def http_class(labels: dict[str, str]) -> str | None:
    """The ``PROM_COLUMNS`` name of an ``http_requests_total`` series by its status: the instrumentator groups
    statuses into classes (``4xx``) by default, a single status (``429``) counts in its class; None for others."""
    status = labels.get("status", "")
    k = status[:1]
    return f"{HTTP_REQUESTS}:{k}xx" if k in ("2", "4", "5") and len(status) == 3 else None


def lab_key(labels: dict[str, str]) -> str:
    """A series' labels as one text, the same for the same label set in any order (``k=v,...``)."""
    return ",".join(sorted(f"{k}={v}" for k, v in labels.items()))


def name_engine(info: SourceInfo, names: Iterable[str]) -> None:
    """Name the serving engine in ``info``'s engine config where the metric families read are one engine's (each
    names its own: ``vllm:*``, ``sglang:*``, ``tgi_*``), with where that came from."""
    engines = {e for n in names for p, e in ENGINE_OF_PREFIX.items() if n.startswith(p)}
    if len(engines) == 1:
        (engine,) = engines
        info.details.setdefault("engine_config", {})["engine"] = engine
        info.details.setdefault("engine_config_origin", {})["engine"] = f"Prometheus {engine} metric families"


def engine_of(labels: dict[str, str]) -> str | None:
    """The engine a series belongs to within one server: vLLM's ``engine`` label (its data-parallel index), or
    SGLang's ``dp_rank`` (each data-parallel scheduler reports its own); None for a copy from another tensor-
    or pipeline-parallel rank of the same scheduler (SGLang reports from rank 0 unless every scheduler is asked
    to, and the others count the same requests again)."""
    if labels.get("tp_rank", "0") != "0" or labels.get("pp_rank", "0") != "0":
        return None
    return labels.get("engine") or labels.get("dp_rank") or "0"


# labels that tell servers apart where one exposition holds several (a gateway's or a federating scrape's); a
# server's own /metrics has one value of each, so they name nothing then
REPLICA_LABELS = ("instance", "pod", "server", "model_name")


def replicas_apart(labelsets: Any) -> tuple[str, ...]:
    """The replica labels (``REPLICA_LABELS``) that take more than one value among a scrape's samples."""
    values: dict[str, set[str]] = {}
    for lab in labelsets:
        for k in REPLICA_LABELS:
            if k in lab:
                values.setdefault(k, set()).add(lab[k])
    return tuple(k for k in REPLICA_LABELS if len(values.get(k, ())) > 1)


def replica_of(labels: dict[str, str], apart: tuple[str, ...]) -> str | None:
    """The replica a sample belongs to (``instance``, as a Prometheus server's answers name it): the values of the
    labels that tell the scrape's servers apart, None where the scrape is of one server."""
    return ",".join(f"{k}={labels.get(k, '')}" for k in apart) if apart else None


def _order(item: tuple[tuple[str | None, str], Any]) -> tuple[str, str]:
    (inst, engine), _ = item
    return (inst or "", engine)


def bucket_key(name: str, labels: dict[str, str]) -> tuple[str, float | None] | None:
    """(metric, upper bound) of a histogram bucket sample, None for any other sample; ``+Inf`` is None."""
    metric = HISTOGRAMS.get(name)
    if metric is None or "le" not in labels:
        return None
    le = float(labels["le"])
    return metric, (None if le == float("inf") else le)


def bucket_rows(part: int, ts: float | None, engine: str, instance: str | None, buckets: dict) -> list[dict]:
    """``engine_histograms`` rows of one engine at one time: (metric, le) -> cumulative count."""
    return [
        {"part": part, "ts_s": ts, "engine": engine, "instance": instance, "metric": m, "le": le, "count": n}
        for (m, le), n in sorted(
            buckets.items(), key=lambda kv: (kv[0][0], float("inf") if kv[0][1] is None else kv[0][1])
        )
    ]


CUMULATIVE = frozenset(c for c in PROM_COLUMNS if c.endswith(("_total", "_sum_s", "_count")))
"""The ``engine_stats`` columns that are Prometheus counters (or histogram sums and counts): only grow, until
the server restarts (a counter reset)."""
CUMULATIVE_METRICS = frozenset(n for c in CUMULATIVE for n in PROM_COLUMNS[c])
"""The metric names behind those columns."""


def stats_row(part: int, ts: float | None, engine: str, stats: dict[str, float]) -> dict[str, Any]:
    """One ``engine_stats`` row from one engine's samples at one time (metric name -> value), the metric
    names of every vLLM version and SGLang mapped onto the canonical columns (first present wins)."""
    row: dict[str, Any] = {"part": part, "ts_s": ts, "engine": engine, "source": "prometheus"}
    for col, names in PROM_COLUMNS.items():
        row[col] = next((stats[n] for n in names if n in stats), None)
    row["waiting_capacity"] = stats.get("waiting_capacity")
    row["waiting_deferred"] = stats.get("waiting_deferred")
    return row


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
    other_ranks = nan = 0
    samples: list[tuple[int, str, dict[str, str], str, str | None]] = []
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
        if not name.startswith(ENGINE_PREFIXES) and name != HTTP_REQUESTS:
            continue
        lab = dict(_LABEL.findall(labels or ""))
        key = (name, lab_key(lab))
        if key in seen:  # one series twice in one scrape: invalid exposition, and which value holds is unknown
            duplicated.add(key)
            continue
        seen[key] = n
        samples.append((n, name, lab, value, sample_ts))
    replica_labels = replicas_apart(
        lab for _, name, lab, _, _ in samples if not name.endswith("_info") and name != HTTP_REQUESTS
    )
    # an API server's response counter that lacks a label telling the page's servers apart is no one server's
    unplaced = {
        (name, lab_key(lab))
        for _, name, lab, _, _ in samples
        if name == HTTP_REQUESTS and not all(r in lab for r in replica_labels)
    }
    if unplaced:
        samples = [x for x in samples if (x[1], lab_key(x[2])) not in unplaced]
        duplicated -= unplaced
        info.dropped["http_series_of_no_server"] = len(unplaced)
    per_engine: dict[tuple[str | None, str], dict[str, float]] = {}
    buckets: dict[tuple[str | None, str], dict[tuple[str, float | None], float]] = {}
    for n, name, lab, value, sample_ts in samples:
        found = engine_of(lab)
        if found is None:
            other_ranks += 1
            continue
        if sample_ts is not None and ts is None:
            ts = int(sample_ts) / 1000
            check_wall_clock(path, f"line {n}", ts, "the sample's timestamp")
        if name == "vllm:cache_config_info":  # an info gauge: the KV cache's settings are its labels
            config.update(cache_config(lab))
            continue
        engine = (replica_of(lab, replica_labels), found)
        stats = per_engine.setdefault(engine, {})
        v = _number(path, n, value)
        if v != v:  # NaN: no reading of that series in this scrape
            nan += 1
            continue
        if name == "vllm:num_requests_waiting_by_reason":
            stats[f"waiting_{lab.get('reason', 'other')}"] = stats.get(f"waiting_{lab.get('reason', 'other')}", 0) + v
            continue
        if name == HTTP_REQUESTS:
            if (status := http_class(lab)) is not None:
                stats[status] = stats.get(status, 0.0) + v
            continue
        bucket = bucket_key(name, lab)
        if bucket is not None:  # series of one replica's engine differing in other labels add up, as gauges do
            per_bucket = buckets.setdefault(engine, {})
            per_bucket[bucket] = per_bucket.get(bucket, 0.0) + v
            continue
        stats[name] = stats.get(name, 0.0) + v
    for name, labels in duplicated:  # the series' value is NULL for its engine, never a sum of the copies
        lab = dict(kv.split("=", 1) for kv in labels.split(",") if "=" in kv)
        engine = (replica_of(lab, replica_labels), engine_of(lab) or "0")
        per_engine.get(engine, {}).pop(name, None)
        bucket = bucket_key(name, lab)
        if bucket is not None:
            buckets.get(engine, {}).pop(bucket, None)
    if duplicated:
        info.dropped["duplicated_series"] = len(duplicated)
        first = sorted(duplicated)[0]
        info.warnings.append(
            f"{path}: line {seen[first]}: {len(duplicated)} series appear more than once in one scrape "
            f"(e.g. {first[0]}{{{first[1]}}}): their values are NULL"
        )
    if other_ranks:
        info.dropped["other_rank_copies"] = other_ranks
        info.warnings.append(f"{path}: {other_ranks} samples from tensor/pipeline ranks other than 0: rank 0's read")
    if nan:
        info.dropped["nan_samples"] = nan
        info.warnings.append(f"{path}: {nan} samples are NaN (no reading): left NULL, not added to the others")
    if replica_labels:
        info.details["replicas_by"] = list(replica_labels)
    if any(name.startswith("vllm:") for _, name, _, _, _ in samples):
        # vLLM's API server always counts its responses (entrypoints/serve/instrumentator), but the instrumentator
        # makes a status class's series at its first response: one not in the page has counted none yet
        for (_, engine), stats in per_engine.items():
            if engine == "0":
                for k in "245":
                    stats.setdefault(f"{HTTP_REQUESTS}:{k}xx", 0.0)
    rows = [
        stats_row(part, ts, engine, stats) | {"instance": inst}
        for (inst, engine), stats in sorted(per_engine.items(), key=_order)
    ]
    if ts is None:
        info.warnings.append(
            f"{path}: no scrape time in the file (# scrape_unix_ts or sample timestamps); ts_s is NULL"
        )
    info.records = write_rows(stage, "engine_stats", part, rows)
    hist = [
        r for (inst, engine), b in sorted(buckets.items(), key=_order) for r in bucket_rows(part, ts, engine, inst, b)
    ]
    if hist:
        write_rows(stage, "engine_histograms", part, hist)
    info.details["scrape_unix_ts"] = ts
    if config:
        info.details["engine_config"] = config
        info.details["engine_config_origin"] = dict.fromkeys(config, "Prometheus vllm:cache_config_info")
    name_engine(info, (name for _, name, _, _, _ in samples))
    return info


_CACHE_INT = {"block_size": "block_size", "num_gpu_blocks": "num_gpu_blocks", "kv_cache_size_tokens": "kv_cache_tokens"}


def cache_config(labels: dict[str, str]) -> dict[str, Any]:
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

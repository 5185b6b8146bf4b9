"""A Prometheus server's answers (Prometheus, Thanos, Mimir, VictoriaMetrics: the HTTP API's JSON) for vLLM's
and SGLang's metric families -> ``engine_stats``, one row per replica and sample time.

``/api/v1/query_range`` answers ``{"status": "success", "data": {"resultType": "matrix", "result": [{"metric":
{"__name__": …, labels…}, "values": [[<unix s>, "<value>"], …]}, …]}}``; ``/api/v1/query`` answers a
``vector`` (one ``"value"`` per series). Sample values are strings, ``"NaN"`` and ``"+Inf"`` among them
(https://prometheus.io/docs/prometheus/latest/querying/api/). A file holds one answer, or several as JSON
lines (one family per query, or every family at once with ``{__name__=~"vllm:.*|sglang:.*"}``), or the
bare series list ``promtool query range -o json`` prints.

Each replica is its ``instance`` label (and ``engine``, vLLM's data-parallel index): ``engine_stats.engine`` is
``<instance>/<engine>`` so every per-engine rule keeps replicas apart. A counter that falls between two
samples was reset (the server restarted): later samples are read on top of the value before the reset, as
PromQL's ``increase()`` does, and the resets are counted. A NaN sample (no value at that step) is left out
and counted; a stale marker never reaches an API answer (the server drops stale samples).
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import check_wall_clock, strip_bom, write_rows
from lltrace.parsers._lines import DuplicateKey, duplicate_at, read_text, unique_keys
from lltrace.parsers.prometheus import CUMULATIVE_METRICS, bucket_key, bucket_rows, stats_row
from lltrace.tables import SourceInfo

PROMETHEUS_API = "prometheus-api"


def sniff(head: bytes) -> bool:
    """A Prometheus HTTP API answer (matrix or vector) holding vLLM or SGLang series."""
    text = strip_bom(head).lstrip()
    if re.match(rb'\{\s*"status"\s*:\s*"error"', text) and b'"errorType"' in text:
        return True  # the server's error answer: read to say so
    families = b'"vllm:' in text or b'"sglang:' in text
    if re.match(rb'\[\s*\{\s*"metric"\s*:', text):  # promtool query -o json: the series list alone
        return families and (b'"values"' in text or b'"value"' in text)
    return text.startswith(b"{") and b'"resultType"' in text and b'"result"' in text and families


def _answers(path: str, text: str) -> list[dict[str, Any]]:
    """The API answers of a file: one JSON document, or one per line."""
    try:
        return [json.loads(text, object_pairs_hook=unique_keys)]
    except DuplicateKey as exc:
        raise TraceFormatError(path, duplicate_at(text, exc.key), f"invalid JSON ({exc})") from None
    except json.JSONDecodeError:
        pass
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line, object_pairs_hook=unique_keys))
        except (json.JSONDecodeError, DuplicateKey) as exc:
            raise TraceFormatError(path, f"line {n}", f"not a Prometheus API answer ({exc})") from None
    return out


def _float(path: str, where: str, v: Any) -> float:
    try:
        return float(v)  # "NaN", "+Inf", "-Inf" and decimals, as the API writes them
    except (TypeError, ValueError):
        raise TraceFormatError(path, where, f"not a sample value: {str(v)[:40]!r}") from None


def ingest(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """Every vLLM / SGLang series of the answers -> one ``engine_stats`` row per replica and sample time."""
    info = SourceInfo(path=path, format=PROMETHEUS_API)
    text = strip_bom(read_text(path).encode()).decode()
    # (replica key) -> time -> metric -> value; one series per full label set
    samples: dict[tuple[str, str], dict[float, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    buckets: dict[tuple[str, str], dict[float, dict[tuple, float]]] = defaultdict(lambda: defaultdict(dict))
    seen_series: set[tuple[str, tuple]] = set()
    kinds: set[str] = set()
    replicas: dict[tuple[str, str], dict[str, Any]] = {}
    nan = unnamed = native = duplicated = 0
    for k, answer in enumerate(_answers(path, text), start=1):
        if isinstance(answer, list):  # promtool query range|instant -o json prints the result alone
            answer = {"resultType": "matrix" if any("values" in s for s in answer) else "vector", "result": answer}
        if not isinstance(answer, dict):
            raise TraceFormatError(path, f"answer {k}", "expected a JSON object")
        if answer.get("status") == "error":
            raise TraceFormatError(path, f"answer {k}", f"the server answered an error: {answer.get('error')!r}")
        data = answer.get("data", answer)
        kind = data.get("resultType") if isinstance(data, dict) else None
        if kind not in ("matrix", "vector"):
            raise TraceFormatError(path, f"answer {k}", f"resultType {kind!r}: only matrix and vector hold series")
        kinds.add(kind)
        for s_i, series in enumerate(data.get("result") or []):
            labels = dict(series.get("metric") or {})
            name = labels.pop("__name__", None)
            if name is None:
                unnamed += 1  # a query that computed something (rate(), sum by): not a raw family
                continue
            if not name.startswith(("vllm:", "sglang:")):
                continue
            if "histogram" in series or "histograms" in series:
                native += 1
            points = series.get("values") if kind == "matrix" else [series.get("value")]
            label_key = (name, tuple(sorted(labels.items())))
            if label_key in seen_series:
                duplicated += 1  # the same series in two answers: which copy holds is unknown
                continue
            seen_series.add(label_key)
            key = (labels.get("instance", ""), labels.get("engine", "0"))
            replicas.setdefault(
                key, {"instance": key[0] or None, "engine": key[1], "model_name": labels.get("model_name")}
            )
            for p_i, point in enumerate(points or []):
                where = f"answer {k}, series {s_i + 1} ({name}), sample {p_i + 1}"
                if not isinstance(point, list) or len(point) != 2:
                    raise TraceFormatError(path, where, 'expected [<unix time>, "<value>"]')
                ts, v = _float(path, where, point[0]), _float(path, where, point[1])
                if v != v:
                    nan += 1
                    continue
                bucket = bucket_key(name, labels)
                if bucket is not None:
                    per = buckets[key][ts]
                    per[bucket] = per.get(bucket, 0.0) + v
                    continue
                at = samples[key][ts]
                if name == "vllm:num_requests_waiting_by_reason":
                    field = f"waiting_{labels.get('reason', 'other')}"
                    at[field] = at.get(field, 0.0) + v
                else:
                    at[name] = at.get(name, 0.0) + v  # series differing in other labels (model_name) add up
    rows, resets = _rows(part, samples)
    hist, bucket_resets = _bucket_rows(part, buckets)
    if bucket_resets:
        resets["histogram buckets"] = bucket_resets
    for r in rows:
        check_wall_clock(path, f"sample at {r['ts_s']}", r["ts_s"], "the sample time")
    if nan:
        info.dropped["nan_samples"] = nan
        info.warnings.append(f"{path}: {nan} NaN samples (no value at that step): left out")
    if duplicated:
        info.dropped["duplicated_series"] = duplicated
        info.warnings.append(f"{path}: {duplicated} series appear in more than one answer: the later copies dropped")
    if unnamed:
        info.dropped["series_without_a_metric_name"] = unnamed
        info.warnings.append(
            f"{path}: {unnamed} series without __name__ (a computed query, not a metric family): not read"
        )
    if native:
        info.warnings.append(f"{path}: {native} native-histogram series: their histograms are not read")
    if resets:
        info.details["counter_resets"] = resets
        info.warnings.append(
            f"{path}: {sum(resets.values())} counter resets (a server restart): later samples read on top of the "
            "value before the reset"
        )
    steps = sorted({r["ts_s"] for r in rows})
    info.version = f"HTTP API {' and '.join(sorted(kinds))}"
    info.details["replicas"] = [replicas[k] for k in sorted(replicas)]
    info.details["step_s"] = (
        statistics.median(b - a for a, b in zip(steps, steps[1:], strict=False)) if len(steps) > 1 else None
    )
    info.records = write_rows(stage, "engine_stats", part, rows)
    if hist:
        write_rows(stage, "engine_histograms", part, hist)
    return info


def _bucket_rows(part: int, buckets: dict[tuple[str, str], dict[float, dict[tuple, float]]]) -> tuple[list, int]:
    """``engine_histograms`` rows per replica and time, each bucket's count made monotone across resets."""
    rows, resets = [], 0
    for (instance, engine), by_time in sorted(buckets.items()):
        offset: dict[tuple, float] = defaultdict(float)
        last: dict[tuple, float] = {}
        for ts in sorted(by_time):
            counts = {}
            for b, raw in by_time[ts].items():
                if b in last and raw < last[b]:
                    offset[b] += last[b]
                    resets += 1
                last[b] = raw
                counts[b] = raw + offset[b]
            rows += bucket_rows(part, ts, f"{instance}/{engine}" if instance else engine, instance or None, counts)
    return rows, resets


def _rows(
    part: int, samples: dict[tuple[str, str], dict[float, dict[str, float]]]
) -> tuple[list[dict], dict[str, int]]:
    """One row per replica and time; counters made monotone across resets (per replica and metric)."""
    rows = []
    resets: dict[str, int] = defaultdict(int)
    for (instance, engine), by_time in sorted(samples.items()):
        offset: dict[str, float] = defaultdict(float)
        last: dict[str, float] = {}
        for ts in sorted(by_time):
            stats = dict(by_time[ts])
            for name in CUMULATIVE_METRICS & stats.keys():
                raw = stats[name]
                if name in last and raw < last[name]:
                    offset[name] += last[name]
                    resets[name] += 1
                last[name] = raw
                stats[name] = raw + offset[name]
            row = stats_row(part, ts, f"{instance}/{engine}" if instance else engine, stats)
            row["instance"] = instance or None
            rows.append(row)
    return rows, dict(resets)

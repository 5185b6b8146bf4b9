"""A Prometheus server's answers (Prometheus, Thanos, Mimir, VictoriaMetrics: the HTTP API's JSON) for vLLM's
and SGLang's metric families -> ``engine_stats``, one row per replica and sample time, and
``engine_histograms``, each bucket's count per replica and sample time.

``/api/v1/query_range`` answers ``{"status": "success", "data": {"resultType": "matrix", "result": [{"metric":
{"__name__": …, labels…}, "values": [[<unix s>, "<value>"], …]}, …]}}``; ``/api/v1/query`` answers a
``vector`` (one ``"value"`` per series). Sample values are strings, ``"NaN"`` and ``"+Inf"`` among them
(https://prometheus.io/docs/prometheus/latest/querying/api/). A file holds one answer, or several as JSON
lines (one family per query, or every family at once with ``{__name__=~"vllm:.*|sglang:.*"}``), or the
bare series list ``promtool query range -o json`` prints.

Each replica is its ``instance`` label (and ``engine``, vLLM's data-parallel index): ``engine_stats.engine`` is
``<instance>/<engine>`` so every per-engine rule keeps replicas apart. A counter that falls between two
samples of one series was reset (the server restarted): later samples are read on top of the value before
the reset, as PromQL's ``increase()`` does, and the resets are counted (the run's assembly does the same
across files: ``lltrace.ingest.counters``). A NaN sample (no value at that step) is left out and counted; a
stale marker never reaches an API answer (the server drops stale samples).

A week of one replica's families is tens of millions of samples, nearly all of them inside ``"values"``
arrays. Those arrays are read in bulk (numpy) after a check that each is exactly ``[[t, "v"], …]``; the
rest of the file (labels, structure) goes through the JSON reader. A file where any array is not in that
shape is read sample by sample instead, so every error names its answer, series and sample.
"""

from __future__ import annotations

import json
import re
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import check_wall_clock, strip_bom, write_columns
from lltrace.parsers._lines import DuplicateKey, duplicate_at, read_text, unique_keys
from lltrace.parsers.prometheus import (
    CUMULATIVE_METRICS,
    ENGINE_PREFIXES,
    HTTP_REQUESTS,
    PROM_COLUMNS,
    bucket_key,
    cache_config,
    engine_of,
    http_class,
    name_engine,
)
from lltrace.source_info import SourceInfo

if TYPE_CHECKING:  # imported where a frame is built: importing the parsers (every ingest) stays without polars
    import polars as pl

PROMETHEUS_API = "prometheus-api"


def sniff(head: bytes) -> bool:
    """A Prometheus HTTP API answer (matrix or vector) holding vLLM, SGLang or TGI series."""
    text = strip_bom(head).lstrip()
    if re.match(rb'\{\s*"status"\s*:\s*"error"', text) and b'"errorType"' in text:
        return True  # the server's error answer: read to say so
    families = any(b'"' + p.encode() in text for p in ENGINE_PREFIXES)
    if re.match(rb'\[\s*\{\s*"metric"\s*:', text):  # promtool query -o json: the series list alone
        return families and (b'"values"' in text or b'"value"' in text)
    return text.startswith(b"{") and b'"resultType"' in text and b'"result"' in text and families


class Series(NamedTuple):
    """One series of an answer: its name and labels, its sample times (unix s) and values, in file order."""

    answer: int
    index: int
    name: str | None
    labels: dict[str, str]
    ts: np.ndarray
    values: np.ndarray
    native: bool


def _answers(path: str, text: str) -> list[Any]:
    """The API answers of a file: one JSON document, or one per line."""
    try:
        return [json.loads(text, object_pairs_hook=unique_keys)]
    except DuplicateKey as exc:
        raise TraceFormatError(path, duplicate_at(text, exc.key), f"invalid JSON ({exc})") from None
    except json.JSONDecodeError as exc:
        if "\n" not in text.strip():  # one answer on one line, as curl saves it: say where it broke
            end = exc.pos >= len(text.rstrip()) - 1
            why = "truncated: the answer ends inside its JSON" if end else f"invalid JSON ({exc.msg})"
            raise TraceFormatError(path, f"byte {len(text[: exc.pos].encode())}", why) from None
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line, object_pairs_hook=unique_keys))
        except (json.JSONDecodeError, DuplicateKey) as exc:
            raise TraceFormatError(path, f"line {n}", f"not a Prometheus API answer ({exc})") from None
    return out


def _result(path: str, k: int, answer: Any) -> tuple[str, list[Any]]:
    """(resultType, series list) of one answer; the server's error answer and other result types are errors."""
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
    result = data.get("result") or []
    if not isinstance(result, list) or not all(isinstance(s, dict) for s in result):
        raise TraceFormatError(path, f"answer {k}", "result is not a list of series objects")
    return kind, result


def _float(path: str, where: str, v: Any) -> float:
    try:
        return float(v)  # "NaN", "+Inf", "-Inf" and decimals, as the API writes them
    except (TypeError, ValueError):
        raise TraceFormatError(path, where, f"not a sample value: {str(v)[:40]!r}") from None


def series_exact(path: str, text: str, kinds: set[str]) -> Iterator[Series]:
    """Every series of the file, read sample by sample: each error names its answer, series and sample."""
    for k, answer in enumerate(_answers(path, text), start=1):
        kind, result = _result(path, k, answer)
        kinds.add(kind)
        for s_i, series in enumerate(result):
            labels = dict(series.get("metric") or {})
            name = labels.pop("__name__", None)
            points = series.get("values") if kind == "matrix" else [series.get("value")]
            ts, vs = [], []
            for p_i, point in enumerate(points or []):
                where = f"answer {k}, series {s_i + 1} ({name}), sample {p_i + 1}"
                if not isinstance(point, list) or len(point) != 2:
                    raise TraceFormatError(path, where, 'expected [<unix time>, "<value>"]')
                ts.append(_float(path, where, point[0]))
                vs.append(_float(path, where, point[1]))
            native = "histogram" in series or "histograms" in series
            yield Series(k, s_i, name, labels, np.array(ts, dtype=float), np.array(vs, dtype=float), native)


# the bulk reader: a "values" array is '[' + '[t,"v"]' joined by ',' + ']', white space aside
_VALUES = re.compile(rb'"values"\s*:\s*\[')  # no look-behind: it would cost the search its speed
_VALUES_END = re.compile(rb"\]\s*\]")
_STRUCTURAL = np.zeros(256, dtype=bool)
_STRUCTURAL[list(b'[],"{}:')] = True
_PAIR = np.frombuffer(b'[,""],', dtype=np.uint8)
_TO_SPACE = bytes.maketrans(b'[]"', b"   ")


def _bulk_values(span: bytes) -> np.ndarray | None:
    """The ``[[t, "v"], …]`` array as an (n, 2) float array, or None where it is not exactly that shape."""
    raw = np.frombuffer(span, dtype=np.uint8)
    marks = raw[_STRUCTURAL[raw]]
    n = (len(marks) - 1) // 6
    if len(marks) != 6 * n + 1 or n == 0:
        return np.empty((0, 2)) if bytes(marks) == b"[]" else None
    expected = np.empty(6 * n + 1, dtype=np.uint8)
    expected[0] = ord("[")
    expected[1:] = np.tile(_PAIR, n)
    expected[-1] = ord("]")
    if not np.array_equal(marks, expected):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns, and stops, at text that is not a number
        try:
            numbers = np.fromstring(span.translate(_TO_SPACE), sep=",")
        except (ValueError, DeprecationWarning):
            return None
    return numbers.reshape(n, 2) if numbers.size == 2 * n else None


def series_bulk(path: str, data: bytes, kinds: set[str], progress: Callable[[int], None] | None) -> list[Series] | None:
    """Every series of the file with its ``values`` arrays read in bulk; None where any array (or the rest
    of the file) is not what the API writes, for the exact reader to say where."""
    arrays: list[np.ndarray] = []
    skeleton: list[bytes] = []
    at = 0
    for m in _VALUES.finditer(data):
        if m.start() and data[m.start() - 1] == ord("\\"):
            return None  # the text "values" inside a string: the exact reader sorts that out
        start = m.end() - 1
        rest = data[m.end() : m.end() + 64].lstrip()
        if rest.startswith(b"]"):
            end = data.index(b"]", m.end()) + 1
        else:
            found = _VALUES_END.search(data, m.end())
            if found is None:
                return None
            end = found.end()
        values = _bulk_values(data[start:end])
        if values is None:
            return None
        skeleton += [data[at:start], str(len(arrays)).encode()]
        arrays.append(values)
        at = end
        if progress is not None:
            progress(end)
    skeleton.append(data[at:])
    try:
        text = b"".join(skeleton).decode("utf-8")
    except UnicodeDecodeError:
        return None
    try:
        answers = _answers(path, text)
    except TraceFormatError:
        return None
    out: list[Series] = []
    used = 0
    for k, answer in enumerate(answers, start=1):
        kind, result = _result(path, k, answer)
        kinds.add(kind)
        for s_i, series in enumerate(result):
            labels = dict(series.get("metric") or {})
            name = labels.pop("__name__", None)
            native = "histogram" in series or "histograms" in series
            if kind == "matrix":
                if "values" not in series:
                    pairs = np.empty((0, 2))
                elif type(series["values"]) is not int or series["values"] != used:
                    return None  # a "values" key that was not a series' samples
                else:
                    pairs = arrays[used]
                    used += 1
            else:
                point = series.get("value")
                if not isinstance(point, list) or len(point) != 2:
                    return None
                try:
                    pairs = np.array([[float(point[0]), float(point[1])]])
                except (TypeError, ValueError):
                    return None
            out.append(Series(k, s_i, name, labels, pairs[:, 0], pairs[:, 1], native))
    return out if used == len(arrays) else None


def monotone(values: np.ndarray) -> tuple[np.ndarray, int]:
    """A counter's samples with every reset undone (a fall reads on top of the value before it, as PromQL's
    ``increase()`` does), and how many resets there were."""
    if values.size < 2:
        return values, 0
    falls = values[1:] < values[:-1]
    n = int(falls.sum())
    if not n:
        return values, 0
    out = values.copy()
    out[1:] += np.cumsum(np.where(falls, values[:-1], 0.0))
    return out, n


def ingest(path: str, stage: Path, part: int, progress: Callable[[int], None] | None = None, **_: Any) -> SourceInfo:
    """Every vLLM / SGLang series of the answers -> ``engine_stats`` (one row per replica and sample time) and
    ``engine_histograms`` (each bucket's count per replica and sample time)."""
    info = SourceInfo(path=path, format=PROMETHEUS_API)
    kinds: set[str] = set()
    data = Path(path).read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    series = series_bulk(path, data, kinds, progress)
    if series is None:  # not exactly what the API writes: read sample by sample, to say where
        kinds.clear()
        series = list(series_exact(path, read_text(path), kinds))
    stats: list[tuple[tuple[str, str], str, np.ndarray, np.ndarray]] = []
    buckets: list[tuple[tuple[str, str], str, float | None, np.ndarray, np.ndarray]] = []
    replicas: dict[tuple[str, str], dict[str, Any]] = {}
    seen: set[tuple[str, tuple]] = set()
    resets: dict[str, int] = defaultdict(int)
    nan = unnamed = native = duplicated = other_ranks = 0
    configs: list[dict[str, Any]] = []
    for s in series:
        if s.name is None:
            unnamed += 1  # a query that computed something (rate(), sum by): not a raw family
            continue
        if not s.name.startswith(ENGINE_PREFIXES) and s.name != HTTP_REQUESTS:
            continue
        native += s.native
        label_key = (s.name, tuple(sorted(s.labels.items())))
        if label_key in seen:
            duplicated += 1  # the same series in two answers: which copy holds is unknown
            continue
        seen.add(label_key)
        engine = engine_of(s.labels)
        if engine is None:
            other_ranks += 1  # a tensor/pipeline rank's copy of rank 0's scheduler figures
            continue
        key = (s.labels.get("instance", ""), engine)
        replicas.setdefault(
            key, {"instance": key[0] or None, "engine": key[1], "model_name": s.labels.get("model_name")}
        )
        if s.name == "vllm:cache_config_info":  # an info gauge: the KV cache's settings are its labels
            configs.append(cache_config(s.labels))
            continue
        ts, values = s.ts, s.values
        missing = values != values
        if missing.any():
            nan += int(missing.sum())
            ts, values = ts[~missing], values[~missing]
        if ts.size > 1 and (np.diff(ts) < 0).any():  # the API answers in time order; a merged file may not
            order = np.argsort(ts, kind="stable")
            ts, values = ts[order], values[order]
        bucket = bucket_key(s.name, s.labels)
        if bucket is not None or s.name in CUMULATIVE_METRICS or s.name == HTTP_REQUESTS:
            values, n = monotone(values)
            if n:
                resets["histogram buckets" if bucket is not None else s.name] += n
        if bucket is not None:
            buckets.append((key, bucket[0], bucket[1], ts, values))
        elif s.name == "vllm:num_requests_waiting_by_reason":
            stats.append((key, f"waiting_{s.labels.get('reason', 'other')}", ts, values))
        elif s.name == HTTP_REQUESTS:
            if (status := http_class(s.labels)) is not None:
                stats.append((key, status, ts, values))
        elif s.name in _WANTED:
            stats.append((key, s.name, ts, values))
    kept = [it[-2] for it in stats + buckets if it[-2].size]
    if kept:
        for where, t in (("first", min(float(t[0]) for t in kept)), ("last", max(float(t[-1]) for t in kept))):
            check_wall_clock(path, f"the {where} sample, at {t}", t, "the sample time")
    stats_frame, hist = _stats_frame(part, stats), _bucket_frame(part, buckets)
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
    if other_ranks:
        info.dropped["other_rank_series"] = other_ranks
        info.warnings.append(f"{path}: {other_ranks} series from tensor/pipeline ranks other than 0: rank 0's read")
    if native:
        info.warnings.append(f"{path}: {native} native-histogram series: their histograms are not read")
    if resets:
        info.details["counter_resets"] = dict(resets)
        info.warnings.append(
            f"{path}: {sum(resets.values())} counter resets (a server restart): later samples read on top of the "
            "value before the reset"
        )
    steps = np.unique(np.concatenate(kept)) if kept else np.empty(0)
    info.version = f"HTTP API {' and '.join(sorted(kinds))}"
    info.details["replicas"] = [replicas[k] for k in sorted(replicas)]
    info.details["step_s"] = float(np.median(np.diff(steps))) if steps.size > 1 else None
    # the replicas' KV cache settings, where they all agree (a setting they differ on is no run-wide value)
    agreed = {k: v for k, v in (configs[0] if configs else {}).items() if all(c.get(k) == v for c in configs)}
    if agreed:
        info.details["engine_config"] = agreed
        info.details["engine_config_origin"] = dict.fromkeys(agreed, "Prometheus vllm:cache_config_info")
    name_engine(info, (s.name for s in series if s.name))
    info.records = write_columns(stage, "engine_stats", part, stats_frame.to_arrow())
    if hist.height:
        write_columns(stage, "engine_histograms", part, hist.to_arrow())
    return info


_WANTED = frozenset(n for names in PROM_COLUMNS.values() for n in names)


def _engine_name(instance: str, engine: str) -> str:
    return f"{instance}/{engine}" if instance else engine


def _long(items: list[tuple], fields: list[str]) -> pl.DataFrame:
    """The samples of many series as one long frame, one row per series and sample time: each series' labels
    are joined on by its index (a handful of rows) rather than repeated as Python strings."""
    import polars as pl

    sizes = np.array([len(it[-1]) for it in items], dtype=np.int64)
    labels = pl.DataFrame(
        {
            "instance": [it[0][0] for it in items],
            "engine": [_engine_name(*it[0]) for it in items],
            **{f: [it[i] for it in items] for i, f in enumerate(fields, start=1)},
        },
        schema_overrides={"le": pl.Float64} if "le" in fields else None,
    ).with_columns(pl.col("instance", "engine", *(f for f in fields if f != "le")).cast(pl.Categorical))
    return labels[np.repeat(np.arange(len(items)), sizes)].with_columns(
        ts_s=np.concatenate([it[-2] for it in items]).astype(np.float64),
        value=np.concatenate([it[-1] for it in items]).astype(np.float64),
    )


def _stats_frame(part: int, stats: list[tuple]) -> pl.DataFrame:
    """One ``engine_stats`` row per replica and time; series of one metric differing in other labels
    (``model_name``) add up, and each column takes the first metric name of its list that is present."""
    import polars as pl

    if not stats:
        return pl.DataFrame()
    long = _long(stats, ["metric"]).group_by(["instance", "engine", "ts_s", "metric"]).agg(pl.col("value").sum())
    wide = long.pivot(on="metric", index=["instance", "engine", "ts_s"], values="value")
    present = set(wide.columns)
    out = wide.select(
        pl.lit(part, dtype=pl.Int32).alias("part"),
        "ts_s",
        "engine",
        pl.when(pl.col("instance") != "").then(pl.col("instance")).alias("instance"),
        pl.lit("prometheus").alias("source"),
        *(
            pl.coalesce([pl.col(n) for n in names if n in present]).alias(col)
            for col, names in PROM_COLUMNS.items()
            if any(n in present for n in names)
        ),
        *(pl.col(c) for c in ("waiting_capacity", "waiting_deferred") if c in present),
    )
    return out.sort(["engine", "ts_s"])


def _bucket_frame(part: int, buckets: list[tuple]) -> pl.DataFrame:
    """``engine_histograms`` rows: each bucket's count per replica and time, in (engine, metric, le, time)
    order; bucket series differing only in other labels (``model_name``) add up."""
    import polars as pl

    if not buckets:
        return pl.DataFrame()
    buckets = sorted(buckets, key=lambda b: (_engine_name(*b[0]), b[1], float("inf") if b[2] is None else b[2]))
    long = _long(buckets, ["metric", "le"]).rename({"value": "count"})
    keys = ["engine", "metric", "le"]
    if len({(b[0], b[1], b[2]) for b in buckets}) < len(buckets):
        long = (
            long.group_by(["instance", *keys, "ts_s"]).agg(pl.col("count").sum()).sort([*keys, "ts_s"], nulls_last=True)
        )
    return long.select(
        pl.lit(part, dtype=pl.Int32).alias("part"),
        "ts_s",
        "engine",
        pl.when(pl.col("instance") != "").then(pl.col("instance")).alias("instance"),
        "metric",
        "le",
        "count",
    )

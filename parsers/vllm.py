"""vLLM's benchmark client: ``vllm bench serve`` / ``benchmark_serving.py`` result JSON and the client's stdout.

The bench file's per-request lists are staged (``_bench``) and joined with the engine's ``llm_request`` spans
into ``requests`` when the run is assembled (``lltrace.ingest.join``), because a request's client-side and
server-side records come from different files; the client log gives the join key. What each file holds:
docs/formats.md.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import error_line, not_a_figure, reason_status, strip_bom, write_rows
from lltrace.parsers._lines import DuplicateKey, duplicate_at, read_text, unique_keys
from lltrace.parsers.result_table import ResultTable, read_tables, table_tool
from lltrace.source_info import SourceInfo

BENCH = "vllm-bench"
CLIENT_LOG = "vllm-bench-client-log"


# -- vllm bench serve result JSON ---------------------------------------------------------------------


# keys only SGLang's bench_serving writes to a result (its e2e latency under that name in every schema, where
# vLLM's client writes e2el): a result with one is SGLang's, also from a fork that dropped the others
SGLANG_ONLY_KEYS = (
    b'"total_output_tokens_retokenized"',
    b'"sharegpt_output_len"',
    b'"accept_length"',
    b'"mean_e2e_latency_ms"',
    b'"median_e2e_latency_ms"',
)


def sniff_bench(head: bytes) -> bool:
    """A ``vllm bench serve`` / ``benchmark_serving.py`` result: a JSON object with its summary keys, or the
    JSON array of such results ``vllm bench sweep serve`` writes as a combination's ``summary.json``."""
    text = strip_bom(head)
    if text.startswith(b"["):
        text = text[1:].lstrip()
    # GenAI-Perf's and AIPerf's aggregates have a "backend" in their input config and a request_throughput that
    # is an object of statistics ({"unit": ..., "avg": ...}), never vLLM's number
    stats_object = re.search(rb'"(request_throughput|request_latency|time_to_first_token)"\s*:\s*\{', text)
    return (
        text.startswith(b"{")
        and (b'"backend"' in text or b'"endpoint_type"' in text)
        and any(k in text for k in (b'"request_throughput"', b'"input_lens"', b'"completed"', b'"num_prompts"'))
        and not any(k in text for k in SGLANG_ONLY_KEYS)
        and stats_object is None
    )


_PER_REQUEST = ("input_lens", "output_lens", "ttfts", "latencies", "start_times", "queue_times", "itls", "errors")


def bench_objects(path: str, text: str, info: SourceInfo | None = None) -> list[dict]:
    """One or more JSON objects (``--append-result`` puts them back to back, a line each; SGLang writes one
    per line), or one JSON array of them (``vllm bench sweep serve``'s ``summary.json``: each run's result with
    its ``run_number`` and the sweep's settings); ``Infinity``/``NaN`` allowed. With ``info``, a damaged object
    that another object follows on a later line is dropped, and a last one cut off by a truncated write too
    when others were read (counted, warned, ``info.truncated`` set); otherwise a damaged object is the one-line
    error."""
    dec = json.JSONDecoder(object_pairs_hook=unique_keys)
    if text.lstrip(" \t\r\n\ufeff").startswith("["):
        return _result_array(path, text, dec)
    objs, pos = [], 0
    damaged: list[int] = []
    while True:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos >= len(text):
            break
        try:
            obj, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            line = text.count("\n", 0, exc.pos) + 1
            following = text.find("\n{", exc.pos)
            if info is not None and (following >= 0 or objs):
                damaged.append(text.count("\n", 0, pos) + 1)
                if following < 0:
                    break
                pos = following + 1
                continue
            raise TraceFormatError(path, f"line {line}", f"invalid JSON in a bench result ({exc.msg})") from None
        except DuplicateKey as exc:
            raise TraceFormatError(
                path, duplicate_at(text, exc.key), f"invalid JSON in a bench result ({exc})"
            ) from None
        if not isinstance(obj, dict):
            raise TraceFormatError(path, f"line {text.count(chr(10), 0, pos) + 1}", "expected a JSON object")
        objs.append(obj)
    if damaged and info is not None:
        info.dropped["damaged_results"] = len(damaged)
        info.truncated = f"damaged result at line {damaged[0]}"
        info.warnings.append(
            f"{path}: line {damaged[0]}: {len(damaged)} damaged or cut-off result object(s): dropped, {len(objs)} read"
        )
    return objs


def _result_array(path: str, text: str, dec: json.JSONDecoder) -> list[dict]:
    """A JSON array of result objects (a sweep combination's ``summary.json``): the one-line error where it is
    not one."""
    try:
        data = dec.decode(text.lstrip(" \t\r\n\ufeff"))
    except json.JSONDecodeError as exc:
        line = text.count("\n", 0, exc.pos) + 1
        raise TraceFormatError(path, f"line {line}", f"invalid JSON in an array of bench results ({exc.msg})") from None
    except DuplicateKey as exc:
        raise TraceFormatError(path, duplicate_at(text, exc.key), f"invalid JSON in a bench result ({exc})") from None
    for k, obj in enumerate(data):
        if not isinstance(obj, dict):
            raise TraceFormatError(path, f"element {k}", "expected a bench result object")
    return data


def result_fingerprint(obj: dict[str, Any]) -> str:
    """The identity of one result as the client wrote it, so that the same run read from two files (a sweep's
    ``run=N.json`` and its ``summary.json``) is recognised: every summary key and value (its date, duration to
    the float's last digit, counts, figures) and the length of each per-request list."""
    ident = {
        k: (len(v) if isinstance(v, list) and k in _PER_REQUEST + ("generated_texts",) else v) for k, v in obj.items()
    }
    return hashlib.sha1(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, str):
        if v.lower() in ("inf", "infinity"):
            return math.inf
        try:
            return float(v)
        except ValueError:
            return None
    return float(v) if isinstance(v, (int, float)) else None


# the summary figures benchmark_serving.py / bench_serving.py write as numbers (counts, seconds, ms, rates)
_NUMERIC_SUMMARY = re.compile(
    r"^(completed|failed|num_prompts|max_concurrency|duration|burstiness|request_goodput|total_\w+|"
    r"\w+_(ms|throughput|tokens|concurrency))$"
)


def _clean_summary(summary: dict[str, Any]) -> list[tuple[str, Any]]:
    """Drop (set to None) each numeric summary figure that is not a finite non-negative number (text such as
    ``"40"``, a boolean, NaN, a negative count, a count beyond int64); returns what was dropped."""
    bad = []
    for key, val in summary.items():
        if val is None or isinstance(val, (list, dict)) or not _NUMERIC_SUMMARY.match(key):
            continue  # structures (percentile tables) are not figures
        if not_a_figure(val):
            bad.append((key, val))
            summary[key] = None
    return bad


_TTFT_FIGURE = re.compile(r"^(mean|median|std|p\d+(\.\d+)?)_ttft_ms$")
_ITL_FIGURE = re.compile(r"^(mean|median|std|max|p\d+(\.\d+)?)_itl_ms$")


def _not_streamed(summary: dict[str, Any]) -> bool:
    """True, and the TTFT and ITL figures set to None, when every TTFT figure of a result is 0: the bench clients
    (vLLM's and SGLang's ``RequestFuncOutput.ttft = 0.0``) time a first token only from a streamed chunk, so an
    unstreamed run reports the mean of zeros (SGLang's ``np.mean(ttfts or 0)``), and its ITLs of no gaps."""
    ttft = [v for k, v in summary.items() if _TTFT_FIGURE.match(k) and v is not None]
    if not ttft or any(v != 0 for v in ttft):
        return False
    for key in summary:
        if _TTFT_FIGURE.match(key) or _ITL_FIGURE.match(key):
            summary[key] = None
    return True


def _no_gaps(summary: dict[str, Any]) -> bool:
    """True, and the ITL figures set to None, when every ITL figure of a result is 0 while its TTFT is not: the
    clients take their inter-token figures over every gap between streamed chunks (``np.mean(itls or 0)``, vLLM's and
    SGLang's), so a run whose replies came in one chunk after the first token, or whose client recorded no gaps,
    reports 0 for a figure it never measured."""
    itl = [v for k, v in summary.items() if _ITL_FIGURE.match(k) and v is not None]
    if not itl or any(v != 0 for v in itl):
        return False
    for key in summary:
        if _ITL_FIGURE.match(key):
            summary[key] = None
    return True


_NO_GAPS = (
    "every inter-token latency figure is 0 ms: the client recorded no gap between tokens and reports the mean of "
    "none as 0: inter-token figures left NULL"
)


# the result schemas vLLM's bench client has written, each told by keys only it has (newest first); the rest of
# the keys is read by name wherever it appears
_BENCH_SCHEMAS = (
    (
        ("latencies", "start_times", "max_concurrent_requests"),
        "vllm bench serve (vllm/benchmarks/serve.py @009e6d4a, 0.32 too: failed count, per-request latencies, send "
        "and client-queue times)",
    ),
    (
        ("request_goodput:",),
        "benchmark_serving.py (@0049e29c, 2025: 'request_goodput:' with a colon; the per-request lists written even "
        "without --save-detailed, whose removal ran before the merge)",
    ),
    (("request_throughput",), "benchmark_serving.py (2024: summary figures, per-request TTFT and ITL lists)"),
)


def bench_schema(obj: dict[str, Any]) -> str:
    """The schema of one vLLM bench result object (``_BENCH_SCHEMAS``), by the keys it carries."""
    return next(
        (name for keys, name in _BENCH_SCHEMAS if any(k in obj for k in keys)),
        "a subset of benchmark_serving.py's summary keys",
    )


def ingest_bench(
    path: str,
    stage: Path,
    part: int,
    *,
    schema_of: Callable[[dict[str, Any]], str] = bench_schema,
    lists: str = "detailed (per-request lists)",
    **_: Any,
) -> SourceInfo:
    """Per-request rows of a bench result (when saved with details) and its summary into the metadata; each
    result's schema named by ``schema_of``, the per-request lists by ``lists`` (SGLang's bench_serving writes
    the same shape with its own keys and flag)."""
    info = SourceInfo(path=path, format=BENCH)
    try:
        text = read_text(path)
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, f"byte {exc.start}", "invalid UTF-8") from None
    rows: list[dict[str, Any]] = []
    summaries = []
    unstreamed = 0
    stem = os.path.basename(path)
    schemas: set[str] = set()
    for k, obj in enumerate(bench_objects(path, text, info)):
        schemas.add(schema_of(obj))
        fingerprint = result_fingerprint(obj)
        # vllm bench sweep serve records each run's number; -1 is its warm-up run (sweep/serve.py run_comb)
        warmup = obj.get("run_number") == -1
        client_id = stem if k == 0 else f"{stem}#{k}"
        summary = {key: v for key, v in obj.items() if key not in _PER_REQUEST + ("generated_texts",)}
        if "request_goodput:" in summary:  # benchmark_serving.py <= early 2025 wrote the key with a colon
            summary.setdefault("request_goodput", summary.pop("request_goodput:"))
        rate = summary.get("request_rate")
        if rate == math.inf or (isinstance(rate, str) and rate.lower() in ("inf", "infinity")):
            summary["request_rate"] = "inf"  # all at once; another word (SGLang's "trace": a trace's own times) stays
        summary["client_id"] = client_id
        summary["fingerprint"] = fingerprint
        if warmup:
            summary["phase"] = "warmup"
        bad = _clean_summary(summary)
        if bad:
            info.dropped["summary_values_not_numbers"] = info.dropped.get("summary_values_not_numbers", 0) + len(bad)
            shown = ", ".join(f"{key}={val!r}" for key, val in bad[:4])
            info.warnings.append(
                f"{path}: result {k + 1}: {len(bad)} summary figures that are not finite non-negative numbers "
                f"dropped ({shown})"
            )
        if _not_streamed(summary):
            info.warnings.append(
                f"{path}: result {k + 1}: every TTFT figure is 0 ms, the client's default for a reply that was not "
                "streamed (no first token was timed): TTFT and inter-token figures left NULL"
            )
            info.dropped["unstreamed_results"] = info.dropped.get("unstreamed_results", 0) + 1
        elif _no_gaps(summary):
            info.warnings.append(f"{path}: result {k + 1}: {_NO_GAPS}")
        summaries.append(summary)
        lens = obj.get("input_lens")
        if not isinstance(lens, list):
            continue
        n = len(lens)
        cols = {key: obj.get(key) for key in _PER_REQUEST}
        for key, val in cols.items():
            if val is not None and (not isinstance(val, list) or len(val) != n):
                raise TraceFormatError(
                    path, f"object {k + 1}", f"per-request list {key!r} has {len(val)} entries, input_lens has {n}"
                )

        def at(key: str, i: int, cols: dict[str, Any] = cols) -> Any:
            v = cols[key]
            return v[i] if v is not None else None

        for i in range(n):
            err = at("errors", i)
            itl = at("itls", i)
            ok = err in (None, "")
            ttft = _num(at("ttfts", i)) if ok else None
            if ttft == 0:  # RequestFuncOutput.ttft's default: the reply was not streamed, no first token was timed
                ttft = None
                unstreamed += 1
            rows.append(
                {
                    "part": part,
                    "client_id": client_id,
                    "client_file": stem,
                    "idx": i,
                    "input_tokens": at("input_lens", i),
                    "output_tokens": at("output_lens", i) if ok else None,  # 0 for a failed request means "none"
                    "ttft_s": ttft,
                    "e2e_s": _num(at("latencies", i)) if ok else None,
                    "client_start_s": _num(at("start_times", i)),
                    "client_queue_s": _num(at("queue_times", i)),
                    "itl_count": len(itl) if isinstance(itl, list) else None,
                    "itl_sum_s": float(sum(itl)) if isinstance(itl, list) else None,
                    "error": error_line(err),
                    "error_code": reason_status(err),  # the client keeps a refused request's reason phrase
                    "status": "warmup" if warmup else "ok" if ok else "error",
                }
            )
    if unstreamed:
        info.details["unstreamed_requests"] = unstreamed
        info.warnings.append(
            f"{path}: {unstreamed} successful requests have a TTFT of 0, the client's default for a reply that was "
            "not streamed: their TTFT left NULL"
        )
    # records read: per-request rows where the file has them, else its result objects
    info.records = write_rows(stage, "_bench", part, rows) or len(summaries)
    info.details["schemas"] = sorted(schemas)
    info.version = f"{' and '.join(sorted(schemas))}; " + (lists if rows else "summary only")
    info.details["bench"] = summaries
    return info


# -- the bench client's stdout --------------------------------------------------------------------------

_NS_FIELD = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[\w.+-]+)")


def sniff_client_log(head: bytes) -> bool:
    """The stdout of ``vllm bench serve`` (or ``benchmark_serving.py``): its ``Namespace(...)`` dump of the
    options, told by what only the bench client has among them (``bench_type='serve'``, ``request_id_prefix=``),
    or its result table (``lltrace.parsers.result_table``; TensorRT-LLM's copy of the client prints the same).

    The decisive marker: the same stdout also carries vLLM's own ``INFO`` logger lines, so the server-log
    sniffer defers to this one (``vllm_log.sniff_server_log``); a server's ``args: Namespace(...)`` (vLLM
    <= 0.6) has neither option. A table without those options in a file that holds the engine's stats lines
    (a server and its bench in one terminal) is a server log's: that reader reads its tables too.
    """
    namespace = b"Namespace(" in head and (b"bench_type='serve'" in head or b"request_id_prefix=" in head)
    return namespace or (table_tool(head) == "vllm" and b"Avg prompt throughput:" not in head)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def ingest_client_log(path: str, stage: Path, part: int, **_: Any) -> SourceInfo:
    """The options that join a bench file to the engine's spans (``request_id_prefix``, ``result_filename``), and
    the result table of each run the client printed (``bench``: its figures under the result file's keys, read
    by the same code; left out where the run's result file gives the same run, ``lltrace.ingest.repeats``)."""
    info = SourceInfo(path=path, format=CLIENT_LOG)
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    m = re.search(r"Namespace\((.*)\)\s*$", text, re.MULTILINE)
    tables = read_tables(text)
    if m is None and not tables:
        raise TraceFormatError(path, "line 1", "no Namespace(...) line with the bench options and no result table")
    if m is not None:
        info.details["client"] = _options(m.group(1))
    summaries = printed_results(path, tables, info)
    if summaries:
        info.details["bench"] = summaries
    info.records = max(len(summaries), 1)
    tables_read = f": {len(summaries)} result table{'s' if len(summaries) != 1 else ''}" if summaries else ""
    info.version = "vllm bench serve stdout" + tables_read
    return info


def _options(namespace: str) -> dict[str, Any]:
    """The bench options that join and qualify a run, from the ``Namespace(...)`` line's text."""
    fields = {}
    for key, raw in _NS_FIELD.findall(namespace):
        fields[key] = raw[1:-1] if raw[:1] in "'\"" else raw
    keep = (
        "request_id_prefix",
        "result_filename",
        "result_dir",
        "num_prompts",
        "request_rate",
        "seed",
        "dataset_name",
        "model",
        "base_url",
        "host",
        "port",
        "max_concurrency",
    )
    client: dict[str, Any] = {k: fields[k] for k in keep if k in fields}
    # --goodput ttft:50 e2el:1000 -> goodput=['ttft:50', 'e2el:1000'] (ms): the SLOs its request_goodput counts
    slos = re.search(r"\bgoodput=\[([^\]]*)\]", namespace)
    if slos:
        pairs = (item.strip().strip("'\"").split(":", 1) for item in slos.group(1).split(",") if item.strip())
        client["goodput"] = {k: float(v) for k, v in pairs if _is_number(v)}
    return client


def printed_results(path: str, tables: list[ResultTable], info: SourceInfo) -> list[dict[str, Any]]:
    """The result tables a bench client printed (``result_table.read_tables``) as result summaries, cleaned as a
    result file's are: a figure that is not a number dropped and counted, an unstreamed run's TTFT and ITL
    figures NULL, a table cut off by the end of the file read as far as it goes; each said in a warning."""
    summaries = []
    stem = os.path.basename(path)
    for k, table in enumerate(tables):
        summary = dict(table.figures)
        summary["client_id"] = f"{stem}#table{k + 1}"
        summary["printed_at_line"] = table.line
        if table.not_numbers:
            at, row = table.not_numbers[0]
            info.dropped["summary_values_not_numbers"] = info.dropped.get("summary_values_not_numbers", 0) + len(
                table.not_numbers
            )
            many = len(table.not_numbers)
            info.warnings.append(
                f"{path}: line {at}: {many} figure{'s' if many > 1 else ''} not a number dropped ({row})"
            )
        if not table.closed:
            info.truncated = f"result table at line {table.line} cut off"
            info.warnings.append(f"{path}: line {table.line}: the result table is cut off: its rows up to the end read")
        _clean_summary(summary)
        if _not_streamed(summary):
            info.warnings.append(
                f"{path}: line {table.line}: every TTFT figure is 0 ms, the client's default for a reply that was not "
                "streamed (no first token was timed): TTFT and inter-token figures left NULL"
            )
        elif _no_gaps(summary):
            info.warnings.append(f"{path}: line {table.line}: {_NO_GAPS}")
        summaries.append(summary)
    return summaries

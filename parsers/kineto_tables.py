"""The profiler tables ``kernels``, ``ops``, ``annotations`` and ``flows`` written from one trace's staged
events (DuckDB's staging of every event, or the compiled reader's), with damage dropped and counted.

Columns and types are the declarations of ``lltrace.tables``: every COPY below casts to them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb

from lltrace.errors import TraceFormatError
from lltrace.parsers import kineto_fast
from lltrace.parsers._io import check_wall_clock
from lltrace.parsers.kernel_classes import classify_pairs
from lltrace.source_info import SourceInfo
from lltrace.tables import ANNOTATIONS, FLOWS, KERNELS, OPS, Table

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
ANNOTATION_CATS = ("user_annotation", "gpu_user_annotation")


# A launch links the GPU ops of its correlation id: one op for a kernel, copy or fill launch, many only for a
# graph launch (cudaGraphLaunch / hipGraphLaunch: the graph's kernels carry its id). A correlation id that
# several ops share under any other launch is damage (true of every real trace in sample_traces/): no link.
_LINKS = """
    CREATE OR REPLACE TEMP TABLE launch_lanes AS
      SELECT row_number() OVER (ORDER BY name, tid, pid) AS lane, name, tid, pid,
             coalesce(name ILIKE '%GraphLaunch%', false) AS graph,
             coalesce(name ILIKE '%LaunchKernel%', false) AS kernel_launch,
             coalesce(name ILIKE '%StreamBeginCapture%', false) AS capture
      FROM (SELECT DISTINCT name, tid, pid FROM launch_src);
    CREATE OR REPLACE TEMP TABLE launches AS
      SELECT correlation, min(l.ts_ns) AS launch_ts_ns, arg_min(n.lane, l.ts_ns) AS lane
      FROM launch_src l JOIN launch_lanes n ON n.name IS NOT DISTINCT FROM l.name AND n.tid IS NOT DISTINCT FROM l.tid
           AND n.pid IS NOT DISTINCT FROM l.pid
      GROUP BY correlation;
    CREATE OR REPLACE TEMP TABLE per_id AS
      SELECT correlation, count(*) AS ops FROM k_src WHERE correlation IS NOT NULL GROUP BY correlation;
    CREATE OR REPLACE TEMP VIEW links AS
      SELECT l.correlation, l.launch_ts_ns, l.lane FROM launches l JOIN per_id p USING (correlation)
      JOIN launch_lanes n USING (lane) WHERE p.ops = 1 OR n.graph;
    CREATE OR REPLACE TEMP VIEW shared_links AS
      SELECT p.ops FROM launches l JOIN per_id p USING (correlation) JOIN launch_lanes n USING (lane)
      WHERE p.ops > 1 AND NOT n.graph;
"""
# The events that launch GPU work (launch_src), as DuckDB's staged rows are filtered to them; the compiled reader
# stages the same rows apart as it reads (_kineto_fast.c, is_launch).
_LAUNCH_FILTER = f"cat IN {LAUNCH_CATS} AND correlation IS NOT NULL"


def _launches_without_gpu_op(con: duckdb.DuckDBPyConnection, path: str, info: SourceInfo) -> None:
    """Count the kernel launches whose correlation id no GPU op in the trace carries, and say why where the
    trace shows it: a launch inside a stream capture (cudaStreamBeginCapture/hipStreamBeginCapture ...
    EndCapture) records its kernel into a graph, which runs later, when the graph is launched; a trace taken
    with the CUPTI range profiler (``profiler_metrics``) has counter ranges (``cuda_profiler_range``) in place of
    kernels, at times Kineto makes up (the profiled span split evenly: CuptiRangeProfiler.cpp), since that
    profiler cannot run beside kernel tracing. Every launch of a normal trace in sample_traces/ has its kernel
    (the profiler flushes GPU activity when it stops)."""
    (unrun, launched, captures) = con.execute(
        """
        SELECT count(*) FILTER (WHERE n.kernel_launch AND p.correlation IS NULL),
               count(*) FILTER (WHERE n.kernel_launch),
               count(*) FILTER (WHERE n.capture)
        FROM launches l JOIN launch_lanes n USING (lane) LEFT JOIN per_id p USING (correlation)
        """
    ).fetchone()
    if not unrun:
        return
    info.details["launches_without_gpu_op"] = {"kernel_launches": int(launched), "without_gpu_op": int(unrun)}
    if info.truncated and not captures:
        return  # the file's own warning says it: the GPU ops after the cut are lost with the rest
    (ranges,) = (
        (0,) if captures else con.execute("SELECT count(*) FROM l_src WHERE cat = 'cuda_profiler_range'").fetchone()
    )
    if captures:
        why = (
            f"the trace holds {captures:,} stream capture{'s' if captures != 1 else ''} (StreamBeginCapture): a launch "
            "during one records its kernel into a CUDA/HIP graph, which runs when the graph is launched, not here"
        )
    elif ranges:
        why = (
            f"the trace was taken with the CUPTI range profiler (profiler_metrics), which records no kernels: its "
            f"{ranges:,} cuda_profiler_range events hold counters, at times Kineto spreads evenly over the profiled "
            "span, not when anything ran"
        )
    else:
        why = "their kernels are not in the trace (GPU activity lost, or run after the profiler stopped)"
    info.warnings.append(
        f"{path}: {unrun:,} of {launched:,} kernel launches ran no GPU op in the trace: {why}; the GPU time here "
        "leaves them out"
    )


def _columns(table: Table, exprs: dict[str, str]) -> str:
    """The SELECT list that writes ``table``: each declared column, in order, cast to its declared type, from
    its expression in ``exprs`` (default: the staged column of the same name)."""
    return ", ".join(f"CAST({exprs.get(c.name, c.name)} AS {c.duckdb_type}) AS {c.name}" for c in table.columns)


def _version(meta: dict, counts: dict[str, int], array_form: bool) -> str:
    rocm = "roctracer_version" in meta or "hip_runtime_version" in meta
    if array_form:
        era = "Chrome trace event array (no Kineto metadata)"
    elif counts.get("capitalised_cats"):
        era = "2021 (PyTorch 1.8-1.10: capitalised categories)"
    elif counts.get("old_flows"):
        era = "2022 (PyTorch ~1.11-1.13: async_cpu_to_gpu flows)"
    elif "baseTimeNanoseconds" in meta:
        era = "2024+ (PyTorch >= 2.4: relative ts with baseTimeNanoseconds)"
    elif counts.get("ns_decimals"):
        era = "2024-04 (absolute us with ns decimals)"
    else:
        era = "2023 (PyTorch 2.0-2.3: integer us, absolute)"
    return era + (", ROCm" if rocm else "")


# The staged event columns (_BATCH_SELECT): equal in all of them, two events are duplicates.
_STAGED = (
    "ph, cat, name, pid, tid, ts_ns, dur_ns, external_id, correlation, ev_idx, device, stream, grid, block, "
    "bytes, cbid, input_dims, meta_value, flow_id, flow_bp"
).split(", ")
OTHER_CLOCK_NS = 24 * 3600 * 10**9  # an event this far from the trace's median time is on another clock


def _damage(con: duckdb.DuckDBPyConnection, path: str, staged: str, counts: dict[str, Any], info: SourceInfo) -> str:
    """The SELECT of the events kept, leaving out damaged ones, each kind counted in ``info.dropped`` and
    warned about: negative durations, events on another clock, exact duplicates (of events other than
    metadata, which Kineto itself repeats). Link ids that are not 64-bit integers are read as NULL and
    counted."""
    where = ["NOT dropped"]
    if counts["negative_dur"]:
        where.append("(dur_ns IS NULL OR dur_ns >= 0)")
        info.dropped["negative_duration"] = int(counts["negative_dur"])
        info.warnings.append(f"{path}: {counts['negative_dur']} events with a negative duration: dropped")
    spread = (counts["max_ts"] or 0) - (counts["min_ts"] or 0)
    if spread > OTHER_CLOCK_NS:  # the median is only needed when the times span more than a day
        # the median of the complete events' times, else of all times (a trace of instants and metadata)
        (median,) = con.execute(
            f"SELECT coalesce(quantile_disc(ts_ns, 0.5) FILTER (WHERE ph = 'X'), quantile_disc(ts_ns, 0.5)) "
            f"FROM {staged} WHERE NOT dropped AND ts_ns <> 0"
        ).fetchone()
        (far,) = con.execute(
            f"SELECT count(*) FROM {staged} WHERE NOT dropped AND ts_ns <> 0 AND abs(ts_ns - {median}) > "
            f"{OTHER_CLOCK_NS}"
        ).fetchone()
        if far:
            where.append(f"(ts_ns = 0 OR abs(ts_ns - {median}) <= {OTHER_CLOCK_NS})")
            info.dropped["another_clock"] = int(far)
            info.warnings.append(
                f"{path}: {far} events more than 24 h from the trace's median time (another clock): dropped"
            )
    if counts["bad_link"]:
        info.dropped["link_id_not_int64"] = int(counts["bad_link"])
        info.warnings.append(
            f"{path}: {counts['bad_link']} events carry an External id or correlation that is not a 64-bit "
            "integer: read as NULL, so those events are not linked"
        )
    select = f"SELECT * EXCLUDE (dropped, bad_link) FROM {staged} WHERE {' AND '.join(where)}"
    # Kineto repeats some metadata (M) events as written; duplicates of real events are damage
    events = f"SELECT * FROM ({select}) WHERE ph IS DISTINCT FROM 'M'"
    dups = 0
    if counts["distinct_events"] < counts["events"]:  # the row hashes say so: count exactly
        (dups,) = con.execute(
            f"SELECT count(*) - (SELECT count(*) FROM (SELECT DISTINCT * FROM ({events}))) FROM ({events})"
        ).fetchone()
    if dups:
        info.dropped["duplicate_events"] = int(dups)
        info.warnings.append(f"{path}: {dups} exact duplicate events: dropped (each kept once)")
        select = f"SELECT DISTINCT * FROM ({events}) UNION ALL SELECT * FROM ({select}) WHERE ph = 'M'"
    return select


def staged_counts(con: duckdb.DuckDBPyConnection, staged: str) -> dict[str, Any]:
    """The counts ``_finalize`` reads off DuckDB's staged events (the compiled reader makes the same)."""
    names = [
        "read",
        "dropped_py",
        "x",
        "zero_ts",
        "python",
        "ns_decimals",
        "instants",
        "meta",
        "other_ph",
        "capitalised_cats",
        "old_flows",
        "max_x_ts",
        "negative_dur",
        "bad_link",
        "min_ts",
        "max_ts",
        "events",
        "null_ts",
        "distinct_events",
    ]
    return dict(
        zip(
            names,
            con.execute(
                f"""
                SELECT count(*),
                       count(*) FILTER (WHERE dropped),
                       count(*) FILTER (WHERE NOT dropped AND ph = 'X'),
                       count(*) FILTER (WHERE NOT dropped AND ph = 'X' AND ts_ns = 0),
                       count(*) FILTER (WHERE NOT dropped AND cat = 'python_function'),
                       count(*) FILTER (WHERE ts_ns % 1000 <> 0),
                       count(*) FILTER (WHERE ph IN ('i', 'I')),
                       count(*) FILTER (WHERE ph = 'M'),
                       count(*) FILTER (WHERE ph NOT IN ('X', 'i', 'I', 'M', 's', 'f', 't')),
                       count(*) FILTER (WHERE old_cat),
                       count(*) FILTER (WHERE ph IN ('s', 'f') AND name IN ('async_cpu_to_gpu', 'async_gpu')),
                       max(ts_ns) FILTER (WHERE ph = 'X'),
                       count(*) FILTER (WHERE NOT dropped AND dur_ns < 0),
                       count(*) FILTER (WHERE bad_link),
                       min(ts_ns) FILTER (WHERE NOT dropped AND ts_ns <> 0),
                       max(ts_ns) FILTER (WHERE NOT dropped AND ts_ns <> 0),
                       count(*) FILTER (WHERE NOT dropped AND ph <> 'M'),
                       count(*) FILTER (WHERE NOT dropped AND ph = 'X' AND ts_ns IS NULL),
                       count(DISTINCT hash({", ".join(_STAGED)})) FILTER (WHERE NOT dropped AND ph <> 'M')
                FROM {staged}
                """
            ).fetchone(),
            strict=True,
        )
    )


def finalize(
    con: duckdb.DuckDBPyConnection,
    path: str,
    scratch: Path,
    stage: Path,
    part: int,
    info: SourceInfo,
    fast: kineto_fast.FastResult | None,
) -> None:
    """Write the tables from the staged events: DuckDB's staging of every event, or the compiled reader's
    (``ops`` and ``flows`` already written; kernels, annotations and metadata events staged)."""
    meta = info.details.pop("metadata")
    array_form = info.details.pop("array_form")
    base = meta.get("baseTimeNanoseconds")
    if base is not None and not isinstance(base, int):
        raise TraceFormatError(path, "baseTimeNanoseconds", f"expected an integer, found {base!r}")
    base_ns = int(base or 0)
    if base is not None:
        check_wall_clock(path, "baseTimeNanoseconds", base_ns / 1e9, "the trace's clock base")
    staged = f"read_parquet('{scratch}/ev-*.parquet')"
    hybrid = fast is not None and bool(fast.declined)  # DuckDB staged the pieces the compiled reader declined
    if fast is not None:
        counts: dict[str, Any] = dict(fast.counts) | {"distinct_events": fast.distinct_events}
        theirs = fast.declined_counts  # the declined pieces' staging (kineto._read_declined), else empty
        if hybrid:
            names = list(counts)
            counts = kineto_fast.merge_counts(names, [[counts[k] for k in names], [theirs[k] for k in names]])
    else:
        counts = theirs = staged_counts(con, staged)
    if counts["dropped_py"]:
        info.dropped["python_function (not asked for)"] = int(counts["dropped_py"])
    if counts["read"] == counts["meta"]:
        what = f"only {counts['meta']} metadata events" if counts["meta"] else "the array is empty"
        raise TraceFormatError(path, "traceEvents", f"no trace events ({what})")
    # the damage in DuckDB's staging: all of it, or the declined pieces' (the read ones have none to drop but
    # may hold link ids that are not 64-bit integers, counted with the rest)
    keep = _damage(con, path, staged, (theirs or counts) | {"bad_link": counts["bad_link"]}, info)
    has_real = (counts["max_x_ts"] or 0) > 0
    # Zeroed timestamps (pytorch/pytorch#188481) are dropped when the rest of the trace has real times.
    drop_zero = "AND ts_ns <> 0" if has_real else ""
    if has_real and counts["zero_ts"]:
        info.dropped["zero_timestamp"] = counts["zero_ts"]
    if has_real and counts["null_ts"]:  # (the same condition, ts_ns <> 0, leaves them out)
        info.dropped["no_timestamp"] = counts["null_ts"]
    if counts["instants"]:
        info.dropped["instant_events"] = counts["instants"]
    if counts["other_ph"]:
        info.dropped["other_phases"] = counts["other_ph"]
    # The kept events each table is made from (DuckDB's staging: times relative to the clock base).
    if fast is None:
        con.execute(f"CREATE OR REPLACE VIEW raw AS {keep}")
        sources = {
            "k_src": f"SELECT * FROM raw WHERE ph = 'X' AND cat IN {GPU_CATS} {drop_zero}",
            "a_src": f"SELECT * FROM raw WHERE ph = 'X' AND cat IN {ANNOTATION_CATS} {drop_zero}",
            "m_src": "SELECT * FROM raw WHERE ph = 'M'",
            "l_src": "SELECT * FROM raw WHERE ph = 'X'",
            "launch_src": f"SELECT name, pid, tid, ts_ns, correlation FROM raw WHERE ph = 'X' AND {_LAUNCH_FILTER}",
        }
    else:  # the compiled reader left no damage to drop (else the DuckDB path was taken)

        def files(paths: list[Path]) -> str:
            return "read_parquet([" + ", ".join(f"'{p}'" for p in paths) + "])"

        ops_files = f"read_parquet('{stage}/ops/part-{part:05d}.*parquet')"
        # the compiled reader's rows carry the clock base already: ops and flows the document's, the staged ones the
        # base it read them with (0 where the document gives its base only after the events: kineto_stream)
        late = base_ns - fast.base_ns
        moved_by = f" REPLACE (ts_ns + {late} AS ts_ns)" if late else ""
        sources = {
            "k_src": f"SELECT *{moved_by} FROM {files(fast.staged['kernels'])}",
            "a_src": f"SELECT *{moved_by} FROM {files(fast.staged['annotations'])}",
            "m_src": f"SELECT * FROM {files(fast.staged['meta'])}",
            "l_src": f"SELECT cat, name, pid, tid, ts_ns, correlation FROM {ops_files}",
            "launch_src": f"SELECT *{moved_by} FROM {files(fast.staged['launches'])}",
        }
        if hybrid:  # the declined pieces' kept events join them, moved onto the same clock
            con.execute(
                f"CREATE OR REPLACE VIEW raw AS SELECT * REPLACE (ts_ns + {base_ns} AS ts_ns), ts_ns = 0 AS was_zero "
                f"FROM ({keep})"
            )
            drop_zero = "AND NOT was_zero" if has_real else ""
            them = "UNION ALL BY NAME SELECT * EXCLUDE (was_zero) FROM raw WHERE"
            sources["k_src"] += f" {them} ph = 'X' AND cat IN {GPU_CATS} {drop_zero}"
            sources["a_src"] += f" {them} ph = 'X' AND cat IN {ANNOTATION_CATS} {drop_zero}"
            sources["m_src"] += f" {them} ph = 'M'"
            sources["l_src"] += " UNION ALL SELECT cat, name, pid, tid, ts_ns, correlation FROM raw WHERE ph = 'X'"
            sources["launch_src"] += (
                f" UNION ALL SELECT name, pid, tid, ts_ns, correlation FROM raw WHERE ph = 'X' AND {_LAUNCH_FILTER}"
            )
    shift = base_ns if fast is None else 0  # added to the times below
    for view, select in sources.items():
        con.execute(f"CREATE OR REPLACE VIEW {view} AS {select}")
    lanes = con.execute(
        "SELECT name, pid, tid, meta_value FROM m_src WHERE meta_value IS NOT NULL ORDER BY ALL"
    ).fetchall()

    names = con.execute("SELECT DISTINCT name, cat FROM k_src").fetchall()
    classes, variants = classify_pairs([r[0] for r in names], [r[1] for r in names])
    # lists in, not an Arrow table: pyarrow builds one from Python lists only after importing pandas (0.2 s)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE kernel_classes AS "
        "SELECT unnest(?::VARCHAR[]) AS name, unnest(?::VARCHAR[]) AS cat, unnest(?::VARCHAR[]) AS kernel_class, "
        "unnest(?::VARCHAR[]) AS attention_variant",
        [[r[0] for r in names], [r[1] for r in names], classes, variants],
    )

    for table in ("kernels", "ops", "annotations", "flows"):
        (stage / table).mkdir(parents=True, exist_ok=True)
    out = {t: stage / t / f"part-{part:05d}.parquet" for t in ("kernels", "ops", "annotations", "flows")}
    moved = {"ts_ns": f"ts_ns + {shift}"}  # every table's start, on the epoch clock
    table_rows: dict[str, int] = {}
    kernel_exprs = {
        **{c: f"k.{c}" for c in KERNELS.names},
        "part": str(part),
        "device": "coalesce(k.device, TRY_CAST(k.pid AS BIGINT))",
        "stream": "coalesce(k.stream, TRY_CAST(regexp_extract(k.tid, '(\\d+)', 1) AS BIGINT))",
        "ts_ns": f"k.ts_ns + {shift}",
        "kernel_class": "c.kernel_class",
        "attention_variant": "c.attention_variant",
        "launch_name": "n.name",
        "launch_ts_ns": f"l.launch_ts_ns + {shift}",
        "launch_pid": "n.pid",
        "launch_tid": "n.tid",
        "cuda_graph": "coalesce(n.graph, false)",
        "orphan": "l.correlation IS NULL",
    }
    con.execute(_LINKS)  # each launch once, and each correlation id's GPU ops (read once, used twice)
    table_rows["kernels"] = con.execute(
        f"""
        COPY (
          SELECT {_columns(KERNELS, kernel_exprs)}
          FROM k_src k
          LEFT JOIN kernel_classes c ON c.name = k.name AND c.cat = k.cat
          LEFT JOIN links l ON l.correlation = k.correlation
          LEFT JOIN launch_lanes n ON n.lane = l.lane
        ) TO '{out["kernels"]}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 16384)
        """
    ).fetchone()[0]
    (shared,) = con.execute("SELECT coalesce(sum(ops), 0) FROM shared_links").fetchone()
    if shared:
        info.dropped["gpu_ops_sharing_one_launch"] = int(shared)
        info.warnings.append(
            f"{path}: {shared:,} GPU ops share the correlation id of one launch that is not a graph launch (each "
            "such launch runs one op): their links are dropped and they are placed by time (orphans)"
        )
    _launches_without_gpu_op(con, path, info)
    on_gpu = {"on_gpu": "cat = 'gpu_user_annotation'"}
    table_rows["annotations"] = con.execute(
        f"""
        COPY (
          SELECT {_columns(ANNOTATIONS, {"part": str(part)} | moved | on_gpu)}
          FROM a_src
          ORDER BY ts_ns, dur_ns DESC
        ) TO '{out["annotations"]}' (FORMAT parquet, COMPRESSION zstd)
        """
    ).fetchone()[0]
    if fast is not None:
        table_rows["ops"], table_rows["flows"] = fast.rows["ops"], fast.rows["flows"]
    if fast is None or hybrid:
        if hybrid:  # beside the compiled reader's files (the glob part-N.*parquet takes them all)
            out["ops"], out["flows"] = (stage / t / f"part-{part:05d}.duckdb.parquet" for t in ("ops", "flows"))
        table_rows["ops"] = (
            table_rows.get("ops", 0)
            + con.execute(
                f"""
            COPY (
              SELECT {_columns(OPS, {"part": str(part)} | moved)}
              FROM raw
              WHERE ph = 'X' AND cat NOT IN {GPU_CATS} AND cat NOT IN {ANNOTATION_CATS} {drop_zero}
            ) TO '{out["ops"]}' (FORMAT parquet, COMPRESSION zstd)
            """
            ).fetchone()[0]
        )
        flow = {"part": str(part), "flow_id": "TRY_CAST(flow_id AS BIGINT)", "bp": "flow_bp"} | moved
        table_rows["flows"] = (
            table_rows.get("flows", 0)
            + con.execute(
                f"""
            COPY (
              SELECT {_columns(FLOWS, flow)}
              FROM raw WHERE ph IN ('s', 'f', 't')
            ) TO '{out["flows"]}' (FORMAT parquet, COMPRESSION zstd)
            """
            ).fetchone()[0]
        )
    table_rows = {t: table_rows[t] for t in ("kernels", "ops", "annotations", "flows")}
    info.records = int(counts["read"])
    info.version = _version(meta, counts, array_form)
    info.details |= {
        "size_bytes": os.path.getsize(path),
        "rows": table_rows,
        "clock": {
            "unit": "ns",
            "base_ns": base_ns,
            "origin": "baseTimeNanoseconds + ts" if base is not None else "absolute ts as written",
        },
        "rank": (meta.get("distributedInfo") or {}).get("rank"),
        "devices": [
            {k: d.get(k) for k in ("id", "name", "totalGlobalMem", "computeMajor", "computeMinor", "numSms")}
            for d in meta.get("deviceProperties") or []
            if isinstance(d, dict)
        ],
        "trace_metadata": {
            k: v
            for k, v in meta.items()
            if k not in ("deviceProperties", "distributedInfo", "traceEvents") and not isinstance(v, (dict, list))
        }
        | {k: meta[k] for k in ("vllm_version", "vllm_version_tuple") if k in meta},
        "lanes": [{"kind": r[0], "pid": r[1], "tid": r[2], "value": r[3]} for r in lanes],
        "python_function_events_kept": int(counts["python"]),
    }

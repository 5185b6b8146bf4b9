"""A Prometheus export's samples across a run's files: one row per sample, and counters that only grow.

An export taken one query per family (a file each) gives each file its own columns of the same samples:
``merge_samples`` makes them one ``engine_stats`` row per replica and time. A counter that falls was reset
(the server restarted).

Each reader undoes the resets inside its own file (``lltrace.parsers.prometheus_api.monotone``); this step
undoes those between files: a week exported one day per file, or a folder of ``/metrics`` scrapes across a
restart. Each series' files are taken in the order of their first sample; where one starts below where the
previous one ended, it and every later file of that series are read on top of the value before the fall (as
PromQL's ``increase()`` does). After it every cumulative column of ``engine_stats`` and every bucket of
``engine_histograms`` only grows over the run, so the change between two samples is what happened between them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from lltrace.parsers.prometheus import CUMULATIVE

if TYPE_CHECKING:  # polars is imported where counters are stitched (at import it costs 0.12 s and 25 MB on every
    import polars as pl  # ingest, a profiler trace's included)

# table -> (the series' key columns, its cumulative value columns)
_SERIES = {
    "engine_stats": (("engine",), tuple(sorted(CUMULATIVE))),
    "engine_histograms": (("engine", "metric", "le"), ("count",)),
}


def stitch(stage: Path) -> dict[str, int]:
    """Undo the counter resets between the staged files of a run, in place; returns the resets undone per
    column (``engine_histograms.count`` for every bucket together)."""
    out: dict[str, int] = {}
    for table, (keys, values) in _SERIES.items():
        files = sorted((stage / table).glob("part-*.parquet"))
        if len(files) < 2:
            continue
        import polars as pl

        con = duckdb.connect()
        try:
            rows = f"read_parquet({[str(f) for f in files]!r})"
            key = ", ".join(keys)
            offsets = []
            for col in values:
                ends = con.sql(
                    f"""
                    SELECT {key}, part, min(ts_s) AS first_s, arg_min({col}, ts_s) AS first,
                           arg_max({col}, ts_s) AS last
                    FROM {rows} WHERE ts_s IS NOT NULL AND {col} IS NOT NULL
                    {"AND source = 'prometheus'" if table == "engine_stats" else ""}
                    GROUP BY ALL
                    """
                ).to_arrow_table()
                ends = pl.from_arrow(ends)
                if ends.height < 2:
                    continue
                ends = ends.sort([*keys, "first_s", "part"], nulls_last=True).with_columns(
                    prev=pl.col("last").shift(1).over(list(keys), order_by=["first_s", "part"])
                )
                ends = ends.with_columns(fall=pl.col("first") < pl.col("prev"))
                falls = int(ends["fall"].sum())
                if not falls:
                    continue
                out[f"{table}.{col}"] = falls
                offsets.append(
                    ends.with_columns(
                        offset=pl.when(pl.col("fall"))
                        .then(pl.col("prev"))
                        .otherwise(0.0)
                        .cum_sum()
                        .over(list(keys), order_by=["first_s", "part"]),
                        column=pl.lit(col),
                    ).select(*keys, "part", "column", "offset")
                )
            if offsets:
                _rewrite(con, files, keys, pl.concat(offsets))
        finally:
            con.close()
    return out


def _rewrite(con: duckdb.DuckDBPyConnection, files: list[Path], keys: tuple[str, ...], offsets: pl.DataFrame) -> None:
    """Each staged file with a non-zero offset for some series: those series' values raised by it."""
    import polars as pl

    offsets = offsets.filter(pl.col("offset") != 0)
    match = " AND ".join(f"o.{k} IS NOT DISTINCT FROM t.{k}" for k in keys)
    for path in files:
        part = int(path.stem.split("-")[1])
        mine = offsets.filter(pl.col("part") == part)
        if not mine.height:
            continue
        con.register("offsets", mine.to_arrow())
        raised = ", ".join(
            f"t.{c} + coalesce((SELECT o.offset FROM offsets o WHERE o.column = '{c}' AND {match}), 0) AS {c}"
            for c in mine["column"].unique().to_list()
        )
        tmp = path.with_suffix(".stitched")
        con.execute(f"COPY (SELECT t.* REPLACE ({raised}) FROM read_parquet('{path}') t) TO '{tmp}' (FORMAT parquet)")
        con.unregister("offsets")
        tmp.replace(path)


def merge_samples(stage: Path) -> tuple[int, int]:
    """One ``engine_stats`` row per replica and sample time across a run's files: a Prometheus export taken one
    query per family (one file each) gives each file its own columns of the same samples; rows of one engine,
    instance and time from several files become one, in the first of those files. A column two files give
    different values for is NULL (which holds is unknown). Returns (samples merged, values NULLed so)."""
    files = sorted((stage / "engine_stats").glob("part-*.parquet"))
    if len(files) < 2:
        return 0, 0
    con = duckdb.connect()
    try:
        rows = f"read_parquet({[str(f) for f in files]!r})"
        key = "engine, instance, ts_s"
        shared = f"""
            SELECT {key} FROM {rows} WHERE source = 'prometheus' AND ts_s IS NOT NULL
            GROUP BY ALL HAVING count(DISTINCT part) > 1
        """
        n = con.execute(f"SELECT count(*) FROM ({shared})").fetchone()[0]
        if not n:
            return 0, 0
        columns = list(con.sql(f"SELECT * FROM {rows} LIMIT 0").columns)
        values = [c for c in columns if c not in ("part", "engine", "instance", "ts_s")]
        merged = ", ".join(
            "min(part) AS part"
            if c == "part"
            else c
            if c in ("engine", "instance", "ts_s")
            else f"CASE WHEN count(DISTINCT {c}) > 1 THEN NULL ELSE any_value({c}) END AS {c}"
            for c in columns
        )
        con.execute(
            f"""
            CREATE TABLE merged AS
            WITH s AS ({shared}),
            k AS (SELECT r.* FROM {rows} r SEMI JOIN s ON r.engine IS NOT DISTINCT FROM s.engine
                  AND r.instance IS NOT DISTINCT FROM s.instance AND r.ts_s = s.ts_s WHERE r.source = 'prometheus')
            SELECT {merged}, {" + ".join(f"(count(DISTINCT {c}) > 1)::INT" for c in values)} AS conflicts
            FROM k GROUP BY {key}
            """
        )
        conflicts = con.execute("SELECT coalesce(sum(conflicts), 0) FROM merged").fetchone()[0]
        con.execute(
            f"""
            CREATE TABLE kept AS
            SELECT r.* FROM {rows} r ANTI JOIN merged m ON r.engine IS NOT DISTINCT FROM m.engine
                AND r.instance IS NOT DISTINCT FROM m.instance AND r.ts_s = m.ts_s AND r.source = 'prometheus'
            """
        )
        order = ", ".join(columns)
        before = dict(con.execute(f"SELECT part, count(*) FROM {rows} GROUP BY part").fetchall())
        after = dict(con.execute("SELECT part, count(*) FROM kept GROUP BY part").fetchall())
        into = {p for (p,) in con.execute("SELECT DISTINCT part FROM merged").fetchall()}
        for path in files:
            part = int(path.stem.split("-")[1])
            if part not in into and after.get(part, 0) == before.get(part, 0):
                continue
            tmp = path.with_suffix(".merged")
            con.execute(
                f"""
                COPY (SELECT {order} FROM (SELECT * FROM kept WHERE part = {part}
                                           UNION ALL BY NAME SELECT * EXCLUDE (conflicts) FROM merged
                                           WHERE part = {part})
                      ORDER BY engine, ts_s) TO '{tmp}' (FORMAT parquet)
                """
            )
            tmp.replace(path)
    finally:
        con.close()
    return n, int(conflicts)

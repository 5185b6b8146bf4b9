"""Physical checks on every staged value, in one place for every format, before the run is committed.

The limits are those ``lltrace.tables`` declares once per column (range, whole numbers, the words a text
column may hold; every float must be finite) and per table (row rules such as ``ttft_s <= e2e_s``). A value
that breaks one is set to NULL, never used as if it were right, and counted per table, column, rule and
source; the counts go to the run metadata (``checks``) and into one warning per table, or, with
``--strict``, the first violation is the one-line error. Checked after the run is assembled, so derived
columns (a first-token time from a negative TTFT) are held to the same laws as the values read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lltrace.errors import TraceFormatError
from lltrace.parsers._io import FRACTIONAL
from lltrace.tables import TABLES, Column, Table

_BECOMES = {"_bench": "requests", "_spans": "requests"}  # staging tables, by the table their rows become


@dataclass(frozen=True)
class _Check:
    rule: str  # as written in the metadata: "finite", ">= 0", "<= 1", "whole number", "one of ...", "a <= b"
    columns: tuple[str, ...]  # the columns the rule reads
    broken: Callable[[pa.Table], pa.ChunkedArray]  # true where the row breaks the rule (NULL: cannot tell)
    nulls: tuple[str, ...] = ()  # the columns NULLed where it is broken (default: those it reads)

    @property
    def nulled(self) -> tuple[str, ...]:
        return self.nulls or self.columns


def _finite(x: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.is_finite(x)


def _column_checks(c: Column) -> list[_Check]:
    out: list[_Check] = []
    n = c.name
    numeric = pa.types.is_floating(c.type) or pa.types.is_integer(c.type)
    if pa.types.is_floating(c.type):
        out.append(_Check("finite", (n,), lambda t, n=n: pc.invert(_finite(t[n]))))
    if numeric and c.lo is not None:
        lo = c.lo
        out.append(_Check(f">= {lo:g}", (n,), lambda t, n=n, lo=lo: pc.less(t[n], lo)))
    if numeric and c.hi is not None:
        hi = c.hi
        out.append(_Check(f"<= {hi:g}", (n,), lambda t, n=n, hi=hi: pc.greater(t[n], hi)))
    if c.whole and pa.types.is_floating(c.type):
        out.append(_Check("whole number", (n,), lambda t, n=n: pc.not_equal(t[n], pc.floor(t[n]))))
    if c.values and pa.types.is_string(c.type):
        allowed = pa.array(list(c.values))
        out.append(
            _Check(
                "one of " + "|".join(c.values),
                (n,),
                lambda t, n=n, a=allowed: pc.and_kleene(pc.is_valid(t[n]), pc.invert(pc.is_in(t[n], value_set=a))),
            )
        )
    return out


def _checks(table: Table, present: set[str]) -> list[_Check]:
    out = [k for c in table.columns if c.name in present for k in _column_checks(c)]
    for r in table.rules:
        if r.lhs in present and r.rhs in present:
            out.append(_Check(r.name, (r.lhs, r.rhs), lambda t, r=r: pc.greater(t[r.lhs], t[r.rhs]), r.nulled))
    return out


def _mask(t: pa.Table, k: _Check) -> pa.ChunkedArray:
    """Where the row breaks ``k`` (NULL read as not broken: a missing value breaks nothing), over finite
    values only for the range and row rules, so an infinity is counted once, as not finite."""
    broken = k.broken(t)
    if k.rule != "finite":
        for n in k.columns:
            if pa.types.is_floating(t.schema.field(n).type):
                broken = pc.and_kleene(broken, _finite(t[n]))
    return pc.fill_null(broken, False)


def check_stage(stage: Path, sources: list[dict[str, Any]], *, strict: bool = False) -> dict[str, Any]:
    """Enforce the declared limits on every canonical table staged in ``stage``; returns the ``checks``
    metadata (rules checked, violations with counts). Raises ``TraceFormatError`` under ``strict``."""
    paths = {s["part"]: s["path"] for s in sources}
    only = sources[0]["path"] if len(sources) == 1 else None  # a table without parts, from one file
    violations: list[dict[str, Any]] = []
    checked: set[tuple[str, str, tuple[str, ...]]] = set()  # (table, rule, columns): not per file
    for table in TABLES.values():
        for f in sorted((stage / table.name).glob("*.parquet")) if (stage / table.name).is_dir() else []:
            schema = pq.read_schema(f)
            checks = _checks(table, set(schema.names))
            if not checks:
                continue
            checked |= {(table.name, k.rule, k.columns) for k in checks}
            needed = sorted({n for k in checks for n in k.columns} | ({"part"} & set(schema.names)))
            t = pq.read_table(f, columns=needed)
            masks = [(k, _mask(t, k)) for k in checks if len(k.columns) == 1]
            for k in (k for k in checks if len(k.columns) > 1):  # a row rule, on values that passed their own
                m = _mask(t, k)
                for ck, cm in masks:
                    if ck.columns[0] in k.columns:
                        m = pc.and_(m, pc.invert(cm))
                masks.append((k, m))
            masks = [(k, m) for k, m in masks if pc.any(m).as_py()]
            if not masks:
                continue
            for k, m in masks:
                parts = t["part"].filter(m).to_pylist() if "part" in t.column_names else [None]
                for part in sorted(set(parts), key=lambda p: -1 if p is None else p):
                    count = parts.count(part) if part is not None else int(pc.sum(m).as_py())
                    where = paths.get(part) if part is not None else only
                    v = {"table": table.name, "columns": list(k.columns), "rule": k.rule, "rows": count}
                    violations.append(v | {"part": part, "source": where})
                    if strict:
                        name = f"{table.name}.{'/'.join(k.columns)}"
                        raise TraceFormatError(where or str(stage.name), name, f"{count} values break {k.rule}")
            _null(f, masks)
    staged = stage / FRACTIONAL  # whole-number columns given fractions, NULLed as the parsers wrote them
    if staged.is_file():
        for line in staged.read_text().splitlines():
            f = json.loads(line)
            table = _BECOMES.get(f["table"], f["table"])
            v = {"table": table, "columns": [f["column"]], "rule": "whole number", "rows": f["rows"]}
            violations.append(v | {"part": f["part"], "source": paths.get(f["part"])})
            if strict:
                raise TraceFormatError(
                    paths.get(f["part"]) or stage.name,
                    f"{table}.{f['column']}",
                    f"{f['rows']} values break whole number",
                )
        staged.unlink()
    return {
        "rules_checked": len(checked),
        "violations": violations,
        "values_nulled": sum(v["rows"] for v in violations),
    }


def _null(f: Path, masks: list[tuple[_Check, pa.ChunkedArray]]) -> None:
    """Rewrite one staged file with each broken rule's columns NULL where the row breaks it."""
    full = pq.read_table(f)
    schema = full.schema
    for name in {n for k, _ in masks for n in k.nulled if n in schema.names}:
        hit = None
        for k, m in masks:
            if name in k.nulled:
                hit = m if hit is None else pc.or_(hit, m)
        col = full[name]
        nulled = pc.if_else(hit, pa.scalar(None, type=col.type), col)
        full = full.set_column(schema.get_field_index(name), schema.field(name), nulled)
    pq.write_table(full, f)


def warnings_for(checks: dict[str, Any]) -> list[str]:
    """One line per table: how many values broke which rule, set to NULL."""
    by_table: dict[str, list[dict[str, Any]]] = {}
    for v in checks["violations"]:
        by_table.setdefault(v["table"], []).append(v)
    out = []
    for name, vs in by_table.items():
        sources = sorted({v["source"] for v in vs if v["source"]})
        rules = ", ".join(f"{'/'.join(v['columns'])} {v['rule']}: {v['rows']:,}" for v in vs)
        where = f"{', '.join(sources)}: " if sources else ""
        total = sum(v["rows"] for v in vs)
        out.append(f"{where}{name}: {total:,} rows break physical limits, those values set to NULL ({rules})")
    return out

"""SQL over the run store, one concept per ``.sql`` file, and the thresholds every rule reads.

Every file starts with a header: ``-- <name>: what it answers``, ``-- requires: <tables, views or none>``,
and one ``--   column  unit/meaning`` line per output column (``--   requests.*`` stands for every column of
a canonical table, ``lltrace.tables``). A file defines one view, or one macro: a scalar one
(``latency_stats``) or a table one, rows for its arguments (``engine_windows(width_s, from_s, to_s)``).

``thresholds.csv`` holds every threshold lltrace's rules use, SQL and Python alike: ``thresholds()`` reads it,
and ``install_views`` defines each as a DuckDB macro ``threshold_<name>()`` the views call.

``install_views`` creates the views in dependency order. The store guarantees their inputs (every
canonical table, every column); a view that still does not bind is a ``QueryError`` naming the view and
what it lacks, never a view silently missing.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import duckdb

from lltrace.errors import QueryError


@dataclass(frozen=True)
class QueryFile:
    """One packaged .sql file and what it needs."""

    name: str
    requires: tuple[str, ...]
    text: str
    kind: str  # view | macro


@lru_cache(maxsize=1)
def query_files() -> tuple[QueryFile, ...]:
    """All packaged query files, sorted by name."""
    out = []
    for entry in sorted(resources.files("lltrace.queries").iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".sql"):
            continue
        text = entry.read_text()
        m = re.search(r"^-- requires:(.*)$", text, re.MULTILINE)
        words = [r.strip() for r in m.group(1).split(",")] if m else []
        requires = tuple(w for w in words if w and w != "none")
        kind = "macro" if re.search(r"^CREATE OR REPLACE MACRO ", text, re.MULTILINE) else "view"
        out.append(QueryFile(entry.name[:-4], requires, text, kind))
    return tuple(out)


@lru_cache(maxsize=1)
def thresholds() -> dict[str, float]:
    """Every threshold of lltrace's rules, by name (``thresholds.csv``: value, unit, who reads it, meaning)."""
    text = resources.files("lltrace.queries").joinpath("thresholds.csv").read_text()
    return {r["name"]: float(r["value"]) for r in csv.DictReader(text.splitlines())}


def _relations(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def _needed(names: Sequence[str], files: dict[str, QueryFile]) -> list[str]:
    """``names`` and every query they depend on, dependencies first."""
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in order or name not in files:
            return
        if name in path:
            raise QueryError(f"queries/{name}.sql: its requires line makes a cycle ({' -> '.join(path + (name,))})")
        for dep in files[name].requires:
            visit(dep, path + (name,))
        order.append(name)

    for n in names:
        if n not in files:
            raise QueryError(f"no query named {n!r}; queries: {', '.join(sorted(files))}")
        visit(n, ())
    return order


def install_views(con: duckdb.DuckDBPyConnection, views: Sequence[str] | None = None) -> list[str]:
    """Create the thresholds' macros and the packaged views (all, or ``views`` and what they depend on) on
    ``con``, whose tables are the canonical tables; returns the names created, in order.

    Raises ``QueryError`` naming the view when a table it requires is not there or it does not bind.
    """
    for name, value in thresholds().items():
        con.execute(f"CREATE OR REPLACE MACRO threshold_{name}() AS {value!r}")
    files = {q.name: q for q in query_files()}
    have = _relations(con)
    created: list[str] = []
    for name in _needed(list(files) if views is None else list(views), files):
        q = files[name]
        missing = [r for r in q.requires if r not in have and r not in files]
        if missing:
            raise QueryError(f"queries/{name}.sql: needs {', '.join(missing)}, which this connection does not have")
        try:
            con.execute(q.text)
        except duckdb.Error as exc:
            first = str(exc).splitlines()[0]
            raise QueryError(f"queries/{name}.sql: {q.kind} {name} does not bind: {first}") from None
        have.add(name)
        created.append(name)
    return created

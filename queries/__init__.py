"""SQL views over the run store, one concept per ``.sql`` file.

Every file starts with a header: ``-- <view name>: what it answers``, ``-- requires: <tables or views>``,
and one ``--   column  unit/meaning`` line per output column. ``install_views`` creates the views whose
requirements exist, in dependency order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import duckdb


@dataclass(frozen=True)
class QueryFile:
    """One packaged .sql file and what it needs."""

    name: str
    requires: tuple[str, ...]
    text: str


def query_files() -> list[QueryFile]:
    """All packaged query files, sorted by name."""
    out = []
    for entry in sorted(resources.files("lltrace.queries").iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".sql"):
            continue
        text = entry.read_text()
        m = re.search(r"^-- requires:(.*)$", text, re.MULTILINE)
        requires = tuple(r.strip() for r in m.group(1).split(",") if r.strip()) if m else ()
        out.append(QueryFile(entry.name[:-4], requires, text))
    return out


def install_views(con: duckdb.DuckDBPyConnection, available: list[str]) -> list[str]:
    """Create every view whose requirements are available; returns the names created."""
    have = set(available)
    pending = query_files()
    created: list[str] = []
    progress = True
    while pending and progress:
        progress = False
        for q in list(pending):
            if all(r in have for r in q.requires):
                pending.remove(q)
                progress = True
                try:
                    con.execute(q.text)
                except duckdb.BinderException:
                    continue  # the runs in view lack a column this query needs: no such view for them
                have.add(q.name)
                created.append(q.name)
    return created

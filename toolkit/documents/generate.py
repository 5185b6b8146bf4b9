"""Writes ``rows.py``: the row types of the query views the documents carry, from the views themselves.

A view's columns are declared once, in its ``.sql`` file (the header names each column and says what it means;
DuckDB says its type). The documents carry some views' rows as they are (``SELECT * EXCLUDE (run_id) FROM view``),
so their row types are written from those declarations rather than declared a second time by hand. Run
``python -m lltrace.documents.generate`` after changing such a view; a test checks ``rows.py`` is what this writes.

A maintainer's tool: it reads the queries and the canonical tables, which the documents package itself never
imports.
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

ROWS = Path(__file__).with_name("rows.py")

VIEWS: dict[str, tuple[str, ...]] = {
    # view -> the columns the documents leave out of its rows (run_id always)
    "requests_summary": (),
    "attribution_run": (),
    "attribution_client": (),
    "attribution_tail": (),
    "requests_errors": ("outcome",),
    "workload_mix": (),
    "engine_speculative": (),
    "engine_latency_histograms": (),
    "engine_replicas": (),
    "engine_histogram_quantiles": (),
    "engine_queue_causes": (),
    "engine_prefix_cache": (),
    "profiler_steps_by_kind": ("source",),
    "profiler_phase_share": ("source",),
    "profiler_kernel_time": (),
    "profiler_gpu_busy": (),
    "profiler_attention_variant": (),
}
"""The views whose rows a document carries."""

_PY = {"DOUBLE": "float", "VARCHAR": "str", "BIGINT": "int", "HUGEINT": "int", "INTEGER": "int", "BOOLEAN": "bool"}
_PY |= {"BIGINT[]": "list[int]"}


def header_columns(text: str) -> dict[str, str]:
    """A view's ``-- columns:`` block: column -> its meaning (continuation lines joined)."""
    out: dict[str, str] = {}
    inside, last = False, None
    for line in text.splitlines():
        if line.startswith("-- columns:"):
            inside = True
            continue
        if not inside:
            continue
        if not line.startswith("--"):
            break
        m = re.match(r"--   (\S+)\s+(.*)$", line)
        if m and not line.startswith("--    "):
            last = m.group(1)
            out[last] = m.group(2).strip()
        elif last is not None and line.strip("- "):
            out[last] += " " + line[2:].strip()
    return out


def unit_of(name: str, meaning: str) -> str | None:
    """The unit a column's name or meaning states (the house's suffixes), or None."""
    if name.endswith("_ns"):
        return "ns"
    if name.endswith("_s") and not name.endswith("_per_s") or re.search(r"\bseconds\b(?! after)", meaning):
        return "s" if not name.endswith(("_per_s", "_request_s")) else None
    if name.endswith("_share") or name == "share" or "(0-1)" in meaning:
        return "fraction"
    return None


def _class_name(view: str) -> str:
    return "".join(w.capitalize() for w in view.split("_")) + "Row"


def _view_types() -> dict[str, list[tuple[str, str]]]:
    import duckdb

    from lltrace.queries import install_views
    from lltrace.tables import TABLES

    con = duckdb.connect()
    for t in TABLES.values():
        cols = ", ".join(f"{c.name} {c.duckdb_type}" for c in t.columns)
        con.execute(f"CREATE TABLE {t.name} ({cols}, run_id VARCHAR)")
    install_views(con, list(VIEWS))
    return {v: [(r[0], r[1]) for r in con.execute(f"DESCRIBE SELECT * FROM {v}").fetchall()] for v in VIEWS}


def source() -> str:
    """The text of ``rows.py``."""
    from lltrace.queries import query_files

    files = {q.name: q.text for q in query_files()}
    types = _view_types()
    lines = [
        '"""The rows of the query views the documents carry, one class per view: written by',
        "``python -m lltrace.documents.generate`` from each view's header (``queries/<view>.sql``) and the types",
        'DuckDB gives its columns. Do not edit: change the view and run the generator."""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Annotated",
        "",
        "from lltrace.documents.base import Row, field_doc",
        "",
    ]
    for view, left_out in VIEWS.items():
        text = files[view]
        meanings = header_columns(text)
        title = re.match(r"-- \w+: (.*)", text).group(1).strip()
        doc_line = f'    """A row of ``{view}``: {title}"""'
        if len(doc_line) > 120:
            doc_line = f'    """A row of ``{view}``:\n    {title}\n    """'
        lines += ["", f"class {_class_name(view)}(Row, kw_only=True):", doc_line, ""]
        for name, duck in types[view]:
            if name == "run_id" or name in left_out:
                continue
            meaning = meanings.get(name)
            if meaning is None:
                raise SystemExit(f"queries/{view}.sql: column {name} has no line in the header")
            unit = unit_of(name, meaning)
            doc = f"field_doc({meaning!r}" + (f", {unit!r})" if unit else ")")
            line = f"    {name}: Annotated[{_PY[duck]} | None, {doc}]"
            if len(line) > 120:
                chunks = textwrap.wrap(meaning, 100, drop_whitespace=False)
                text = "\n".join(f"            {c!r}" for c in chunks)
                unit_arg = f"\n            {unit!r}," if unit else ""
                line = f"    {name}: Annotated[\n        {_PY[duck]} | None,\n        field_doc(\n{text},{unit_arg}\n"
                line += "        ),\n    ]"
            lines.append(line)
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":  # pragma: no cover - the maintainers' regeneration command
    ROWS.write_text(source())
    print(ROWS, file=sys.stderr)

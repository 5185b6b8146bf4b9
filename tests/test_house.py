"""The house (docs/development.md): arrows point one way, modules stay small, importing a parser loads no
analysis, every canonical table is declared once and the reference pages are written from the declarations."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA, REPO

from lltrace.tables import TABLES

FOLDERS = {
    "lltrace": "toolkit",
    "lltrace.parsers": "parsers",
    "lltrace.queries": "queries",
    "lltrace.reports": "reports",
}
LEAVES = {
    "lltrace.documents.vocabulary",
    "lltrace.arrow_rows",
    "lltrace.cores",
    "lltrace.errors",
    "lltrace.source_info",
    "lltrace.tables",
    "lltrace.table_schema",
    "lltrace.version",
}


def _modules() -> dict[str, Path]:
    """Every Python module of lltrace by its import name."""
    out: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        root = REPO / folder
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).with_suffix("")
            parts = [] if rel.name == "__init__" and rel.parent == Path(".") else list(rel.parts)
            if parts and parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join([package, *parts])
            if package == "lltrace" and parts and parts[0] in ("parsers", "queries", "reports"):
                continue
            out[name] = path
    return out


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """The lltrace modules a file imports, anywhere in it (inside functions and TYPE_CHECKING blocks too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("lltrace")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lltrace"):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in MODULES or _extension(node.module, a.name) else node.module)
    return found


def _extension(package: str, name: str) -> bool:
    """Whether ``package.name`` is a compiled extension module (its C source beside the package's modules)."""
    path = MODULES.get(package)
    return path is not None and path.name == "__init__.py" and (path.parent / f"{name}.c").is_file()


def test_every_module_is_found():
    assert {"lltrace", "lltrace.ingest.pipeline", "lltrace.replay.scheduler", "lltrace.parsers.kineto"} <= set(MODULES)


def test_no_import_cycle_among_lltrace_modules():
    graph = {m: {d for d in _imports(p) if d in MODULES and d != m} for m, p in MODULES.items()}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                pytest.fail("import cycle: " + " -> ".join(path[path.index(d) :] + [d]) if d in path else d)
            if d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_no_module_over_600_lines():
    generated = {"lltrace.documents.rows"}  # written from the query views by lltrace.documents.generate
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > 600 and m not in generated}
    assert long == {}


def test_no_function_over_80_lines_where_documents_are_built_and_drawn():
    """The analysis and the reports are built and drawn by section: a long function there is a section waiting to
    be named."""
    long = {}
    for folder in (REPO / "reports", REPO / "toolkit" / "analysis"):
        for path in sorted(folder.glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > 80:
                        long[f"{path.relative_to(REPO)}:{node.name}"] = lines
    assert long == {}


def test_arrows_point_one_way():
    for name, path in MODULES.items():
        deps = _imports(path)
        if name.startswith("lltrace.parsers"):
            parsers = {d for d in deps if d.startswith("lltrace.parsers")}
            assert deps <= parsers | LEAVES, name
        if name.startswith("lltrace.reports"):
            wrong = {d for d in deps if d.startswith(("lltrace.analysis", "lltrace.replay", "lltrace.ingest"))}
            assert not wrong, f"{name} imports {wrong}: reports take documents and tables"
        if name.startswith("lltrace.queries"):
            assert deps <= LEAVES, name
        if name in LEAVES:
            assert deps <= LEAVES - {name}, f"{name} is a leaf: it imports only other leaves"
        if name.startswith("lltrace.documents") and name != "lltrace.documents.generate":
            # the documents are declared once, where producers and renderers both import them: a leaf package
            assert {d for d in deps if not d.startswith("lltrace.documents")} <= LEAVES, name


def test_no_module_imports_a_private_name_of_another():
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lltrace"):
                private = [a.name for a in node.names if a.name.startswith("_") and a.name != "__version__"]
                if node.module == "lltrace.parsers" and private == ["_kineto_fast"]:
                    continue  # the compiled extension module
                assert not private, f"{name} imports {private} from {node.module}"


def test_only_the_console_makes_richs_own_text():
    """Rich's ``Text`` drops a bell or a carriage return silently; every module builds its terminal text with
    ``lltrace.reports.console.Text``, which shows them (docs/development.md, untrusted strings)."""
    for name, path in MODULES.items():
        if name == "lltrace.reports.console":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "rich.text":
                raise AssertionError(f"{name} imports {[a.name for a in node.names]} from rich.text")
            if isinstance(node, ast.ImportFrom) and node.module == "rich":
                assert "text" not in {a.name for a in node.names}, f"{name} imports rich.text"


def test_the_cli_formats_no_table():
    text = (REPO / "toolkit" / "cli.py").read_text()
    assert "rich.table" not in text and "Table(" not in text


@pytest.mark.parametrize("module", ["lltrace.parsers", *sorted(m for m in MODULES if m.startswith("lltrace.parsers."))])
def test_importing_a_parser_loads_no_analysis(module):
    code = f"import sys, json, {module}; print(json.dumps(sorted(m for m in sys.modules if m.startswith('lltrace'))))"
    loaded = set(
        json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    )
    # of the other modules only the leaves (LEAVES), and the documents package that holds the vocabulary (its own
    # module loads no document)
    allowed = {m for m in loaded if m == "lltrace" or m.startswith("lltrace.parsers")} | LEAVES | {"lltrace.documents"}
    assert loaded <= allowed, loaded - allowed


def test_an_ingest_imports_no_dataframe_library():
    """Every ``lltrace analyze FILE`` imports the parsers and the ingest: polars (0.12 s, 25 MB) and pandas are
    imported where a frame is built, never by importing them (benchmarks/ingest.py times the imports)."""
    code = (
        "import sys, lltrace.parsers, lltrace.ingest.pipeline, lltrace.parsers.kineto_steps; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'polars', 'pandas'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_facade_exports_the_api_and_keeps_functions_over_sub_packages():
    import lltrace
    import lltrace.ingest.pipeline  # noqa: F401  binds the sub-package on the facade in plain Python
    import lltrace.replay.document  # noqa: F401

    assert callable(lltrace.ingest) and lltrace.ingest.__name__ == "ingest"
    assert callable(lltrace.replay) and lltrace.replay.__name__ == "replay"
    for name in lltrace.__all__:
        assert getattr(lltrace, name) is not None


def test_the_reference_pages_are_what_their_declarations_write():
    """docs/tables.md (and every other generated page) is what ``lltrace.reports.reference`` writes from the
    declarations: regenerate with ``python -m lltrace.reports.reference docs/``."""
    from lltrace.reports.reference import PAGES

    stale = [name for name, page in PAGES.items() if (REPO / "docs" / name).read_text() != page()]
    assert stale == [], f"stale generated docs: {stale} (python -m lltrace.reports.reference docs/)"
    tables = (REPO / "docs" / "tables.md").read_text()
    assert all(f"`{c.name}`" in tables for t in TABLES.values() for c in t.columns)


def test_every_written_table_has_the_declared_schema(tmp_path):
    """Real runs' files carry exactly the declared columns and types of their table (all of them, in order)."""
    import pyarrow.parquet as pq

    import lltrace

    run = lltrace.ingest([DATA / "vllm_cpu" / "B_kvpressure"], store=tmp_path)
    for name, table in TABLES.items():
        for f in run.store.table_files(name, [run.id]):
            schema = pq.read_schema(f)
            assert schema.names == table.names, (name, f)
            assert all(schema.field(c.name).type == c.type for c in table.columns), (name, f)


def test_every_column_is_declared_with_its_meaning_unit_and_range():
    from lltrace.tables import ORIGINS, STAGING

    for table in [*TABLES.values(), *STAGING.values()]:
        assert len(set(table.names)) == len(table.names), table.name
        for c in table.columns:
            assert c.doc and c.origin in ORIGINS, (table.name, c.name)
            if c.name.endswith("_s") and c.type == TABLES["requests"].column("e2e_s").type:
                assert c.unit == "s", (table.name, c.name)
            if c.name.endswith("_tokens") or c.name in ("running", "waiting"):
                assert c.integer and c.lo == 0, (table.name, c.name)
    assert TABLES["engine_stats"].column("kv_usage").hi == 1.0 and TABLES["engine_stats"].column("kv_usage").lo == 0.0

"""The run store: Parquet tables partitioned by table and run, plus one metadata JSON per run.

Layout (docs/store.md)::

    <store>/<table>/.runs/run_id=<id>/g=<generation>/part-*.parquet   # a generation of a run's table
    <store>/<table>/run_id=<id> -> .runs/run_id=<id>/g=<committed>    # link for engines that glob
    <store>/runs/<id>.json              # the run's metadata, naming its generation: the commit
    <store>/replays/<id>.json           # the run's latest replay document (lltrace replay), if any
    <store>/.staging/<id>-<host>-<pid>-<random>/     # a run being written

A run is written under ``.staging``, moved in as a new generation beside the one it replaces, and
committed by an atomic rename of its metadata, which names the generation; lltrace's readers read the
generation the metadata names, so a reader sees the old run or the new one, whole, and a writer killed at
any moment leaves the old run. The ``run_id=<id>`` links, which other engines' globs
(``<table>/*/*.parquet``) follow and which hide the ``.runs`` folders, are swapped after the commit. A
replaced generation stays GRACE_S for readers that listed it before the commit; the run's next commit
removes it, and generations no metadata names (a writer killed before its commit). The next write of any
run removes the staging of writers that are gone. Concurrent writers of one run take turns under a per-run
lock (``.locks/<id>.lock``); writers of different runs do not wait for each other.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from lltrace.cores import usable_cores
from lltrace.documents.vocabulary import SkipReason
from lltrace.errors import StoreError
from lltrace.tables import TABLES as CANONICAL

if TYPE_CHECKING:  # polars is imported where a table is asked for (it costs 25 MB at import)
    import polars as pl

DEFAULT_STORE = ".lltrace"
TABLES = tuple(CANONICAL)
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def default_store_path() -> Path:
    """``$LLTRACE_STORE`` if set, else ``./.lltrace``."""
    return Path(os.environ.get("LLTRACE_STORE") or DEFAULT_STORE)


def check_run_id(run_id: str) -> str:
    """Validate a run name (letters, digits, ``.``, ``_``, ``-``; at most 128 characters)."""
    if not _RUN_ID.match(run_id):
        raise StoreError(
            f"invalid run name {run_id!r}: use letters, digits, '.', '_' or '-' (max 128, no leading punctuation)"
        )
    return run_id


_HOST = re.sub(r"[^A-Za-z0-9]", "", os.uname().nodename if hasattr(os, "uname") else "host")[:32] or "host"
_STAGE = re.compile(r"^.+-(?P<host>[A-Za-z0-9]{1,32})-(?P<pid>\d+)-[0-9a-f]{8}$")


_DATA = ".runs"  # <table>/.runs/run_id=<id>/g=<generation>/: hidden from <table>/*/*.parquet globs
GRACE_S = 600.0  # a replaced generation stays this long for readers that listed it before the commit


def _names(superseded: list[dict[str, Any]]) -> set[str]:
    return {s["generation"] for s in superseded}


def _alive(pid: int) -> bool:
    """Whether a process of this host runs with ``pid`` (signal 0 asks without sending)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it runs, as another user
        return True
    return True


def _is_uri(root: object) -> bool:
    return isinstance(root, str) and re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", root) is not None


def _resolve(run_id: str | Callable[[], str]) -> str:
    return check_run_id(run_id if isinstance(run_id, str) else run_id())


class Store:
    """A folder of runs. Cheap to create; touches the disk only when asked.

    ``root`` is a local folder, or the URI of any filesystem pyarrow opens (``s3://bucket/runs``,
    ``gs://…``, ``hdfs://…``, ``file:///…``): then the store is a :class:`FilesystemStore`, same layout.
    """

    def __new__(cls, root: str | os.PathLike[str] | None = None) -> Store:
        if cls is Store and _is_uri(root if root is not None else os.environ.get("LLTRACE_STORE")):
            return super().__new__(FilesystemStore)
        return super().__new__(cls)

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root) if root is not None else default_store_path()
        self._generations: dict[tuple[str, int, int], str | None] = {}

    # -- reading ---------------------------------------------------------------------------------
    def run_ids(self) -> list[str]:
        """Committed runs, sorted by name."""
        runs = self.root / "runs"
        if not runs.is_dir():
            return []
        return sorted(p.stem for p in runs.glob("*.json"))

    def has_run(self, run_id: str) -> bool:
        """Whether the run is committed."""
        return (self.root / "runs" / f"{run_id}.json").is_file()

    def metadata(self, run_id: str) -> dict[str, Any]:
        """The run's metadata JSON."""
        path = self.root / "runs" / f"{run_id}.json"
        if not path.is_file():
            known = ", ".join(self.run_ids()[:10]) or "none"
            raise StoreError(f"{self.root}: no run {run_id!r} (runs: {known})")
        return json.loads(path.read_text())

    def table_files(self, table: str, run_ids: list[str] | None = None) -> list[str]:
        """Parquet files of one table for the given (default: all committed) runs: those of the generation
        each run's metadata names (a run replaced meanwhile keeps its old files a while: GRACE_S)."""
        ids = self.run_ids() if run_ids is None else run_ids
        files: list[str] = []
        for rid in ids:
            files.extend(sorted(str(p) for p in self._run_dir(table, rid).glob("*.parquet")))
        return files

    def _generation(self, run_id: str) -> str | None:
        """The committed generation of a run (None: a run written before generations, or none)."""
        path = self.root / "runs" / f"{run_id}.json"
        try:
            stat = path.stat()
        except OSError:
            return None
        key = (run_id, stat.st_mtime_ns, stat.st_size)
        if key not in self._generations:
            try:
                gen = json.loads(path.read_text()).get("generation")
            except (OSError, ValueError):
                gen = None
            self._generations[key] = gen
        return self._generations[key]

    def _run_dir(self, table: str, run_id: str) -> Path:
        gen = self._generation(run_id)
        if gen is None:
            return self.root / table / f"run_id={run_id}"
        return self.root / table / _DATA / f"run_id={run_id}" / f"g={gen}"

    def present(self, run_ids: list[str] | None = None) -> set[str]:
        """The canonical tables that hold files for these (default: all committed) runs."""
        return {t for t in TABLES if self.table_files(t, run_ids)}

    def connect(self, run_ids: list[str] | None = None) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB with one view per canonical table over the runs (default: all committed ones),
        and the query views over them.

        Every canonical table is there with every declared column, in declared order, then ``run_id``: NULL
        where no file of these runs has a column, empty where no file has the table. So every query view
        binds on every run (``lltrace.queries``); ``present`` says which tables a run has.
        """
        from lltrace.queries import install_views

        con = duckdb.connect()
        # the store's Parquet files never change once committed: their footers are read once per connection, not
        # again each time a view over them is bound (installing the query views binds every table many times)
        con.execute(f"SET threads = {usable_cores()}; SET enable_progress_bar = false")
        con.execute("SET parquet_metadata_cache = true")
        for name, table in CANONICAL.items():
            files = self.table_files(name, run_ids)
            if files:
                source, have = self._source(con, name, files)
            else:
                source, have = "(SELECT NULL::VARCHAR AS run_id WHERE false)", {"run_id"}
            cols = [c.name if c.name in have else f"CAST(NULL AS {c.duckdb_type}) AS {c.name}" for c in table.columns]
            con.execute(f"CREATE VIEW {name} AS SELECT {', '.join(cols)}, run_id FROM {source}")
        install_views(con)
        return con

    def _source(self, con: duckdb.DuckDBPyConnection, table: str, files: list[str]) -> tuple[str, set[str]]:
        """The FROM clause that reads one table's files (``run_id`` from the hive path), and its columns."""
        listing = ", ".join(f"'{f}'" for f in files)
        source = f"read_parquet([{listing}], hive_partitioning = true, union_by_name = true)"
        return source, {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}

    def query(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]] | None:
        """Run SQL over every committed run's tables and views: the column names and rows, or None for a
        statement that returns none. A store with no runs, or an SQL error, is a ``StoreError``."""
        if not self.run_ids():
            raise StoreError(f"{self.root}: the store holds no runs (run `lltrace ingest` first)")
        con = self.connect()
        try:
            cur = con.execute(sql)
            if cur.description is None:
                return None
            return [d[0] for d in cur.description], cur.fetchall()
        except duckdb.Error as exc:
            raise StoreError(f"SQL error: {str(exc).splitlines()[0]}") from None
        finally:
            con.close()

    def run(self, run_id: str) -> Run:
        """The committed run ``run_id`` (``StoreError`` when the store has none)."""
        if not self.has_run(run_id):
            self.metadata(run_id)  # raises the error naming the runs there are
        return Run(run_id, self)

    # -- writing ---------------------------------------------------------------------------------
    @contextmanager
    def write_run(self, run_id: str | Callable[[], str]) -> Iterator[Path]:
        """Stage a run's tables in a folder (``<stage>/<table>/*.parquet``) and commit them on success.

        The caller writes ``<stage>/<table>/...`` and ``<stage>/run.json``; on a clean exit the run is
        moved into place (replacing a run of the same id) and its metadata committed last. On an
        exception the staging folder is removed and the store is left as it was. ``run_id`` may be a
        function, asked at the commit (for an id that depends on what was staged, e.g. a content hash).
        """
        if isinstance(run_id, str):
            check_run_id(run_id)
        staging = self.root / ".staging"
        try:
            staging.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{self.root}: cannot create the store ({exc.strerror})") from None
        self._sweep(staging)
        # the writer's host and pid in the name: the next write removes the staging of a writer that is gone
        name = run_id if isinstance(run_id, str) else "pending"
        stage = staging / f"{name}-{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        stage.mkdir()
        try:
            yield stage
            self._commit(_resolve(run_id), stage)
        finally:
            shutil.rmtree(stage, ignore_errors=True)

    @contextmanager
    def _locked(self, run_id: str) -> Iterator[None]:
        """Hold the run's lock: commits of one run by concurrent processes take turns (POSIX ``flock``)."""
        locks = self.root / ".locks"
        locks.mkdir(parents=True, exist_ok=True)
        with open(locks / f"{run_id}.lock", "a") as f:
            try:
                import fcntl
            except ImportError:  # no flock on this OS: commits of one run are not serialised
                yield
                return
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _commit(self, run_id: str, stage: Path) -> None:
        meta_src = stage / "run.json"
        if not meta_src.is_file():
            raise StoreError(f"internal: staged run {run_id} has no run.json")
        with self._locked(run_id):
            self._move_in(run_id, stage, meta_src)

    def _move_in(self, run_id: str, stage: Path, meta_src: Path) -> None:
        """Commit a staged run: its tables move in under a new generation (beside the old run's, which
        readers may be reading), the metadata naming it replaces the old atomically (the commit: a reader
        sees the old run or the new one, whole; a kill before it leaves the old run), then the
        ``run_id=<id>`` links other engines read are pointed at it, and generations replaced more than
        GRACE_S ago (or never committed) are removed."""
        runs = self.root / "runs"
        runs.mkdir(exist_ok=True)
        meta_dst = runs / f"{run_id}.json"
        old = self._generation(run_id) if meta_dst.exists() else None
        gen = f"{time.time_ns():x}{uuid.uuid4().hex[:4]}"
        tables = sorted(p.name for p in stage.iterdir() if p.is_dir() and p.name in TABLES)
        for name in tables:
            dst = self.root / name / _DATA / f"run_id={run_id}" / f"g={gen}"
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage / name, dst)
        meta = json.loads(meta_src.read_text())
        prior = json.loads(meta_dst.read_text()).get("superseded", []) if meta_dst.exists() else []
        meta["generation"] = gen
        meta["superseded"] = [*prior, *([{"generation": old, "at": time.time()}] if old else [])]
        (self.root / "replays" / f"{run_id}.json").unlink(missing_ok=True)  # replayed the old tables
        tmp = runs / f".{run_id}.{uuid.uuid4().hex[:8]}.json.tmp"
        tmp.write_text(json.dumps(meta, indent=2, default=str))
        os.replace(tmp, meta_dst)  # the commit
        self._point_links(run_id, gen, tables)
        self._drop_old_generations(run_id, meta_dst)

    def _point_links(self, run_id: str, gen: str, tables: list[str]) -> None:
        """``<table>/run_id=<id>`` -> the committed generation (each swap atomic), for engines that glob the
        store (``<table>/*/*.parquet`` skips the hidden generation folders); a table the run no longer has
        loses its link. A folder of a store written before generations is moved aside first."""
        for name in TABLES:
            link = self.root / name / f"run_id={run_id}"
            if link.is_dir() and not link.is_symlink():  # the layout before generations
                aside = self.root / name / _DATA / f"run_id={run_id}" / f"g=legacy-{uuid.uuid4().hex[:8]}"
                aside.parent.mkdir(parents=True, exist_ok=True)
                os.replace(link, aside)
            if name in tables:
                tmp = self.root / name / f".link-{run_id}-{uuid.uuid4().hex[:8]}"
                tmp.symlink_to(Path(_DATA) / f"run_id={run_id}" / f"g={gen}")
                os.replace(tmp, link)
            elif link.is_symlink():
                link.unlink()

    def _drop_old_generations(self, run_id: str, meta_dst: Path) -> None:
        """Remove the run's generations replaced more than GRACE_S ago and, after GRACE_S, any of its
        generation folders no metadata names (a writer killed before its commit)."""
        meta = json.loads(meta_dst.read_text())
        now = time.time()
        keep = {meta["generation"]} | {s["generation"] for s in meta["superseded"] if now - s["at"] <= GRACE_S}
        for name in TABLES:
            data = self.root / name / _DATA / f"run_id={run_id}"
            for d in data.glob("g=*") if data.is_dir() else []:
                if d.name[2:] in keep:
                    continue
                try:
                    if now - d.stat().st_mtime > GRACE_S or d.name[2:] in _names(meta["superseded"]):
                        shutil.rmtree(d, ignore_errors=True)
                except OSError:
                    continue
        still = [s for s in meta["superseded"] if s["generation"] in keep]
        if still != meta["superseded"]:
            meta["superseded"] = still
            tmp = meta_dst.with_name(f".{run_id}.{uuid.uuid4().hex[:8]}.json.tmp")
            tmp.write_text(json.dumps(meta, indent=2, default=str))
            os.replace(tmp, meta_dst)

    # -- replays -----------------------------------------------------------------------------------
    def save_replay(self, run_id: str, doc: dict[str, Any]) -> Path:
        """Keep ``doc`` as the run's latest replay (atomic: a reader sees the old one or the new one)."""
        if not self.has_run(run_id):
            raise StoreError(f"{self.root}: no run {run_id!r}")
        folder = self.root / "replays"
        folder.mkdir(exist_ok=True)
        dst = folder / f"{run_id}.json"
        tmp = folder / f".{run_id}.{uuid.uuid4().hex[:8]}.tmp"
        tmp.write_text(json.dumps(doc, default=str), encoding="utf-8")
        os.replace(tmp, dst)
        return dst

    def replay(self, run_id: str) -> dict[str, Any] | None:
        """The run's latest replay document, or None when it was never replayed."""
        path = self.root / "replays" / f"{run_id}.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None

    def _sweep(self, staging: Path) -> None:
        """Remove the staging folders of writers that are gone: a process of this host that no longer runs
        (killed mid-ingest), or, for other hosts and older layouts, a folder untouched for a day."""
        now = time.time()
        for p in staging.iterdir():
            m = _STAGE.match(p.name)
            try:
                if m and m.group("host") == _HOST:
                    gone = not _alive(int(m.group("pid")))
                else:
                    gone = now - p.stat().st_mtime > 86400
            except OSError:
                continue
            if gone:
                shutil.rmtree(p, ignore_errors=True)

    def delete_run(self, run_id: str) -> None:
        """Remove a run (metadata first, then its links and every generation of its partitions)."""
        meta = self.root / "runs" / f"{run_id}.json"
        if not meta.exists():
            raise StoreError(f"{self.root}: no run {run_id!r}")
        meta.unlink()
        (self.root / "replays" / f"{run_id}.json").unlink(missing_ok=True)
        for table in TABLES:
            link = self.root / table / f"run_id={run_id}"
            if link.is_symlink():
                link.unlink()
            else:
                shutil.rmtree(link, ignore_errors=True)
            shutil.rmtree(self.root / table / _DATA / f"run_id={run_id}", ignore_errors=True)


class FilesystemStore(Store):
    """The store on a filesystem pyarrow opens by URI (object stores included), in the same Parquet layout.

    A run is staged on local disk, then its table files are uploaded and its metadata object written last,
    so a reader that lists ``runs/`` sees a run whole or not at all (object stores have no rename; the
    metadata object is the commit). Readers scan the Parquet files through pyarrow datasets registered in
    DuckDB. Concurrent writers of one run are not serialised here (no cross-host lock).
    """

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        import pyarrow.fs as pafs

        uri = str(root if root is not None else os.environ.get("LLTRACE_STORE"))
        try:
            self.fs, base = pafs.FileSystem.from_uri(uri)
        except (OSError, ValueError) as exc:
            raise StoreError(f"{uri}: cannot open the store ({exc})") from None
        self.base = base.rstrip("/")
        self.root = uri  # type: ignore[assignment]  # shown in messages; passed on to workers

    def _path(self, *parts: str) -> str:
        return "/".join([self.base, *parts])

    def _list(self, *parts: str) -> list[str]:
        import pyarrow.fs as pafs

        infos = self.fs.get_file_info(pafs.FileSelector(self._path(*parts), allow_not_found=True))
        return sorted(i.path for i in infos if i.type == pafs.FileType.File)

    def _exists(self, path: str) -> bool:
        import pyarrow.fs as pafs

        return self.fs.get_file_info(path).type == pafs.FileType.File

    def _read(self, path: str) -> str:
        with self.fs.open_input_stream(path) as f:
            return f.read().decode("utf-8")

    def _write(self, path: str, text: str) -> None:
        parent = path.rsplit("/", 1)[0]
        self.fs.create_dir(parent, recursive=True)
        with self.fs.open_output_stream(path) as f:
            f.write(text.encode("utf-8"))

    def _remove(self, path: str) -> None:
        if self._exists(path):
            self.fs.delete_file(path)

    # -- reading ---------------------------------------------------------------------------------
    def run_ids(self) -> list[str]:
        """Committed runs, sorted by name."""
        return sorted(
            p.rsplit("/", 1)[1][: -len(".json")]
            for p in self._list("runs")
            if p.endswith(".json") and not p.rsplit("/", 1)[1].startswith(".")
        )

    def has_run(self, run_id: str) -> bool:
        """Whether the run is committed."""
        return self._exists(self._path("runs", f"{run_id}.json"))

    def metadata(self, run_id: str) -> dict[str, Any]:
        """The run's metadata JSON."""
        path = self._path("runs", f"{run_id}.json")
        if not self._exists(path):
            known = ", ".join(self.run_ids()[:10]) or "none"
            raise StoreError(f"{self.root}: no run {run_id!r} (runs: {known})")
        return json.loads(self._read(path))

    def table_files(self, table: str, run_ids: list[str] | None = None) -> list[str]:
        """Parquet files (paths on the store's filesystem) of one table for the given (default: committed) runs."""
        ids = self.run_ids() if run_ids is None else run_ids
        return [f for rid in ids for f in self._list(table, f"run_id={rid}") if f.endswith(".parquet")]

    def _source(self, con: duckdb.DuckDBPyConnection, table: str, files: list[str]) -> tuple[str, set[str]]:
        """One table's files as a pyarrow dataset registered in DuckDB (``run_id`` from the hive path)."""
        import pyarrow as pa
        import pyarrow.dataset as ds
        import pyarrow.parquet as pq

        schema = pa.unify_schemas([pq.read_schema(f, filesystem=self.fs) for f in files])
        schema = schema.append(pa.field("run_id", pa.string()))
        data = ds.dataset(
            files,
            schema=schema,
            filesystem=self.fs,
            format="parquet",
            partitioning=ds.partitioning(pa.schema([("run_id", pa.string())]), flavor="hive"),
            partition_base_dir=self._path(table),
        )
        con.register(f"_{table}_files", data)
        return f"_{table}_files", set(schema.names)

    # -- writing ---------------------------------------------------------------------------------
    @contextmanager
    def write_run(self, run_id: str | Callable[[], str]) -> Iterator[Path]:
        """Stage the run on local disk; on a clean exit upload its tables, then its metadata (the commit)."""
        import tempfile

        if isinstance(run_id, str):
            check_run_id(run_id)
        stage = Path(tempfile.mkdtemp(prefix=f"lltrace-{run_id if isinstance(run_id, str) else 'pending'}-"))
        try:
            yield stage
            run_id = _resolve(run_id)
            meta = stage / "run.json"
            if not meta.is_file():
                raise StoreError(f"internal: staged run {run_id} has no run.json")
            self.delete_run(run_id, missing_ok=True)
            for src in sorted(p for p in stage.iterdir() if p.is_dir() and p.name in TABLES):
                folder = self._path(src.name, f"run_id={run_id}")
                self.fs.create_dir(folder, recursive=True)
                for f in sorted(src.glob("*.parquet")):
                    with open(f, "rb") as data, self.fs.open_output_stream(f"{folder}/{f.name}") as out:
                        shutil.copyfileobj(data, out, 1 << 22)
            self._write(self._path("runs", f"{run_id}.json"), meta.read_text())
        finally:
            shutil.rmtree(stage, ignore_errors=True)

    def delete_run(self, run_id: str, missing_ok: bool = False) -> None:
        """Remove a run (metadata first, then its files)."""
        meta = self._path("runs", f"{run_id}.json")
        if not self._exists(meta):
            if not missing_ok:
                raise StoreError(f"{self.root}: no run {run_id!r}")
        else:
            self.fs.delete_file(meta)
        self._remove(self._path("replays", f"{run_id}.json"))
        for table in TABLES:
            for f in self._list(table, f"run_id={run_id}"):
                self.fs.delete_file(f)

    def save_replay(self, run_id: str, doc: dict[str, Any]) -> Path:
        """Keep ``doc`` as the run's latest replay (one object write)."""
        if not self.has_run(run_id):
            raise StoreError(f"{self.root}: no run {run_id!r}")
        path = self._path("replays", f"{run_id}.json")
        self._write(path, json.dumps(doc, default=str))
        return Path(path)

    def replay(self, run_id: str) -> dict[str, Any] | None:
        """The run's latest replay document, or None when it was never replayed."""
        path = self._path("replays", f"{run_id}.json")
        return json.loads(self._read(path)) if self._exists(path) else None


@dataclass
class Skipped:
    """A file found in a folder that was not read, and why: in words, and as a word of the vocabulary."""

    path: str
    reason: str
    kind: str = SkipReason.UNKNOWN.value  # lltrace.documents.vocabulary.SkipReason


@dataclass
class Run:
    """One ingested run in a store."""

    id: str
    store: Store
    skipped: list[Skipped] = field(default_factory=list)
    reused: bool = False
    _held: duckdb.DuckDBPyConnection | None = field(default=None, repr=False, compare=False)

    @property
    def metadata(self) -> dict[str, Any]:
        """The run's metadata JSON (sources, clocks, provenance, versions)."""
        return self.store.metadata(self.id)

    def table(self, name: str) -> pl.DataFrame:
        """One canonical table of this run as a polars DataFrame: every declared column, NULL where not given."""
        if name not in CANONICAL:
            raise StoreError(f"unknown table {name!r}; tables: {', '.join(TABLES)}")
        return self.sql(f"SELECT * FROM {name}")

    def sql(self, query: str) -> pl.DataFrame:
        """Run SQL over this run's tables and the query views (on the connection ``held`` keeps, where open)."""
        if self._held is not None:
            return self._held.sql(query).pl()
        con = self.store.connect([self.id])
        try:
            return con.sql(query).pl()
        finally:
            con.close()

    @contextmanager
    def held(self, con: duckdb.DuckDBPyConnection | None = None) -> Iterator[None]:
        """Keep one connection (its views installed once) for every ``sql`` and ``table`` call inside the block:
        the replay reads a dozen tables and views, each of which would install the views anew. ``con``: an open
        connection over this run (``store.connect([run.id])``) to use, left open."""
        if self._held is not None:
            yield
            return
        self._held = con or self.store.connect([self.id])
        try:
            yield
        finally:
            if con is None:
                self._held.close()
            self._held = None

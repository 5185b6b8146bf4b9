"""An archive given as a run (a CI job's artifacts zip, an incident bundle tar.gz) read as the folder it holds,
its files named as in it; what cannot be unpacked safely is not, and said so."""

from __future__ import annotations

import io
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import DATA, document_text

import lltrace
from lltrace.errors import TraceFormatError


def _zip(folder: Path, dest: Path, extra: dict[str, bytes] | None = None) -> Path:
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(p for p in folder.rglob("*") if p.is_file()):
            z.write(f, f.relative_to(folder).as_posix())
        for name, data in (extra or {}).items():
            z.writestr(name, data)
    return dest


def test_a_run_zipped_reads_as_its_folder(tmp_path: Path) -> None:
    """Run D (spans, bench, server log, scrapes) zipped as a CI job's artifacts are: the same document as the
    folder's, each file named <archive>/<member>, the run named after the archive."""
    folder = DATA / "vllm_cpu" / "D_chunked"
    archive = _zip(folder, tmp_path / "D_chunked.zip")
    want = lltrace.analyze([str(folder)], store=tmp_path / "a").to_dict()
    run = lltrace.ingest([archive], store=tmp_path / "b")
    assert run.id.startswith("D_chunked-")
    got = lltrace.analyze(run).to_dict()
    assert all(s["path"].startswith(f"{archive}/") for s in got["run"]["sources"])
    assert document_text(got, str(archive)) == document_text(want, str(folder))


def test_a_tar_gz_bundle_with_a_member_outside_its_folder(tmp_path: Path) -> None:
    """A tar.gz holding run D's server log under a folder, and a member named ../outside.txt (never written outside
    the scratch folder): the log read, named as in the archive; the member left out with a warning."""
    log = (DATA / "vllm_cpu" / "D_chunked" / "server.log").read_bytes()
    archive = tmp_path / "incident.tar.gz"
    with tarfile.open(archive, "w:gz") as t:
        for name, data in (("incident/server.log", log), ("../outside.txt", b"x")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    with pytest.warns(lltrace.InputWarning, match=r"1 member\(s\) not unpacked.*outside"):
        run = lltrace.ingest([archive], store=tmp_path / "s")
    (src,) = run.metadata["sources"]
    assert src["path"] == f"{archive}/incident/server.log" and src["format"] == "vllm-server-log"
    assert not (tmp_path / "outside.txt").exists()
    assert run.sql("SELECT count(*) FROM engine_steps").rows()[0][0] > 0


def test_a_broken_member_or_archive_is_one_line_naming_it(tmp_path: Path) -> None:
    bench = (DATA / "vllm_cpu" / "A_baseline" / "bench" / "bench_profiled_8req.json").read_bytes()
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "bench.json").write_bytes(bench[:500] + b"@@" + bench[502:])
    archive = _zip(folder, tmp_path / "results.zip")
    with pytest.raises(TraceFormatError) as err:
        lltrace.ingest([archive], store=tmp_path / "a")
    assert str(err.value).startswith(f"{archive}/bench.json: ") and "lltrace-archive" not in str(err.value)
    cut = tmp_path / "cut.zip"
    cut.write_bytes(archive.read_bytes()[:-30])  # its central directory cut off
    with pytest.raises(TraceFormatError, match="not a readable zip archive"):
        lltrace.ingest([cut], store=tmp_path / "b")
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").rglob("*.parquet"))


def test_an_archive_inside_a_folder_is_skipped_with_how_to_read_it(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    shutil.copytree(DATA / "vllm_cpu" / "D_chunked", folder)
    _zip(DATA / "vllm_cpu" / "A_baseline" / "bench", folder / "more.zip")
    run = lltrace.ingest([folder], store=tmp_path / "s")
    said = {Path(s["path"]).name: s["reason"] for s in run.metadata["skipped"]}
    assert said["more.zip"].startswith("an archive (zip) inside the folder: give it as a path of its own")

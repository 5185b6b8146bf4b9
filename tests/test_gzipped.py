"""Every format read from a gzipped file as from the plain one (a rotated log, an artifact store's ``.gz``).

The expected document is the same run's files read plain: gzipping a file must change nothing but the path said.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA

import lltrace
from lltrace.errors import TraceFormatError


def _gzipped_copy(run: Path, dest: Path) -> Path:
    """``run`` copied under ``dest`` with the same name, each file that is not gzip already gzipped."""
    out = dest / run.name
    shutil.copytree(run, out)
    for f in sorted(p for p in out.rglob("*") if p.is_file() and p.suffix != ".gz"):
        f.with_name(f.name + ".gz").write_bytes(gzip.compress(f.read_bytes(), mtime=0))
        f.unlink()
    return out


def _said(doc: dict[str, Any], folder: Path) -> str:
    """The document as text, the run's folder and the ``.gz`` suffixes taken out of the paths it names, its floats
    to 12 significant digits (DuckDB's parallel sums may add in another order)."""
    doc["run"].pop("id")  # (the files' hashes name it)
    for src in doc["run"]["sources"]:
        src.pop("size_bytes", None)
    return json.dumps(_rounded(doc), sort_keys=True).replace(str(folder), "RUN").replace(".gz", "")


def _rounded(x: Any) -> Any:
    if isinstance(x, float):
        return float(f"{x:.12g}")
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    return x


@pytest.mark.parametrize("run", ["A_baseline", "E_prefix"])
def test_a_run_gzipped_file_by_file_reads_as_the_plain_run(run: str, tmp_path: Path) -> None:
    """Run A (spans, bench results and stdouts, server log, scrapes, profiler traces) and run E (prefix caching,
    ids that do not match): every file gzipped, the same document, joins and clocks included."""
    plain = DATA / "vllm_cpu" / run
    zipped = _gzipped_copy(plain, tmp_path / "gz")
    assert any(p.name == "server.log.gz" for p in zipped.iterdir())
    want = lltrace.analyze([str(plain)], store=tmp_path / "plain").to_dict()
    got = lltrace.analyze([str(zipped)], store=tmp_path / "zipped").to_dict()
    assert [Path(s["path"]).suffix for s in got["run"]["sources"]] == [".gz"] * len(got["run"]["sources"])
    assert _said(got, zipped) == _said(want, plain)


def _server_log() -> bytes:
    return (DATA / "vllm_cpu" / "B_kvpressure" / "server.log").read_bytes()


def test_a_cut_gzip_stream_is_read_as_far_as_it_goes(tmp_path: Path) -> None:
    whole = gzip.compress(_server_log(), mtime=0)
    cut = tmp_path / "server.log.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    run = lltrace.ingest([cut], store=tmp_path / "store")
    [src] = run.metadata["sources"]
    assert src["path"] == str(cut)
    assert any("gzip stream ends early" in w and w.startswith(f"{cut}: ") for w in src["warnings"])
    assert not any("_inflated" in w for w in src["warnings"])
    (iterations,) = run.sql("SELECT count(*) FROM engine_steps").rows()[0]
    assert 0 < iterations < 8828  # the run's 8,828 iterations, cut about half way


def test_damaged_gzip_and_damaged_content_are_one_line_naming_the_file(tmp_path: Path) -> None:
    whole = gzip.compress(_server_log(), mtime=0)
    bad = tmp_path / "server.log.gz"
    bad.write_bytes(whole[:2000] + bytes(300) + whole[2300:])
    with pytest.raises(TraceFormatError) as err:
        lltrace.ingest([bad], store=tmp_path / "a")
    assert str(err.value).startswith(f"{bad}: decompressed byte ") and "corrupt gzip data" in str(err.value)
    result = (DATA / "vllm_cpu" / "A_baseline" / "bench" / "bench_profiled_8req.json").read_bytes()
    broken = tmp_path / "bench.json.gz"
    broken.write_bytes(gzip.compress(result[:500] + b"@@" + result[502:], mtime=0))
    with pytest.raises(TraceFormatError) as err:
        lltrace.ingest([broken], store=tmp_path / "b")
    assert err.value.path == str(broken) and "_inflated" not in str(err.value)
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").rglob("*.parquet"))

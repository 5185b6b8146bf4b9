"""Every format read from a compressed file as from the plain one (a rotated log, an artifact store's ``.gz`` or
``.zst``, an attachment's ``.xz`` or ``.bz2``).

The expected document is the same run's files read plain: compressing a file must change nothing but the path said.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA, document_text

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
    """The document as text (``conftest.document_text``), the ``.gz`` suffixes taken out of the paths it names."""
    return document_text(doc, str(folder)).replace(".gz", "")


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


def _zstd(data: bytes) -> bytes:
    import pyarrow as pa

    return pa.Codec("zstd").compress(data, asbytes=True)


COMPRESS = {"zstd": (_zstd, ".zst"), "xz": (lzma.compress, ".xz"), "bzip2": (bz2.compress, ".bz2")}


def test_a_run_zstd_file_by_file_reads_as_the_plain_run(tmp_path: Path) -> None:
    """Run A with every file that is not gzip already compressed with zstd (its profiler traces stay gzip): the
    same document as the plain run's."""
    plain = DATA / "vllm_cpu" / "A_baseline"
    out = tmp_path / "zst" / plain.name
    shutil.copytree(plain, out)
    for f in sorted(p for p in out.rglob("*") if p.is_file() and p.suffix != ".gz"):
        f.with_name(f.name + ".zst").write_bytes(_zstd(f.read_bytes()))
        f.unlink()
    want = lltrace.analyze([str(plain)], store=tmp_path / "plain").to_dict()
    got = lltrace.analyze([str(out)], store=tmp_path / "zstd").to_dict()
    assert {Path(s["path"]).suffix for s in got["run"]["sources"]} == {".zst", ".gz"}
    assert _said(got, out).replace(".zst", "") == _said(want, plain)


@pytest.mark.parametrize("kind", sorted(COMPRESS))
def test_each_compression_whole_cut_and_damaged(kind: str, tmp_path: Path) -> None:
    """A server log compressed whole (in two streams or frames, as parallel compressors write them) reads as the
    plain log; cut, as far as it goes with a warning; damaged, a one-line error at a decompressed byte."""
    compress, suffix = COMPRESS[kind]
    log = _server_log()
    half = log.index(b"\n", len(log) // 2) + 1
    whole = tmp_path / f"server.log{suffix}"
    whole.write_bytes(compress(log[:half]) + compress(log[half:]))
    plain = tmp_path / "server.log"
    plain.write_bytes(log)
    count = "SELECT count(*), sum(decode_tokens) FROM engine_steps"
    want = lltrace.ingest([plain], store=tmp_path / "p").sql(count).rows()
    run = lltrace.ingest([whole], store=tmp_path / "w")
    assert run.sql(count).rows() == want and want[0][0] == 8828
    assert run.metadata["sources"][0]["path"] == str(whole)
    data = compress(log)
    cut = tmp_path / "cut" / f"server.log{suffix}"
    cut.parent.mkdir()
    cut.write_bytes(data[: len(data) // 2])
    run = lltrace.ingest([cut], store=tmp_path / "c")
    [src] = run.metadata["sources"]
    assert any(f"{kind} stream ends early" in w and w.startswith(f"{cut}: ") for w in src["warnings"])
    (steps,) = run.sql("SELECT count(*) FROM engine_steps").rows()[0]
    assert 0 < steps < 8828
    bad = tmp_path / "bad" / f"server.log{suffix}"
    bad.parent.mkdir()
    at = len(data) // 3
    bad.write_bytes(data[:at] + bytes(b ^ 0x5A for b in data[at : at + 64]) + data[at + 64 :])
    with pytest.raises(TraceFormatError) as err:
        lltrace.ingest([bad], store=tmp_path / "b")
    assert str(err.value).startswith(f"{bad}: decompressed byte ") and f"corrupt {kind} data" in str(err.value)

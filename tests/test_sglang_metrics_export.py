"""SGLang's request metrics export (--export-metrics-to-file): a record as FileRequestMetricsExporter builds it
(``{"request_parameters": json.dumps(obj's fields), **meta_info}``) from a real SGLang 0.5.10 Finish line, read
as the same request the log line gives."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import lltrace
from lltrace.cli import app

REAL = Path(__file__).parent / "data" / "real" / "sglang" / "glm-5.1_h100_cp_pp.finish_line.log"


def _exported(tmp_path: Path) -> Path:
    line = next(ln for ln in REAL.read_text().splitlines() if "Finish: obj=" in ln)
    meta = ast.literal_eval(line[line.index("out={") + 4 :])["meta_info"]  # the line's own dict, read as Python
    params = {"rid": meta["id"], "stream": True, "sampling_params": {"max_new_tokens": 65536}}
    path = tmp_path / "sglang-request-metrics-20260520_09.log"
    path.write_text(json.dumps({"request_parameters": json.dumps(params), **meta}) + "\n")
    return path


def test_the_export_says_what_the_finish_line_says(tmp_path: Path) -> None:
    exported = lltrace.ingest([_exported(tmp_path)], store=tmp_path / "a")
    (src,) = exported.metadata["sources"]
    assert src["format"] == "sglang-request-metrics" and src["version"] == "request metrics export: 1 requests"
    (row,) = exported.table("requests").to_dicts()
    (logged,) = lltrace.ingest([REAL], store=tmp_path / "b").table("requests").to_dicts()
    for k in ("request_id", "arrival_s", "finished_s", "input_tokens", "output_tokens", "cached_tokens", "status"):
        assert row[k] == logged[k], k
    assert (row["status"], row["error_code"]) == ("error", 503) and row["error"] == "Request running timeout reached."
    assert row["arrival_s"] == 1779262962.6408873 and row["server_e2e_s"] == pytest.approx(1201.9242150001228)
    assert row["server_ttft_s"] == pytest.approx(1779262965.4523866 - 1779262962.6408873)  # streamed
    assert row["queue_s"] is None  # queue_time exactly 0.0: the scheduler's stamps never came


def test_a_record_without_an_id_is_said(tmp_path: Path) -> None:
    path = _exported(tmp_path)
    path.write_text(path.read_text() + json.dumps({"request_parameters": "{}", "e2e_latency": 1.0}) + "\n")
    (src,) = lltrace.ingest([path], store=tmp_path / "s").metadata["sources"]
    assert src["dropped"]["records_without_id"] == 1 and "without a meta_info id" in src["warnings"][0]
    path.write_text(json.dumps({"request_parameters": "{}", "e2e_latency": 1.0}) + "\n")
    r = CliRunner().invoke(app, ["ingest", str(path), "--store", str(tmp_path / "s2")])
    assert r.exit_code == 1 and "no request record with a meta_info id" in r.stderr

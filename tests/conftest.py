"""Shared fixtures: the real files in sample_traces/ (their provenance and licences in its README) and a throw-away
run store."""

from __future__ import annotations

import gzip
import importlib.util
import json
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

import duckdb
import jsonschema
import pytest
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "sample_traces"
DATA = SAMPLES  # the real files the tests read: torch/, serving/, gpu_op_profiles/, vllm_cpu/, vllm_cpu_limits/ ...
TORCH = SAMPLES / "torch"


@lru_cache(maxsize=8)
def load_script(path: Path) -> Any:
    """A sample folder's own script (its ground truth, read from the raw files) as a module."""
    spec = importlib.util.spec_from_file_location(f"script_{path.parent.name}_{path.stem}", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def data_file(*parts: str) -> Path:
    """A real file of sample_traces/; fails loudly when it is missing."""
    path = DATA.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"real data missing: {path}")
    return path


def raw_llm_spans(run_dir: str) -> dict[str, tuple[dict, dict]]:
    """The vLLM CPU run's ``llm_request`` OTLP spans read with the json module: request id -> (span, attributes)."""
    spans = {}
    for line in data_file("vllm_cpu", run_dir, "otlp", "traces.otlp.jsonl").read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    if sp["name"] == "llm_request":
                        attrs = {a["key"]: next(iter(a["value"].values())) for a in sp["attributes"]}
                        spans[attrs["gen_ai.request.id"]] = (sp, attrs)
    return spans


@lru_cache(maxsize=32)
def raw_trace(path: str) -> dict:
    """The trace parsed with the standard json module: the independent reading tests compare against."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        # Decimal keeps "1712195495519695.812" exact, as lltrace must.
        return json.load(f, parse_float=Decimal)


def torch_traces() -> list[Path]:
    """Every real profiler trace of an ordinary capture in sample_traces/torch/ and the vLLM CPU runs' worker traces
    (the Hugging Face ``generate()`` traces of hf_generate_*/ apart, and the two whose launches run no GPU op by
    design, a CUDA-graph capture and a CUPTI range-profiler run: their own tests read them)."""
    unusual = ("sglang_mi300x_qwen3-8b_decode_graph_capture_bs32.AMD.json.gz", "hta_a100_cupti_range_profiler.json.gz")
    files = sorted(p for p in TORCH.glob("*.json.gz") if p.name not in unusual)
    files += sorted(DATA.glob("vllm_cpu/*/profiler/*.json.gz"))
    if not files:
        pytest.fail(f"no real traces under {DATA}")
    return files


def canonical_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Every canonical table (lltrace.tables), empty, as the store's views have them: the declared columns in
    order, then run_id."""
    from lltrace.tables import TABLES

    for t in TABLES.values():
        cols = ", ".join(f"{c.name} {c.duckdb_type}" for c in t.columns)
        con.execute(f"CREATE TABLE {t.name} ({cols}, run_id VARCHAR)")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """An empty store folder."""
    return tmp_path / "store"


def write_journey_span(path: Path) -> None:
    """One vLLM llm_request span with journey events (builds with request journey tracing; docs/formats.md):
    queued 0, scheduled 100, first token 300, preempted 500 -> rescheduled 650, finished 900 (ms)."""
    t0, ms = 1_700_000_000_000_000_000, 1_000_000

    def ev(name: str, t: int) -> dict:
        return {"name": f"journey.{name}", "timeUnixNano": str(t0 + t * ms), "attributes": []}

    attrs = [
        ("gen_ai.request.id", {"stringValue": "cmpl-j-0"}),
        ("gen_ai.latency.time_in_queue", {"doubleValue": 0.1}),
        ("gen_ai.latency.time_in_model_prefill", {"doubleValue": 0.2}),
        ("gen_ai.latency.time_in_model_decode", {"doubleValue": 0.6}),
        ("gen_ai.latency.time_to_first_token", {"doubleValue": 0.3}),
        ("gen_ai.latency.e2e", {"doubleValue": 1.0}),
    ]
    span = {
        "traceId": "t",
        "spanId": "s",
        "name": "llm_request",
        "kind": 2,
        "startTimeUnixNano": str(t0),
        "endTimeUnixNano": str(t0 + 1000 * ms),
        "attributes": [{"key": k, "value": v} for k, v in attrs],
        "events": [
            ev("QUEUED", 0),
            ev("SCHEDULED", 100),
            ev("FIRST_TOKEN", 300),
            ev("PREEMPTED", 500),
            ev("SCHEDULED", 650),
            ev("FINISHED", 900),
        ],
    }
    path.write_text(
        json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [span]}]}]})
    )


def document_text(doc: dict[str, Any], where: str) -> str:
    """An analysis document as text to compare two readings of one run: its run id (the files' hashes name it) and
    sources' sizes taken out, the folder or archive ``where`` as RUN, floats to 12 significant digits (DuckDB's
    parallel sums may add in another order)."""
    doc["run"].pop("id")
    for src in doc["run"]["sources"]:
        src.pop("size_bytes", None)
    return json.dumps(_rounded(doc), sort_keys=True).replace(where, "RUN")


def _rounded(x: Any) -> Any:
    if isinstance(x, float):
        return float(f"{x:.12g}")
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    return x


# -- every --json document a test's command prints is checked against its declared type and its JSON Schema --------

JSON_DOCUMENTS = {"analyze": "analysis", "replay": "replay", "diff": "diff", "estimate": "estimate", "weekly": "weekly"}
"""The commands whose --json prints a document, and the document's name (lltrace.documents.DOCUMENTS)."""


@lru_cache(maxsize=8)
def schema_validator(kind: str) -> jsonschema.Draft202012Validator:
    """A validator of the committed JSON Schema of the document ``kind`` (docs/schema/)."""
    schema = json.loads((REPO / "docs" / "schema" / f"{kind}.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def thinned(value: Any, keep: int = 25) -> Any:
    """A document with every list cut to its first ``keep`` items: what the JSON Schema validator reads of a large
    one (the declared types read all of it)."""
    if isinstance(value, dict):
        return {k: thinned(v, keep) for k, v in value.items()}
    if isinstance(value, list):
        return [thinned(v, keep) for v in value[:keep]]
    return value


def check_document(doc: Any, kind: str) -> None:
    """``doc`` is a valid ``kind`` document: it converts to its type (every field, all of it) and validates against
    the committed JSON Schema (lists thinned)."""
    from lltrace.documents import DocumentError, checked

    try:
        checked(doc, kind)
    except DocumentError as exc:
        pytest.fail(str(exc))
    errors = sorted(schema_validator(kind).iter_errors(thinned(doc)), key=lambda e: list(e.absolute_path))
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path)
        pytest.fail(f"the {kind} document breaks docs/schema/{kind}.schema.json at /{where}: {errors[0].message}")


def _command(args: Any) -> tuple[str | None, list[str]]:
    words = [str(a) for a in args] if isinstance(args, (list, tuple)) else str(args or "").split()
    return next((w for w in words if not w.startswith("-")), None), words


_invoke = CliRunner.invoke


def _checked_invoke(self: CliRunner, cli: Any, args: Any = None, *rest: Any, **kw: Any) -> Any:
    result = _invoke(self, cli, args, *rest, **kw)
    command, words = _command(args)
    if result.exit_code == 0 and "--json" in words and command in JSON_DOCUMENTS:
        check_document(json.loads(result.stdout), JSON_DOCUMENTS[command])
    return result


CliRunner.invoke = _checked_invoke  # every in-process command of every test

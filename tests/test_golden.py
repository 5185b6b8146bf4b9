"""Golden documents: what lltrace says about the five real vLLM CPU runs, kept in tests/data/golden/.

The analysis, replay, diff and weekly documents of runs A, B, B2, D and E, and what their reports show (the
summary and replay sections and every chart's spec), as the CLI prints them. A change to any number here is
either a fix whose before and after are stated (the golden file is regenerated in the same commit), or a bug.
``LLTRACE_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py`` rewrites the files.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA, REPO
from typer.testing import CliRunner

from lltrace.cli import app

GOLDEN = REPO / "tests" / "data" / "golden"
RUNS = ("A_baseline", "B_kvpressure", "B2_kv2x", "D_chunked", "E_prefix")
# the what-ifs each run's replay answers: one of each kind the scheduler model and the roofline take
WHAT_IFS = {
    "A_baseline": ["rate_scale=2", "max_num_seqs=4"],
    "B_kvpressure": ["kv_blocks=80", "chunked_prefill=off"],
    "B2_kv2x": ["kv_blocks=40", "max_num_batched_tokens=256"],
    "D_chunked": ["max_num_seqs=16", "rate_scale=0.5"],
    "E_prefix": ["prefix_caching=off", "block_size=32"],
}
UPDATE = os.environ.get("LLTRACE_UPDATE_GOLDEN") == "1"
REL = 1e-9  # float noise between two ways of adding the same numbers


def _normalise(value: Any) -> Any:
    """Paths relative to sample_traces/ (each clone is elsewhere), floats rounded to 12 significant digits."""
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, str):
        return value.replace(str(DATA), "<data>")
    if isinstance(value, float):
        return None if math.isnan(value) else float(f"{value:.12g}")
    return value


def _cli(*args: str) -> str:
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


def _sort_data(spec: Any) -> None:
    """Rows of a chart's inline data in a fixed order (views give them in no order; the charts draw the same)."""
    if isinstance(spec, dict):
        for k, v in spec.items():
            if k == "values" and isinstance(v, list):
                v.sort(key=lambda row: json.dumps(row, sort_keys=True))
            else:
                _sort_data(v)
    elif isinstance(spec, list):
        for v in spec:
            _sort_data(v)


def _report_parts(page: str) -> dict[str, Any]:
    """What a report shows, without the inlined Vega bundle: its text sections and each chart's spec."""
    specs = json.loads(re.search(r"const specs = (\{.*?\});\n", page, re.DOTALL).group(1))
    for spec in specs.values():
        spec.pop("$schema", None)
        _sort_data(spec)
    sections = re.findall(r"<div id='(lltrace-[\w-]+)'>(.*?)</div>", page, re.DOTALL)
    return {"sections": dict(sections), "charts": specs}


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every golden document, made through the CLI in one store."""
    tmp = tmp_path_factory.mktemp("golden")
    store = str(tmp / "store")
    docs: dict[str, Any] = {}
    ids = {}
    for name in RUNS:
        folder = str(DATA / "vllm_cpu" / name)
        analysis = json.loads(_cli("analyze", folder, "--store", store, "--json", "-q"))
        ids[name] = analysis["run"]["id"]
        docs[f"{name}.analysis"] = analysis
        what_ifs = [a for w in WHAT_IFS[name] for a in ("--what-if", w)]
        docs[f"{name}.replay"] = json.loads(_cli("replay", ids[name], "--store", store, "--json", "-q", *what_ifs))
        page = tmp / f"{name}.html"
        _cli("report", ids[name], "--store", store, "-o", str(page))
        docs[f"{name}.report"] = _report_parts(page.read_text())
    docs["B_to_B2.diff"] = json.loads(_cli("diff", ids["B_kvpressure"], ids["B2_kv2x"], "--store", store, "--json"))
    docs["A_to_D.diff"] = json.loads(_cli("diff", ids["A_baseline"], ids["D_chunked"], "--store", store, "--json"))
    weekly = tmp / "weekly.html"
    docs["weekly"] = json.loads(_cli("weekly", "--store", store, "-o", str(weekly), "--json"))
    docs["weekly.report"] = _report_parts(weekly.read_text())
    return {k: _normalise(v) for k, v in docs.items()}


def _differences(golden: Any, now: Any, where: str = "") -> list[str]:
    """Where two documents differ (floats within REL are equal), as 'path: golden -> now' lines."""
    if isinstance(golden, dict) and isinstance(now, dict):
        out = []
        for k in sorted(set(golden) | set(now), key=str):
            if k not in now:
                out.append(f"{where}.{k}: {golden[k]!r} -> (absent)")
            elif k not in golden:
                out.append(f"{where}.{k}: (absent) -> {now[k]!r}")
            else:
                out += _differences(golden[k], now[k], f"{where}.{k}")
        return out
    if isinstance(golden, list) and isinstance(now, list):
        if len(golden) != len(now):
            return [f"{where}: {len(golden)} items -> {len(now)} items"]
        return [
            d for i, (g, n) in enumerate(zip(golden, now, strict=True)) for d in _differences(g, n, f"{where}[{i}]")
        ]
    if isinstance(golden, (int, float)) and isinstance(now, (int, float)) and not isinstance(golden, bool):
        same = math.isclose(golden, now, rel_tol=REL, abs_tol=1e-12)
        return [] if same else [f"{where}: {golden!r} -> {now!r}"]
    return [] if golden == now else [f"{where}: {str(golden)[:200]!r} -> {str(now)[:200]!r}"]


NAMES = [f"{r}.{kind}" for r in RUNS for kind in ("analysis", "replay", "report")] + [
    "B_to_B2.diff",
    "A_to_D.diff",
    "weekly",
    "weekly.report",
]


@pytest.mark.parametrize("name", NAMES)
def test_document_matches_its_golden_file(name: str, documents: dict[str, Any]) -> None:
    path = GOLDEN / f"{name}.json"
    if UPDATE:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(documents[name], indent=1, sort_keys=True) + "\n")
    golden = json.loads(Path(path).read_text())
    diffs = _differences(golden, documents[name], name)
    assert not diffs, "\n".join(diffs[:40])


def _same_run_apart_from_names(doc: dict[str, Any]) -> dict[str, Any]:
    """A document without what names the run and its files (run id, paths): what two hand-overs of the same
    files may differ in."""
    text = json.dumps(doc, sort_keys=True).replace(doc["run"]["id"], "<run>")
    out = json.loads(text)
    out["run"].pop("id")
    return out


@pytest.mark.parametrize("name", RUNS)
def test_a_folder_and_the_list_of_its_files_are_the_same_run(
    name: str, documents: dict[str, Any], tmp_path: Path
) -> None:
    """Handed over as a folder or as its files named one by one, a run gives the same analysis: the folder
    leaves out only files of no known format (never an ambiguous one, which named alone is an error)."""
    folder = DATA / "vllm_cpu" / name
    as_folder = documents[f"{name}.analysis"]
    assert all(s["kind"] in ("unknown", "near") for s in as_folder["run"]["skipped"])
    unknown = {s["path"] for s in as_folder["run"]["skipped"]}
    files = [str(p) for p in sorted(folder.rglob("*")) if p.is_file() and _normalise(str(p)) not in unknown]
    as_files = _normalise(json.loads(_cli("analyze", *files, "--store", str(tmp_path), "--json", "-q")))
    as_folder = {**as_folder, "run": {**as_folder["run"], "skipped": []}}
    assert _differences(_same_run_apart_from_names(as_folder), _same_run_apart_from_names(as_files)) == []

"""The documents declared once (``lltrace.documents``): every golden document is exactly its type and valid against
the committed JSON Schema, every field says what it means, a key no type declares is refused, the view rows are
what their views declare, and the shared words are defined once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from conftest import REPO, check_document, schema_validator

from lltrace.documents import DOCUMENTS, DocumentError, checked, json_schema
from lltrace.documents.vocabulary import LIMIT_PARTS, Component, Outcome, QueuePart, StepKind

GOLDEN = REPO / "tests" / "data" / "golden"
KIND_OF = {"analysis": "analysis", "replay": "replay", "diff": "diff", "weekly": "weekly"}


def _goldens() -> list[tuple[Path, str]]:
    out = []
    for path in sorted(GOLDEN.glob("*.json")):
        kind = path.name.split(".")[-2]
        if kind in KIND_OF:
            out.append((path, KIND_OF[kind]))
    return out


@pytest.mark.parametrize(("path", "kind"), _goldens(), ids=lambda x: x.name if isinstance(x, Path) else x)
def test_every_golden_document_is_exactly_its_type_and_valid_against_its_schema(path: Path, kind: str) -> None:
    doc = json.loads(path.read_text())
    typed = checked(doc, kind)
    assert msgspec.to_builtins(typed) == doc  # nothing dropped, renamed or added by the types
    errors = list(schema_validator(kind).iter_errors(doc))  # the whole document, no list thinned
    assert errors == [], errors[0].message if errors else ""


def test_the_committed_schemas_are_valid_json_schemas_of_every_document() -> None:
    assert set(DOCUMENTS) == {"analysis", "replay", "diff", "estimate", "weekly"}
    for kind in DOCUMENTS:
        committed = json.loads((REPO / "docs" / "schema" / f"{kind}.schema.json").read_text())
        assert committed == json_schema(kind)
        schema_validator(kind).check_schema(committed)


def test_every_field_of_every_document_says_what_it_means() -> None:
    for kind in DOCUMENTS:
        defs = json_schema(kind)["$defs"]
        missing = [
            f"{name}.{field}"
            for name, node in defs.items()
            for field, sub in node.get("properties", {}).items()
            if not sub.get("description")
        ]
        undocumented_types = [name for name, node in defs.items() if not node.get("description")]
        assert missing == [] and undocumented_types == [], (kind, missing, undocumented_types)


def test_a_key_no_type_declares_is_refused_with_its_place() -> None:
    doc = json.loads((GOLDEN / "B_kvpressure.analysis.json").read_text())
    doc["attribution"]["queue"]["seconds"] = 1.0
    with pytest.raises(DocumentError, match=r"attribution\.queue"):
        checked(doc, "analysis")
    doc = json.loads((GOLDEN / "B_kvpressure.analysis.json").read_text())
    doc["advice"][0]["bottleneck"] = "gpu"  # not a word of the vocabulary
    with pytest.raises(DocumentError, match=r"advice\[0\]\.bottleneck"):
        checked(doc, "analysis")
    with pytest.raises(pytest.fail.Exception, match="breaks its declared type"):
        check_document({"prefill_s": 1.0}, "estimate")


def test_the_view_rows_are_what_their_views_declare() -> None:
    """rows.py is what ``python -m lltrace.documents.generate`` writes from the views (up to ruff's formatting)."""
    from lltrace.documents.generate import ROWS, source

    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(ROWS), "-"],
        input=source(),
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    assert ROWS.read_text() == formatted, "stale rows.py: python -m lltrace.documents.generate && ruff format"


def test_the_shared_words_are_defined_once() -> None:
    """The analysis code reads the vocabulary; nothing spells the lists again."""
    from lltrace.analysis.queue import PARTS
    from lltrace.analysis.requests_section import EXCLUDED_WHY
    from lltrace.analysis.tail import E2E_PARTS
    from lltrace.tables import STEP_KINDS

    assert tuple(E2E_PARTS) == tuple(Component)
    assert tuple(PARTS) == LIMIT_PARTS and QueuePart.LOAD_WAIT not in PARTS
    assert STEP_KINDS == tuple(k.value for k in StepKind)
    assert set(EXCLUDED_WHY) == {o.value for o in Outcome}

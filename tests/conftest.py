"""Shared fixtures: the real traces in ../shared/data and a throw-away run store."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
DATA = SHARED / "data"
SAMPLES = REPO / "sample_traces"


def shared_file(*parts: str) -> Path:
    """A file of ../shared/data; fails loudly when the shared data is not beside the repository."""
    path = DATA.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"real data missing: {path} (the tests need ../shared beside the repository)")
    return path


@lru_cache(maxsize=32)
def raw_trace(path: str) -> dict:
    """The trace parsed with the standard json module: the independent reading tests compare against."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        # Decimal keeps "1712195495519695.812" exact, as lltrace must.
        return json.load(f, parse_float=Decimal)


def torch_traces() -> list[Path]:
    """Every real profiler trace in shared/data (torch/ and the vLLM CPU worker traces)."""
    files = sorted((DATA / "torch").glob("*.json.gz")) + sorted(DATA.glob("vllm_cpu/*/profiler/*.json.gz"))
    if not files:
        pytest.fail(f"no real traces under {DATA}")
    return files


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """An empty store folder."""
    return tmp_path / "store"

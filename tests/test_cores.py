"""The cores lltrace uses (``lltrace.cores.usable_cores``): the ones the process may run on, capped, or as set."""

from __future__ import annotations

import os

import pytest

from lltrace.cores import MAX_CORES, usable_cores


def test_the_cores_this_process_may_run_on_capped(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("LLTRACE_THREADS", raising=False)
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    assert usable_cores() == max(1, min(allowed, MAX_CORES))


@pytest.mark.parametrize("value, expected", [("3", 3), ("1", 1), ("12", 12)])
def test_lltrace_threads_sets_the_number(value: str, expected: int, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LLTRACE_THREADS", value)
    assert usable_cores() == expected


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_a_value_that_is_not_a_positive_integer_is_warned_about_and_not_taken(value: str, monkeypatch):
    monkeypatch.delenv("LLTRACE_THREADS", raising=False)
    expected = usable_cores()
    monkeypatch.setenv("LLTRACE_THREADS", value)
    with pytest.warns(UserWarning, match=f"LLTRACE_THREADS='{value}' is not a positive integer"):
        assert usable_cores() == expected


def test_an_empty_value_is_unset(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("LLTRACE_THREADS", raising=False)
    expected = usable_cores()
    monkeypatch.setenv("LLTRACE_THREADS", " ")
    assert usable_cores() == expected

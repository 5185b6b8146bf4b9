"""How the terminal writes counts: one way everywhere (reports/numbers.py)."""

from __future__ import annotations

from lltrace.reports.numbers import count_noun, whole


def test_a_count_of_one_takes_the_singular_and_every_other_count_the_plural() -> None:
    assert count_noun(1, "step") == "1 step"
    assert count_noun(0, "step") == "0 steps"
    assert count_noun(2, "request") == "2 requests"
    assert count_noun(12345, "step") == "12,345 steps"


def test_an_unknown_count_reads_as_a_dash_and_a_rate_to_the_nearest_whole() -> None:
    assert whole(None) == "-"
    assert whole(209.97) == "210"

"""How the terminal writes a number: milliseconds, percentages, rates and counts, one way everywhere."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any


def ms(v: float | None) -> str:
    """Seconds as milliseconds with two decimals ("-" when unknown)."""
    return "-" if v is None else f"{v * 1e3:,.2f}"


def pct(v: float | None) -> str:
    """A fraction as a percentage with one decimal ("-" when unknown)."""
    return "-" if v is None else f"{v * 100:.1f}%"


def per_s(v: float) -> str:
    """A rate at three significant figures without an exponent (0.256, 9.55, 4,350)."""
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def whole(v: Any) -> str:
    """A count with thousands separators ("-" when unknown); a rate or mean to the nearest whole (209.97 is 210, as
    the tool that wrote it prints it), never cut."""
    if v is None:
        return "-"
    return f"{v:,}" if isinstance(v, int) else f"{float(v):,.0f}"


def count_noun(n: int | None, noun: str) -> str:
    """A count and its noun, singular for one ("1 step", "2 steps"; "-" for an unknown count)."""
    return f"{whole(n)} {noun if n == 1 else noun + 's'}"


def window_label(t: float) -> str:
    """A window's start: a UTC date, or hours from the trace start for traces on a relative clock."""
    if t < 1e9:  # before 2001: a relative clock (Mooncake ms from 0, BurstGPT seconds from day 1)
        return f"trace start +{t / 3600:,.1f} h"
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")

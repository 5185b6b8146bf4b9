"""Kernel classes (gemm, attention, communication, memory, elementwise, sync, other) from one rule table.

The rules are data: ``kernel_classes.csv`` beside this module, first match wins. A rule may be limited to
profiler categories (``cats``); its ``pattern`` is a case-insensitive regular expression searched in the
kernel name. ``variant`` tells prefill from decode attention where the kernel's name gives it away.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

KERNEL_CLASSES = ("gemm", "attention", "communication", "memory", "elementwise", "sync", "other")


@dataclass(frozen=True)
class KernelRule:
    """One row of kernel_classes.csv."""

    kernel_class: str
    variant: str | None
    cats: frozenset[str]
    pattern: re.Pattern[str]
    why: str


@lru_cache(maxsize=1)
def rules() -> tuple[KernelRule, ...]:
    """The packaged rule table, in match order."""
    text = resources.files("lltrace.parsers").joinpath("kernel_classes.csv").read_text()
    out = []
    for row in csv.DictReader(text.splitlines()):
        out.append(
            KernelRule(
                kernel_class=row["class"],
                variant=row["variant"] or None,
                cats=frozenset(c for c in row["cats"].split("|") if c),
                pattern=re.compile(row["pattern"], re.IGNORECASE),
                why=row["why"],
            )
        )
    return tuple(out)


def classify(name: str, cat: str = "kernel") -> tuple[str, str | None]:
    """Return (kernel class, attention variant or None) for one GPU op."""
    for rule in rules():
        if rule.cats and cat not in rule.cats:
            continue
        if rule.pattern.search(name):
            return rule.kernel_class, rule.variant
    return "other", None


def classify_pairs(names: list[str], cats: list[str]) -> tuple[list[str], list[str | None]]:
    """Classify distinct (name, cat) pairs: their classes and attention variants, in order."""
    classes: list[str] = []
    variants: list[str | None] = []
    for name, cat in zip(names, cats, strict=True):
        c, v = classify(name or "", cat or "kernel")
        classes.append(c)
        variants.append(v)
    return classes, variants

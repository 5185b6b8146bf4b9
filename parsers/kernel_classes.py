"""Kernel classes (gemm, attention, communication, memory, elementwise, sync, other) from one rule table.

The rules are data: ``kernel_classes.csv`` beside this module, first match wins. A rule may be limited to
profiler categories (``cats``); its ``pattern`` is a case-insensitive regular expression searched in the
kernel name. ``variant`` tells prefill from decode attention where the kernel's name gives it away;
``every_step`` marks a decode kernel that some backend launches for every batch, its programs skipping the
longer queries, so that beside a prefill kernel it does not say a decode request was there.
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
    every_step: bool = False


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
                every_step=row["every_step"] == "yes",
            )
        )
    return tuple(out)


def rule_for(name: str, cat: str = "kernel") -> KernelRule | None:
    """The first rule that matches one GPU op, or None (class ``other``)."""
    for rule in rules():
        if rule.cats and cat not in rule.cats:
            continue
        if rule.pattern.search(name):
            return rule
    return None


def classify(name: str, cat: str = "kernel") -> tuple[str, str | None]:
    """Return (kernel class, attention variant or None) for one GPU op."""
    rule = rule_for(name, cat)
    return (rule.kernel_class, rule.variant) if rule else ("other", None)


def launched_every_step(names: list[str]) -> list[str]:
    """Those of ``names`` (kernels) whose rule says some backend launches them for every batch."""
    return [n for n in names if (rule := rule_for(n or "")) is not None and rule.every_step]


def classify_pairs(names: list[str], cats: list[str]) -> tuple[list[str], list[str | None]]:
    """Classify distinct (name, cat) pairs: their classes and attention variants, in order."""
    classes: list[str] = []
    variants: list[str | None] = []
    for name, cat in zip(names, cats, strict=True):
        c, v = classify(name or "", cat or "kernel")
        classes.append(c)
        variants.append(v)
    return classes, variants

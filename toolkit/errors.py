"""Named errors of lltrace. The CLI turns each into one line on stderr and exit code 1."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SHOWN_LIMIT = 2_000
"""The most characters of one string (one line of it) lltrace shows in a terminal, a page or an error line: a longer
one is cut there, with how much was left out said. Documents (JSON) keep every string whole."""


def visible(text: str, limit: int = SHOWN_LIMIT) -> str:
    """``text`` with every control character shown, not obeyed (a newline as ``\\n``, an escape as ``\\x1b``), cut
    at ``limit`` characters (``SHOWN_LIMIT``) with the count left out said: for strings lltrace did not write (file
    names, ids, error texts) on a line of its own."""
    kept = text[:limit]
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in kept)
    return shown if len(text) <= limit else f"{shown}… ({len(text) - limit:,} more characters)"


class LltraceError(Exception):
    """Base class of every error lltrace raises on purpose."""


class TraceFormatError(LltraceError):
    """A file is of a known format but its content is broken (says file and byte offset or line)."""

    def __init__(self, path: str, where: str, message: str) -> None:
        self.path = path
        self.where = where
        self.message = message
        super().__init__(f"{path}: {where}: {message}")


class UnexpectedContent(TraceFormatError):
    """A file sniffed as a known format holds content its parser did not expect (a mangled structure).

    Raised in place of the parser's own exception, so the CLI still prints one line; the fuzzer
    (benchmarks/fuzz_parsers.py) reports these apart from the parsers' own precise errors.
    """


class UnknownFormat(LltraceError):
    """A file named explicitly matches no format lltrace reads."""


class StoreError(LltraceError):
    """The run store is missing, unreadable, or does not hold the run asked for."""


class AnalysisError(LltraceError):
    """An analysis could not be made from what the run holds."""


class QueryError(LltraceError):
    """A packaged SQL view does not bind over the store's tables (names the view and what it lacks)."""


class InputWarning(UserWarning):
    """A source was read with a caveat the user should see (a missing scrape time, say)."""


class TruncatedInput(InputWarning):
    """A source ended early; lltrace read it as far as it was valid (the message says how much was dropped)."""


def said_of(value: Any, renames: Sequence[tuple[str, str]]) -> Any:
    """What is said of one file said of another: each (old, new) text replaced in turn in ``value``, a message or
    the dicts and lists of them a source's details hold (a decompressed copy's or an unpacked archive's path said
    as the file the user named)."""
    if isinstance(value, str):
        for old, new in renames:
            value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {k: said_of(v, renames) for k, v in value.items()}
    if isinstance(value, list):
        return [said_of(v, renames) for v in value]
    return value

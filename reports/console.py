"""The terminal that shows lltrace's output: every string lltrace did not write (file and folder names, request and
client ids, model, kernel and op names, error texts, log lines, label values) reaches it with its control characters
shown, not obeyed (``\\x1b``, ``\\u202e``), whichever renderer placed it.

Sanitised where Rich has laid the text out and before it adds its own styling: each text segment of a render, so a
string in a table cell, a panel title or a sentence is treated alike, and Rich's own colours still reach the
terminal. A newline stays a newline (Rich has already broken the text into lines at it); a line longer than
``lltrace.errors.SHOWN_LIMIT`` characters is cut there, with how much was left out said. Rich's own ``Text`` drops a
bell, a backspace, a vertical tab, a form feed and a carriage return when it is made, before any render: the reports
build their text with this module's ``Text``, which shows them instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich import text as rich_text
from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.style import Style

from lltrace.errors import SHOWN_LIMIT, visible


def _shown(text: str) -> str:
    """``text`` as the terminal gets it: each line's control characters shown and the line cut at ``SHOWN_LIMIT``."""
    if len(text) <= SHOWN_LIMIT and (text.isprintable() or text == "\n"):
        return text
    return "\n".join(visible(part) for part in text.split("\n"))


class Text(rich_text.Text):
    """Rich's ``Text`` with every control character shown (``\\x07``), not dropped: Rich removes a bell, a backspace,
    a vertical tab, a form feed and a carriage return silently when a ``Text`` is made or appended to, so a string
    lltrace did not write would lose them before ``SafeConsole`` could show them. The reports build their text with
    this class (a house test keeps Rich's own out of them)."""

    def __init__(self, text: str = "", *args: Any, **kwargs: Any) -> None:
        super().__init__(_shown(text), *args, **kwargs)

    def append(self, text: str | rich_text.Text, style: str | Style | None = None) -> Text:
        """``text`` added at the end, its control characters shown."""
        super().append(_shown(text) if isinstance(text, str) else text, style)
        return self


class SafeConsole(Console):
    """A ``rich`` console whose every text segment shows its control characters (``lltrace.errors.visible``)."""

    def render_str(self, text: str, **kwargs: Any) -> rich_text.Text:
        """A string made text: its control characters shown before Rich lays it out (so the shown form is what is
        measured) and before Rich's own ``Text`` drops some of them silently (a bell, a carriage return)."""
        return super().render_str(_shown(text), **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for seg in super().render(renderable, options):
            if seg.control or seg.text.isprintable():
                yield seg
            else:
                yield Segment(_shown(seg.text), seg.style, seg.control)

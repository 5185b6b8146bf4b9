"""Strings lltrace did not write are untrusted: a real vLLM bench file (K_steady's) whose failed requests carry
hostile error texts, in a folder and under a file name that carry escapes too, goes through `lltrace analyze` (the
summary, --verbose and --json) and `lltrace report` (HTML): nothing is obeyed or interpreted, every such string is
shown with its control characters visible in the terminal and escaped in HTML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import DATA
from rich.text import Text
from typer.testing import CliRunner

from lltrace.cli import app
from lltrace.reports.console import SafeConsole

CLEAR = "\x1b[2J\x1b]0;pwned\x07HTTP 500"
SCRIPT = '<script>alert("xss")</script> Bad Request'
IFRAME = "</table><iframe src=javascript:alert(1)> Gateway Timeout"
RLO = "\u202eexe.txt"  # right-to-left override: text that reads backwards


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    data = json.loads((DATA / "vllm_cpu_incidents/K_steady/bench/chat.json").read_text())
    for i, text in enumerate((CLEAR, SCRIPT, IFRAME, RLO)):
        data["errors"][i] = text
    folder = root / "run\x1b[31m"
    folder.mkdir()
    path = folder / "chat\x1b]0;x\x07.json"
    path.write_text(json.dumps(data))
    return path


def _strings(obj: object) -> list[str]:
    """Every string in a JSON value."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def _no_control(text: str) -> None:
    """Nothing a terminal would obey: no escape, bell, carriage return or bidi override."""
    for c in ("\x1b", "\x07", "\r", "\u202e"):
        assert c not in text, (c, text[max(0, text.find(c) - 80) : text.find(c) + 80])


def test_the_terminal_shows_control_characters_and_obeys_none(hostile: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    for extra in ([], ["--verbose"]):
        r = CliRunner().invoke(app, ["analyze", str(hostile), "--store", str(store), *extra])
        assert r.exit_code == 0, r.output[-2000:]
        _no_control(r.output)
        assert "\\x1b" in r.output  # the file name, shown
    # the error texts, under the requests left out: the escapes shown (a bell Rich drops), the override as its code
    assert "\\x1b[2J\\x1b]0;pwned" in r.output and "HTTP 500" in r.output and "\\u202eexe.txt" in r.output
    assert SCRIPT in r.output  # a terminal runs no script: shown as written


def test_a_safe_console_shows_what_a_plain_one_would_obey() -> None:
    """The console itself, on a terminal (with Rich's own colours): text in a sentence, a table cell and styled text
    has its escapes shown; Rich's colour codes still reach the terminal."""
    from io import StringIO

    from rich.table import Table

    buf = StringIO()
    c = SafeConsole(file=buf, force_terminal=True, width=100, color_system="standard")
    t = Table("error")
    t.add_row(CLEAR)
    c.print(f"a failure: {CLEAR}", markup=False, highlight=False)
    c.print(t)
    c.print(Text(RLO, style="bold red"))
    out = buf.getvalue()
    assert out.count("\\x1b[2J") == 2 and "\\u202e" in out
    assert "\x1b[2J" not in out and "\x1b]0;" not in out and "\x07" not in out and "\u202e" not in out
    assert "\x1b[1;31m" in out or "\x1b[31;1m" in out  # Rich's own style, still a colour


def test_json_and_html_keep_the_text_and_interpret_none(hostile: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    r = CliRunner().invoke(app, ["analyze", str(hostile), "--store", str(store), "--json", "-q"])
    assert r.exit_code == 0
    doc = json.loads(r.stdout)  # JSON escapes control characters (\\u001b); the texts themselves are kept whole
    assert "\\u001b[2J" in r.stdout and CLEAR in _strings(doc)
    html_path = tmp_path / "report.html"
    h = CliRunner().invoke(app, ["report", doc["run"]["id"], "--store", str(store), "-o", str(html_path)])
    assert h.exit_code == 0, h.output
    page = html_path.read_text()
    for raw in ("<script>alert(", "<iframe src=javascript", "\x1b", "\x07", "\u202e"):
        assert raw not in page, raw


def test_the_report_runs_nothing_a_string_carries_in_chromium(tmp_path: Path) -> None:
    """The report of a run whose error texts carry markup that would run if interpreted (an image whose load error
    marks the page, a script that retitles it), opened in headless Chromium with no network: the DOM the browser
    built holds neither mark, and the texts are there as text."""
    from test_browser import _chromium, _render

    exe = _chromium()
    data = json.loads((DATA / "vllm_cpu_incidents/K_steady/bench/chat.json").read_text())
    data["errors"][0] = "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\"> HTTP 502"
    data["errors"][1] = "</script><script>document.title='pwned'</script> HTTP 503"
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(data))
    store = tmp_path / "store"
    run = json.loads(CliRunner().invoke(app, ["analyze", str(path), "--store", str(store), "--json", "-q"]).stdout)
    page = tmp_path / "report.html"
    assert CliRunner().invoke(app, ["report", run["run"]["id"], "--store", str(store), "-o", str(page)]).exit_code == 0
    dom, _ = _render(exe, page, tmp_path / "profile", tmp_path / "shot.png")
    assert 'class="marks"' in dom  # the page drew: its scripts ran, the strings' did not
    assert 'data-pwned="1"' not in dom and "<title>pwned" not in dom  # the attribute the image would set
    assert "HTTP 502" in dom and "HTTP 503" in dom

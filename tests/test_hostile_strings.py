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


def _analyzed(path: Path, store: Path) -> str:
    """``lltrace analyze`` of ``path``, its first screen and its ``--verbose`` one, each obeying nothing; the second
    one's output."""
    for extra in ([], ["--verbose"]):
        r = CliRunner().invoke(app, ["analyze", str(path), "--store", str(store), *extra])
        assert r.exit_code == 0, r.output[-2000:]
        _no_control(r.output)
        assert "\\x1b" in r.output  # the file name, shown
    return r.output


def test_the_terminal_shows_control_characters_and_obeys_none(hostile: Path, tmp_path: Path) -> None:
    out = _analyzed(hostile, tmp_path / "store")
    # the error texts, under the requests left out: the escapes and the bell shown, the override as its code
    assert "\\x1b[2J\\x1b]0;pwned\\x07HTTP 500" in out and "\\u202eexe.txt" in out
    assert SCRIPT in out  # a terminal runs no script: shown as written


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


def test_the_reports_text_shows_what_richs_own_drops() -> None:
    """Rich's ``Text`` removes a bell, a backspace, a form feed and a carriage return when it is made: the reports'
    own ``Text`` shows them, made or appended to, and keeps a newline a newline."""
    from lltrace.reports.console import Text as Shown

    made = Shown("a\x07b\rc\x08d\x0ce\nf")
    made.append("\x07g", style="bold")
    assert made.plain == "a\\x07b\\rc\\x08d\\x0ce\nf\\x07g"
    assert Shown.assemble("x", ("\r", "red")).plain == "x\\r"
    assert Text("a\x07b").plain == "ab"  # Rich's own, for contrast


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


@pytest.fixture(scope="module")
def hostile_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real profiler trace (SGLang on an MI300X, one decode step) whose two costliest kernels, an operator and
    the process carry hostile names: the places a trace can put a string lltrace did not write."""
    import gzip

    trace = json.loads(gzip.open(DATA / "torch/sglang_mi300x_qwen3-8b_decode_step.AMD.json.gz").read())
    events = trace["traceEvents"]
    kernels: dict[str, float] = {}
    for e in events:
        if e.get("cat") == "kernel":
            kernels[e["name"]] = kernels.get(e["name"], 0.0) + e.get("dur", 0.0)
    top = sorted(kernels, key=kernels.__getitem__, reverse=True)[:2]
    rename = {top[0]: CLEAR, top[1]: IFRAME}
    for e in events:
        if e.get("name") in rename:
            e["name"] = rename[e["name"]]
        elif e.get("cat") == "cpu_op":
            e["name"] = SCRIPT
        elif e.get("ph") == "M" and e.get("name") == "process_name":
            e["args"]["name"] = RLO
    path = tmp_path_factory.mktemp("hostile_trace") / "decode\x1b[2J.json"
    path.write_text(json.dumps(trace))
    return path


def test_a_traces_names_reach_every_output_shown_never_obeyed(hostile_trace: Path, tmp_path: Path) -> None:
    """Kernel, operator and process names and the file's name through the terminal (control characters shown), the
    HTML report (no raw markup), the charts as PNG (drawn: vl-convert lays text out as glyphs) and the Perfetto
    export (valid JSON). The outputs name kernel classes, not kernels, so the file's name is the string seen."""
    store = tmp_path / "store"
    assert "decode\\x1b[2J.json" in _analyzed(hostile_trace, store)  # the file name, shown
    run = json.loads(CliRunner().invoke(app, ["analyze", str(hostile_trace), "--store", str(store), "--json"]).stdout)
    page, png = tmp_path / "report.html", tmp_path / "png"
    h = CliRunner().invoke(app, ["report", run["run"]["id"], "--store", str(store), "-o", str(page), "--png", str(png)])
    assert h.exit_code == 0, h.output
    text = page.read_text()
    for raw in ("<script>alert(", "<iframe src=javascript", "\x1b", "\x07", "\u202e"):
        assert raw not in text, raw
    assert list(png.glob("*.png")) and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in png.glob("*.png"))
    out = tmp_path / "trace.json"
    e = CliRunner().invoke(app, ["export", "perfetto", run["run"]["id"], "--store", str(store), "-o", str(out)])
    assert e.exit_code == 0, e.output
    json.loads(out.read_text())  # valid JSON


def test_the_perfetto_export_keeps_a_hostile_request_id_whole_in_valid_json() -> None:
    """A request's lane is named by its id, which a client or an engine wrote: the trace is valid JSON (control
    characters escaped by the encoder) and the id comes back whole, for the viewer to show as text."""
    from lltrace.reports.perfetto import trace_document

    ids = (CLEAR, SCRIPT, RLO)
    rows = [
        {"request_id": rid, "queued_s": 0.0, "scheduled_s": 0.1, "first_token_s": 0.2, "last_token_s": 0.3}
        for rid in ids
    ]
    doc, counts = trace_document("run", rows, [], [], [])
    back = json.loads(json.dumps(doc))
    names = {e["args"]["name"] for e in back["traceEvents"] if e.get("name") == "thread_name"}
    assert names == set(ids) and counts["requests"] == 3


def test_a_string_too_long_to_read_is_cut_where_shown_and_kept_whole_in_documents(tmp_path: Path) -> None:
    """A string lltrace did not write is shown up to ``SHOWN_LIMIT`` characters a line, with how much was left out
    said: in the terminal, on the page, in an error line; a file's one-line error stays one line."""
    from io import StringIO

    from lltrace.errors import SHOWN_LIMIT, visible
    from lltrace.reports.console import Text as Shown
    from lltrace.reports.page import esc

    long = "x" * (SHOWN_LIMIT + 3_000) + "END"
    assert visible("short\x1b") == "short\\x1b" and visible(long).endswith("… (3,003 more characters)")
    assert esc("<b>" + long).startswith("&lt;b&gt;") and esc(long).endswith("(3,003 more characters)")
    buf = StringIO()
    SafeConsole(file=buf, width=120).print(Shown(long))
    out = buf.getvalue()
    assert "END" not in out and "3,003 more characters" in out
    missing = tmp_path / ("d" * 200) / ("e" * 200) / ("f" * 200) / ("g" * 200) / ("h" * 200) / "run.json"
    r = CliRunner().invoke(app, ["analyze", str(missing) * 3, "--store", str(tmp_path / "store")])
    assert r.exit_code == 1 and r.output.count("lltrace: error:") == 1

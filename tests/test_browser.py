"""The reports open in headless Chromium (Debian's package, installed by .ci/run) with no network at all:
every chart draws (its title is in the rendered SVG), no console error; a screenshot of each is kept in
test-artifacts/. Without chromium these tests skip, saying how to run them, except under
LLTRACE_REQUIRE_BROWSER=1 (set by .ci/run), where a missing browser fails the run."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import DATA, REPO

import lltrace
from lltrace.analysis.document import analyze
from lltrace.analysis.report import report
from lltrace.analysis.weekly import weekly
from lltrace.documents import checked
from lltrace.replay.document import replay
from lltrace.reports.weekly_html import write_weekly_html as write_weekly

ARTIFACTS = REPO / "test-artifacts"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--enable-logging=stderr",
    "--v=0",
    "--virtual-time-budget=15000",
]


def _chromium() -> str:
    """The browser, or a skip saying how to run these tests (a failure where CI requires the browser)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        why = (
            "chromium is not installed: `apt-get install chromium` (Debian's package) to draw the reports in a "
            "browser; .ci/run installs it and sets LLTRACE_REQUIRE_BROWSER=1"
        )
        if os.environ.get("LLTRACE_REQUIRE_BROWSER") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return exe


@pytest.fixture
def chromium() -> str:
    """The browser executable (asked before a test does any work)."""
    return _chromium()


def _render(exe: str, page: Path, profile: Path, shot: Path) -> tuple[str, str]:
    dom = subprocess.run(
        [exe, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    subprocess.run(
        [exe, *FLAGS, f"--user-data-dir={profile}", "--window-size=1000,2600", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return dom.stdout, dom.stderr


@pytest.mark.parametrize("run_dir", ["A_baseline", "B_kvpressure"])
def test_run_report_draws_in_chromium(run_dir, tmp_path, chromium):
    ARTIFACTS.mkdir(exist_ok=True)
    page = tmp_path / f"{run_dir}.html"
    if run_dir == "B_kvpressure":  # a replayed run: its report has the replay chart too
        replay(DATA / "vllm_cpu" / run_dir, store=tmp_path / "s", what_ifs={"kv_blocks": 80})
    charts = report(analyze([DATA / "vllm_cpu" / run_dir], store=tmp_path / "s"), page)
    assert ("replay" in charts) == (run_dir == "B_kvpressure")
    shot = ARTIFACTS / f"report_{run_dir}.png"
    dom, log = _render(chromium, page, tmp_path / "profile", shot)
    assert 'class="marks"' in dom, "vega drew nothing"
    titles = {
        "requests": "Where each request",
        "latency": "latency distributions",
        "sizes": "Request sizes",
        "timeline": "Engine load over time",
        "steps": "Engine steps",
        "interference": "Interference",
        "replay": "Replay: measured, replayed",
    }
    for name in charts:
        assert titles[name] in dom, f"chart {name} did not draw"
    errors = [ln for ln in log.splitlines() if "CONSOLE" in ln and ("ERROR" in ln or '"error' in ln.lower())]
    assert errors == []
    assert shot.stat().st_size > 20_000


def test_weekly_report_draws_in_chromium(tmp_path, chromium):
    ARTIFACTS.mkdir(exist_ok=True)
    store = tmp_path / "s"
    for p in (
        DATA / "serving" / "azure_llm_2023" / "AzureLLMInferenceTrace_code.csv",
        DATA / "serving" / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv",
        DATA / "serving" / "mooncake" / "conversation_trace.jsonl",
    ):
        lltrace.ingest([p], store=store)
    page = tmp_path / "weekly.html"
    write_weekly(checked(weekly(store=store, window="hour", model="llama-2-70b", gpu="H100-SXM"), "weekly"), page)
    dom, log = _render(chromium, page, tmp_path / "profile", ARTIFACTS / "weekly.png")
    assert 'class="marks"' in dom and "Requests per window" in dom and "Prompt and output lengths" in dom
    assert not [ln for ln in log.splitlines() if "CONSOLE" in ln and "ERROR" in ln]


def test_an_incident_reports_first_screen_is_its_timeline(tmp_path, chromium):
    """The report of a run with an incident opens with it: in a 1280x800 window, the incident's sentence and its
    timeline chart (drawn: its SVG holds marks) start within the first screen."""
    ARTIFACTS.mkdir(exist_ok=True)
    page = tmp_path / "incident.html"
    charts = report(analyze([DATA / "vllm_cpu_incidents" / "L_long"], store=tmp_path / "s"), page)
    assert "incident" in charts
    probe = (
        "<script>setTimeout(() => { const c = document.getElementById('chart-incident');"
        " const r = c.getBoundingClientRect();"
        " const s = document.getElementById('lltrace-incident').getBoundingClientRect();"
        " document.body.setAttribute('data-probe', [Math.round(s.top), Math.round(r.top), Math.round(r.bottom),"
        " c.querySelectorAll('.marks').length].join(',')); }, 8000);</script></body>"
    )
    text = page.read_text()  # the last </body>: the inlined bundle holds the string too
    cut = text.rindex("</body>")
    page.write_text(text[:cut] + probe + text[cut + len("</body>") :])
    flags = [*FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,800"]
    dom = subprocess.run([chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    subprocess.run(
        [chromium, *flags, f"--screenshot={ARTIFACTS / 'report_incident_first_screen.png'}", page.as_uri()],
        capture_output=True,
        timeout=120,
    )
    probe_values = dom.stdout.split('data-probe="', 1)[1].split('"', 1)[0]
    sentence_top, chart_top, chart_bottom, marks = (int(v) for v in probe_values.split(","))
    assert marks > 0, "the incident chart drew nothing"
    assert 0 <= sentence_top < chart_top < 800, probe_values
    assert chart_top < 400, f"the incident timeline starts at {chart_top} px: below the first screen's middle"

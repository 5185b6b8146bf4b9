"""The documentation: the MkDocs site builds in strict mode (every link between its pages resolves), and the README
stays a five-minute read whose two set-up commands are its only install blocks."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO


def test_the_docs_site_builds_strict(tmp_path):
    """``mkdocs build --strict`` of ``mkdocs.yml``: a broken link, a missing anchor or a page left out of the nav
    fails the build."""
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_readme_is_short_and_has_the_two_setup_commands():
    """README.md is under 250 lines, and its only ```bash blocks with ``pip install`` are the two set-up commands:
    the main job on a bundled run, and the tests."""
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) < 250
    blocks = re.findall(r"^```bash\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    setup = [b.strip() for b in blocks if "pip install" in b]
    assert setup == [
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && "
        "lltrace analyze sample_traces/vllm_cpu/B_kvpressure",
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && python -m pytest -q",
    ]

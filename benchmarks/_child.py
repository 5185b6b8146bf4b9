"""Run one measured piece of code in a fresh Python process: seconds (imports not timed), the CPU-seconds it used
(all its threads) and peak RSS."""

from __future__ import annotations

import json
import subprocess
import sys

# the process's own peak: VmHWM is reset by exec, while ru_maxrss keeps the parent's peak at the fork (a
# benchmark that built its input in memory would see that peak in every step)
_PEAK = """
def peak():
    try:
        for line in open('/proc/self/status'):
            if line.startswith('VmHWM:'):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
"""


def run_child(imports: str, work: str, variables: dict[str, object]) -> dict:
    """Execute ``imports``, bind ``variables``, time ``work``; returns {seconds, cpu_seconds, peak_rss} or {error}."""
    bindings = "".join(f"{k} = {v!r}\n" for k, v in variables.items())
    code = (
        "import json, resource, time\n"
        + _PEAK
        + imports
        + bindings
        + "t = time.perf_counter()\nc = time.process_time()\n"
        + work
        + "dt = time.perf_counter() - t\ndc = time.process_time() - c\n"
        "print(json.dumps({'seconds': dt, 'cpu_seconds': dc, 'peak_rss': peak()}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])

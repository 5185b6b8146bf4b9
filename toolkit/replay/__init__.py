"""The replay: a run's requests re-run through a continuous-batching model of the engine (``scheduler``),
with a step cost calibrated on the same run (``cost``, ``calibration``), its own error reported first, then
what-ifs (``whatifs``); ``document`` assembles the replay document (``lltrace.replay``).

Import the modules by their full names (``from lltrace.replay.scheduler import simulate``): the attribute
``lltrace.replay`` is the function.
"""

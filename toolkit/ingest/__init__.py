"""Assembling a run: which files make it (``files``), reading them into the store whole or not at all
(``pipeline``: ``lltrace.ingest``), joining client and engine records on one clock (``join``), placing log
times (``clocks``), labelled estimates (``estimates``), many runs at once (``many``: ``lltrace.ingest_each``),
and what a command's run argument names (``targets``).

Import the modules by their full names (``from lltrace.ingest.pipeline import ingest``): the attribute
``lltrace.ingest`` is the function.
"""

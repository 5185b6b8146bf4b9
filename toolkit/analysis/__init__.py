"""Analysis of stored runs: the analysis document (``document``: ``lltrace.analyze``), classification with
its one label rule (``classify``), advice (``advice``), ``diff`` of two runs, ``weekly`` over a store, the
report's inputs (``report``) and the Perfetto export (``export``). They read the query views and the
physics; ``lltrace.reports`` draws what they return."""

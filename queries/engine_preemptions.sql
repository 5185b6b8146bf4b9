-- engine_preemptions: preemptions over a run, the one figure analyze and diff print: per engine (replica), the
-- cumulative counter's change between its first and last reading (the reading itself where there is one:
-- preemptions since the server started), the largest such figure among the sources that count it (a log and a
-- scrape of one engine count the same preemptions), summed over engines.
-- requires: engine_stats, engine_windows
-- engine_windows over one window, the whole run: the same rule as every window's count.
-- columns:
--   run_id       run
--   preemptions  preemptions over the readings' span, all engines
--   engines      engines that reported the counter
CREATE OR REPLACE VIEW engine_preemptions AS
SELECT w.run_id, w.preemptions, r.engines
FROM engine_windows(NULL, NULL, NULL) w
JOIN (SELECT run_id, count(DISTINCT engine) AS engines FROM engine_stats WHERE preemptions_total IS NOT NULL
      GROUP BY run_id) r USING (run_id)
WHERE w.preemptions IS NOT NULL;

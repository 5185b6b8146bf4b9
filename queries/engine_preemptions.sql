-- engine_preemptions: preemptions over a run, the one figure analyze and diff print: per engine (replica), the
-- cumulative counter's change between its first and last reading (the reading itself where there is one:
-- preemptions since the server started), the largest such figure among the sources that count it (a log and a
-- scrape of one engine count the same preemptions), summed over engines.
-- requires: engine_stats
-- columns:
--   run_id       run
--   preemptions  preemptions over the readings' span, all engines
--   engines      engines that reported the counter
CREATE OR REPLACE VIEW engine_preemptions AS
WITH per_source AS (
    SELECT run_id, engine, source,
           max(preemptions_total) - CASE WHEN count(*) > 1 THEN min(preemptions_total) ELSE 0 END AS n
    FROM engine_stats WHERE preemptions_total IS NOT NULL GROUP BY run_id, engine, source
), per_engine AS (
    SELECT run_id, engine, max(n) AS n FROM per_source GROUP BY run_id, engine
)
SELECT run_id, sum(n) AS preemptions, count(*) AS engines FROM per_engine GROUP BY run_id;

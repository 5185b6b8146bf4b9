-- engine_stats_span: how long a run's engine samples span and how far apart they are (what a timeline of them can
-- show: the window width of analyze's engine timeline is chosen from these).
-- requires: engine_stats
-- columns:
--   run_id    run
--   span_s    first to last timed sample, seconds
--   step_s    median time between consecutive distinct sample times, seconds (NULL: one sample time)
CREATE OR REPLACE VIEW engine_stats_span AS
WITH t AS (SELECT DISTINCT run_id, ts_s FROM engine_stats WHERE ts_s IS NOT NULL),
gaps AS (SELECT run_id, ts_s, ts_s - lag(ts_s) OVER (PARTITION BY run_id ORDER BY ts_s) AS d FROM t)
SELECT run_id, max(ts_s) - min(ts_s) AS span_s, median(d) AS step_s FROM gaps GROUP BY run_id;

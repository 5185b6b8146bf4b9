-- incident_engine_windows: the engine window by window on the incident timeline's windows (a table macro:
-- incident_engine_windows(width_s, origin_s): windows of width_s seconds from origin_s, the run's first counted
-- arrival on the run clock): step time and prompt tokens a step, requests running and waiting, KV usage, and the
-- arrivals of each client (docs/incidents.md).
-- requires: engine_steps, engine_stats, incident_arrivals
-- Steps as incident_engine reads them (the iteration log where the run has one, else the profiler's), placed by
-- their start; samples by their time; requests by their arrival. Windows before origin_s (an engine sample before
-- the first arrival) are left out.
-- columns:
--   run_id            run
--   window_index      the window's number (0 from origin_s)
--   step_time_mean_s  mean step time, seconds (NULL: no step)
--   prompt_tokens_per_step  mean prompt tokens a step
--   running_mean      requests running, mean over the samples
--   waiting_mean      requests waiting, mean over the samples
--   kv_peak           highest KV-cache usage at a sample (0-1)
--   arrivals          counted arrivals by client: a map client -> requests (the client '' where none is named)
CREATE OR REPLACE MACRO incident_engine_windows(width_s, origin_s) AS TABLE
WITH pick AS (
    SELECT run_id, CASE WHEN bool_or(source = 'log') THEN 'log' ELSE 'profiler' END AS source
    FROM engine_steps WHERE start_s IS NOT NULL GROUP BY run_id
), steps AS (
    SELECT s.run_id, CAST(floor((s.start_s - origin_s) / width_s) AS BIGINT) AS window_index,
           avg(s.wall_s) AS step_time_mean_s, avg(s.prefill_tokens) AS prompt_tokens_per_step
    FROM engine_steps s JOIN pick USING (run_id, source)
    WHERE s.start_s >= origin_s GROUP BY ALL
), samples AS (
    SELECT run_id, CAST(floor((ts_s - origin_s) / width_s) AS BIGINT) AS window_index, avg(running) AS running_mean,
           avg(waiting) AS waiting_mean, max(kv_usage) AS kv_peak
    FROM engine_stats WHERE ts_s >= origin_s GROUP BY ALL
), by_client AS (
    SELECT run_id, CAST(floor(t_s / width_s) AS BIGINT) AS window_index, coalesce(client_id, '') AS client,
           count(*) AS n
    FROM incident_arrivals GROUP BY ALL
), arrivals AS (
    SELECT run_id, window_index, map(list(client ORDER BY client), list(n ORDER BY client)) AS arrivals
    FROM by_client GROUP BY ALL
), keys AS (
    SELECT run_id, window_index FROM steps UNION SELECT run_id, window_index FROM samples
    UNION SELECT run_id, window_index FROM arrivals
)
SELECT k.run_id, k.window_index, st.step_time_mean_s, st.prompt_tokens_per_step, sa.running_mean, sa.waiting_mean,
       sa.kv_peak, a.arrivals
FROM keys k
LEFT JOIN steps st USING (run_id, window_index)
LEFT JOIN samples sa USING (run_id, window_index)
LEFT JOIN arrivals a USING (run_id, window_index)
ORDER BY k.run_id, k.window_index;

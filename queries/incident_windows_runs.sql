-- incident_windows_runs: incident_windows for every run at once, each run at its own width (a table macro:
-- incident_windows_runs(widths), widths the round widths a window may have, ascending): what the weekly report
-- screens a store's runs with before it explains the incidents of those that have one (docs/incidents.md).
-- requires: incident_arrivals
-- A run's width is the first of widths at or above threshold_incident_window_requests() arrivals at its mean rate
-- (its arrivals over their span), the last one beyond them: analysis/incidents.py's window_width, in SQL. A run
-- with fewer than two arrivals or no span has no row.
-- columns:
--   run_id          run
--   width_s         the run's window width, seconds
--   window_index    the window's number (0 from the run's first counted arrival)
--   start_s         its start, seconds since the run's first counted arrival
--   requests        counted requests that arrived in it
--   ttft_p90_s      90th percentile time to first token, seconds
--   tpot_p90_s      90th percentile time per output token, seconds
--   e2e_p90_s       90th percentile end-to-end latency, seconds
--   queue_p90_s     90th percentile engine queue time, seconds
CREATE OR REPLACE MACRO incident_windows_runs(widths) AS TABLE
WITH span AS (
    SELECT run_id, count(*) AS n, max(t_s) - min(t_s) AS span_s FROM incident_arrivals GROUP BY run_id
    HAVING count(*) >= 2 AND max(t_s) > min(t_s)
), width AS (
    SELECT run_id, coalesce((SELECT min(x) FROM unnest(CAST(widths AS DOUBLE[])) AS t(x)
                             WHERE x >= threshold_incident_window_requests() * span_s / n), CAST(widths AS DOUBLE[])[-1]) AS width_s
    FROM span
)
SELECT a.run_id, w.width_s, CAST(floor(a.t_s / w.width_s) AS BIGINT) AS window_index,
       floor(a.t_s / w.width_s) * w.width_s AS start_s, count(*) AS requests,
       quantile_cont(a.ttft_s, 0.9) AS ttft_p90_s, quantile_cont(a.tpot_s, 0.9) AS tpot_p90_s,
       quantile_cont(a.e2e_s, 0.9) AS e2e_p90_s, quantile_cont(a.queue_s, 0.9) AS queue_p90_s
FROM incident_arrivals a JOIN width w USING (run_id)
GROUP BY ALL
ORDER BY a.run_id, window_index;

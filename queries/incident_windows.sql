-- incident_windows: a run's latency window by window of arrival (a table macro: incident_windows(width_s), each
-- window width_s seconds from the run's first counted arrival): what the incident rules compare with the run's
-- typical level (docs/incidents.md).
-- requires: incident_arrivals
-- A request belongs to the window it arrived in, whatever happened to it later: an incident is dated by the
-- arrivals that suffered it. Windows without arrivals have no row.
-- columns:
--   run_id          run
--   window_index    the window's number (0 from the run's first counted arrival)
--   start_s         its start, seconds since the run's first counted arrival
--   requests        counted requests that arrived in it
--   ttft_p50_s      median time to first token, seconds
--   ttft_p90_s      90th percentile time to first token, seconds
--   tpot_p50_s      median time per output token, seconds
--   tpot_p90_s      90th percentile time per output token, seconds
--   e2e_p50_s       median end-to-end latency, seconds
--   e2e_p90_s       90th percentile end-to-end latency, seconds
--   queue_p50_s     median engine queue time, seconds
--   queue_p90_s     90th percentile engine queue time, seconds
CREATE OR REPLACE MACRO incident_windows(width_s) AS TABLE
SELECT run_id, CAST(floor(t_s / width_s) AS BIGINT) AS window_index, floor(t_s / width_s) * width_s AS start_s,
       count(*) AS requests,
       quantile_cont(ttft_s, 0.5) AS ttft_p50_s, quantile_cont(ttft_s, 0.9) AS ttft_p90_s,
       quantile_cont(tpot_s, 0.5) AS tpot_p50_s, quantile_cont(tpot_s, 0.9) AS tpot_p90_s,
       quantile_cont(e2e_s, 0.5) AS e2e_p50_s, quantile_cont(e2e_s, 0.9) AS e2e_p90_s,
       quantile_cont(queue_s, 0.5) AS queue_p50_s, quantile_cont(queue_s, 0.9) AS queue_p90_s
FROM incident_arrivals
GROUP BY ALL
ORDER BY run_id, window_index;

-- report_timeline: engine load over time (at most 500 time bins per run): running and waiting requests,
-- those waiting for scheduling capacity, KV usage and cumulative preemptions.
-- requires: engine_stats
-- columns:
--   run_id            run
--   t_s               bin start, seconds since the run's first sample
--   running           mean running requests
--   waiting           mean waiting requests
--   waiting_capacity  mean requests waiting for scheduling capacity (vLLM's reason "capacity": slots, tokens or
--                     KV room alike; engine_state says which)
--   kv_usage          peak KV-cache usage (0-1)
--   preemptions_total cumulative preemptions at the end of the bin
CREATE OR REPLACE VIEW report_timeline AS
WITH s AS (
    SELECT *, min(ts_s) OVER (PARTITION BY run_id) AS t0,
           greatest(max(ts_s) OVER (PARTITION BY run_id) - min(ts_s) OVER (PARTITION BY run_id), 1e-9) / 500 AS w
    FROM engine_stats WHERE ts_s IS NOT NULL
)
SELECT run_id, floor((ts_s - t0) / w) * w AS t_s, avg(running) AS running, avg(waiting) AS waiting,
       avg(waiting_capacity) AS waiting_capacity, max(kv_usage) AS kv_usage, max(preemptions_total) AS preemptions_total
FROM s GROUP BY run_id, floor((ts_s - t0) / w) * w;

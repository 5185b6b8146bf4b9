-- engine_replicas: each replica (engine) of a run side by side, and their sum: what a fleet's Prometheus
-- export says per server. Peaks are over the samples; counts are the change between each replica's first and
-- last sample (since its start where there is one sample).
-- requires: engine_stats
-- columns:
--   run_id          run
--   engine          the replica (instance/engine for a Prometheus server's export; the engine index else)
--   instance        its Prometheus instance label (NULL for /metrics files and logs)
--   samples         samples of the replica
--   first_s         its first sample time, run clock (NULL where samples have none)
--   last_s          its last sample time
--   peak_running    most requests running at a sample
--   peak_waiting    most requests waiting at a sample
--   mean_running    mean requests running over the samples
--   peak_kv_usage   highest KV-cache usage at a sample (0-1)
--   preemptions     preemptions over the span
--   requests        requests the e2e histogram counted over the span
--   e2e_mean_s      their mean end-to-end latency, seconds (the engine's histogram)
CREATE OR REPLACE VIEW engine_replicas AS
SELECT run_id, engine, any_value(instance) AS instance, count(*) AS samples, min(ts_s) AS first_s,
       max(ts_s) AS last_s, max(running) AS peak_running, max(waiting) AS peak_waiting,
       avg(running) AS mean_running, max(kv_usage) AS peak_kv_usage,
       max(preemptions_total) - CASE WHEN count(preemptions_total) > 1 THEN min(preemptions_total) ELSE 0 END
           AS preemptions,
       max(e2e_count) - CASE WHEN count(e2e_count) > 1 THEN min(e2e_count) ELSE 0 END AS requests,
       (max(e2e_sum_s) - CASE WHEN count(e2e_sum_s) > 1 THEN min(e2e_sum_s) ELSE 0 END)
           / nullif(max(e2e_count) - CASE WHEN count(e2e_count) > 1 THEN min(e2e_count) ELSE 0 END, 0) AS e2e_mean_s
FROM engine_stats WHERE source = 'prometheus' GROUP BY run_id, engine;

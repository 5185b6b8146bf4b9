-- engine_kv_summary: the KV cache's peaks over a run, from the engine's samples (its metrics, log stats lines).
-- requires: engine_stats
-- Waiting requests are a server's data-parallel engines' at one moment together; each replica of a fleet (its
-- Prometheus instance) and each source apart; the peak is the largest such sum. Stages of an inference-perf sweep
-- (source stage: the stage's means, no time) are left out.
-- columns:
--   run_id                 run
--   peak_usage             highest KV-cache usage at a sample (0-1)
--   peak_waiting           most requests waiting at one moment
--   peak_waiting_capacity  most requests waiting for scheduling capacity at one moment (vLLM's reason capacity)
--   samples                samples read
CREATE OR REPLACE VIEW engine_kv_summary AS
WITH engines AS (
    SELECT run_id, source, instance, ts_s, engine, max(kv_usage) AS kv, max(waiting) AS waiting,
           max(waiting_capacity) AS waitcap, count(*) AS n
    FROM engine_stats WHERE source IS DISTINCT FROM 'stage'
    GROUP BY run_id, source, instance, ts_s, engine
), moments AS (
    SELECT run_id, max(kv) AS kv, sum(waiting) AS waiting, sum(waitcap) AS waitcap, sum(n) AS n
    FROM engines GROUP BY run_id, source, instance, ts_s
)
SELECT run_id, max(kv) AS peak_usage, max(waiting) AS peak_waiting, max(waitcap) AS peak_waiting_capacity,
       sum(n) AS samples
FROM moments GROUP BY run_id;

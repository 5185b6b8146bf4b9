-- profiler_phase_share: prefill vs decode share of the run's step time, per run and step source.
-- requires: engine_steps
-- GPU busy time when the trace has GPU data, else CPU-side wall time (basis says which). Mixed steps
-- are their own share: a mixed step's time cannot be split by phase from the trace alone.
-- columns:
--   run_id         run
--   source         profiler | log
--   basis          gpu_busy | wall
--   total_s        summed step time on that basis, seconds
--   prefill_share  share of prefill steps (0-1)
--   decode_share   share of decode steps (0-1)
--   mixed_share    share of mixed steps (0-1)
--   other_share    share of idle steps and steps of unknown kind (0-1)
CREATE OR REPLACE VIEW profiler_phase_share AS
WITH b AS (
    SELECT run_id, source, kind,
           CASE WHEN count(gpu_busy_s) OVER (PARTITION BY run_id, source) > 0 THEN 'gpu_busy' ELSE 'wall' END
               AS basis,
           gpu_busy_s, wall_s
    FROM engine_steps
), t AS (
    SELECT run_id, source, basis, kind,
           CASE WHEN basis = 'gpu_busy' THEN coalesce(gpu_busy_s, 0) ELSE wall_s END AS t
    FROM b
)
SELECT run_id, source, basis,
       sum(t) AS total_s,
       coalesce(sum(t) FILTER (WHERE kind = 'prefill'), 0) / nullif(sum(t), 0) AS prefill_share,
       coalesce(sum(t) FILTER (WHERE kind = 'decode'), 0) / nullif(sum(t), 0) AS decode_share,
       coalesce(sum(t) FILTER (WHERE kind = 'mixed'), 0) / nullif(sum(t), 0) AS mixed_share,
       coalesce(sum(t) FILTER (WHERE kind IS NULL OR kind = 'idle'), 0) / nullif(sum(t), 0) AS other_share
FROM t
GROUP BY run_id, source, basis;

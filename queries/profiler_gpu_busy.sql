-- profiler_gpu_busy: how busy each GPU was over the traced window, per run and device.
-- requires: kernels
-- Busy time is the union of op intervals across streams (overlap counted once); sync rows excluded.
-- columns:
--   run_id         run
--   part           source file of the run (one per rank)
--   device         GPU ordinal as the trace gives it
--   busy_s         union of GPU op intervals, seconds
--   span_s         first op start to last op end, seconds
--   busy_fraction  busy_s / span_s (0-1)
CREATE OR REPLACE VIEW profiler_gpu_busy AS
WITH k AS (
    SELECT run_id, part, device, ts_ns AS s, ts_ns + dur_ns AS e
    FROM kernels WHERE kernel_class <> 'sync'
), o AS (
    SELECT *, max(e) OVER (PARTITION BY run_id, part, device ORDER BY s, e
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM k
), g AS (
    SELECT *, sum(CASE WHEN prev_end IS NULL OR s > prev_end THEN 1 ELSE 0 END)
              OVER (PARTITION BY run_id, part, device ORDER BY s, e) AS island
    FROM o
), islands AS (
    SELECT run_id, part, device, min(s) AS s, max(e) AS e FROM g GROUP BY run_id, part, device, island
)
SELECT run_id, part, device,
       sum(e - s) / 1e9 AS busy_s,
       (max(e) - min(s)) / 1e9 AS span_s,
       sum(e - s) / nullif(max(e) - min(s), 0) AS busy_fraction
FROM islands
GROUP BY run_id, part, device;

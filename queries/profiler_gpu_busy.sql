-- profiler_gpu_busy: how busy each GPU was over the traced window, per run and device.
-- requires: kernels, ops, annotations
-- Busy time is the union of op intervals across streams (overlap counted once); sync rows excluded.
-- Two denominators: the GPU's own first-to-last op span, and the file's traced window (first to last
-- event of any kind kept: CPU ops, annotations, GPU ops), which is what "how busy was the GPU while we
-- watched" means when the GPU ran only a little of the time.
-- columns:
--   run_id         run
--   part           source file of the run (one per rank)
--   device         GPU ordinal as the trace gives it
--   busy_s         union of GPU op intervals, seconds
--   span_s         first op start to last op end, seconds
--   busy_fraction  busy_s / span_s (0-1)
--   traced_s       the file's traced window, seconds
--   traced_fraction busy_s / traced_s (0-1)
CREATE OR REPLACE VIEW profiler_gpu_busy AS
WITH k AS (
    SELECT run_id, part, device, ts_ns AS s, ts_ns + dur_ns AS e
    FROM kernels WHERE kernel_class <> 'sync'
), o AS (
    -- sorted by start, each interval adds what reaches beyond every earlier interval's end (one window, no
    -- second pass over islands: the union's length with the least held in memory)
    SELECT *, max(e) OVER (PARTITION BY run_id, part, device ORDER BY s, e
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM k
), gains AS (
    SELECT run_id, part, device, s, e,
           greatest(e - greatest(s, coalesce(prev_end, s)), 0) AS added
    FROM o
), traced AS (
    SELECT run_id, part, min(ts_ns) AS s, max(ts_ns + dur_ns) AS e
    FROM (SELECT run_id, part, ts_ns, dur_ns FROM kernels
          UNION ALL SELECT run_id, part, ts_ns, dur_ns FROM ops
          UNION ALL SELECT run_id, part, ts_ns, dur_ns FROM annotations)
    GROUP BY run_id, part
), busy AS (
    SELECT run_id, part, device, sum(added) AS busy_ns, max(e) - min(s) AS span_ns
    FROM gains
    GROUP BY run_id, part, device
)
SELECT b.run_id, b.part, b.device,
       b.busy_ns / 1e9 AS busy_s,
       b.span_ns / 1e9 AS span_s,
       b.busy_ns / nullif(b.span_ns, 0) AS busy_fraction,
       (t.e - t.s) / 1e9 AS traced_s,
       b.busy_ns / nullif(t.e - t.s, 0) AS traced_fraction
FROM busy b JOIN traced t USING (run_id, part);

-- profiler_kernel_time: how GPU time splits over kernel classes, per run.
-- requires: kernels
-- Durations are summed per op, so ops overlapping on several streams count once each; `sync` rows
-- (Stream/Event Sync) are waits, listed but left out of the share.
-- columns:
--   run_id        run
--   kernel_class  gemm | attention | communication | memory | elementwise | sync | other
--   kernels       number of GPU ops of the class
--   total_s       summed duration, seconds
--   share         total_s over the run's summed non-sync GPU time (0-1; NULL for sync)
CREATE OR REPLACE VIEW profiler_kernel_time AS
WITH per AS (
    SELECT run_id, kernel_class, count(*) AS kernels, sum(dur_ns) / 1e9 AS total_s
    FROM kernels
    GROUP BY run_id, kernel_class
)
SELECT run_id, kernel_class, kernels, total_s,
       CASE WHEN kernel_class = 'sync' THEN NULL
            ELSE total_s / nullif(sum(total_s) FILTER (WHERE kernel_class <> 'sync') OVER (PARTITION BY run_id), 0)
       END AS share
FROM per;

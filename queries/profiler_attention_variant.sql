-- profiler_attention_variant: attention GPU time split by the phase its kernel names give away.
-- requires: kernels
-- columns:
--   run_id     run
--   variant    prefill | decode | NULL (an attention kernel whose name does not tell the phase)
--   kernels    number of attention kernels
--   total_s    summed duration, seconds
CREATE OR REPLACE VIEW profiler_attention_variant AS
SELECT run_id, attention_variant AS variant, count(*) AS kernels, sum(dur_ns) / 1e9 AS total_s
FROM kernels
WHERE kernel_class = 'attention'
GROUP BY run_id, attention_variant;

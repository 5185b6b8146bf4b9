-- latency_stats: the distribution figures lltrace reports for a latency: median, 90th and 99th percentile and
-- mean (an aggregate macro: latency_stats(ttft_s) over any rows, measured or replayed).
-- requires: none
-- Percentiles are interpolated (quantile_cont); NULLs are left out.
-- columns:
--   p50    median, seconds
--   p90    90th percentile, seconds
--   p99    99th percentile, seconds
--   mean   mean, seconds
CREATE OR REPLACE MACRO latency_stats(x) AS struct_pack(
    p50 := quantile_cont(x, 0.5), p90 := quantile_cont(x, 0.9), p99 := quantile_cont(x, 0.99), mean := avg(x)
);

-- engine_histogram_quantiles: quantiles of the engine's own latency and size histograms, per run and metric:
-- what a Prometheus export says about requests without any request file (labelled estimates, the bucket's
-- bounds their precision): engine_histogram_windows over one window, the whole run.
-- requires: engine_histogram_windows
-- columns:
--   run_id        run
--   metric        queue_time | ttft | e2e | tpot | itl | prefill_time | decode_time | prompt_tokens | generation_tokens
--   basis         between samples | since server start, one sample
--   observations  requests (or tokens) the histogram counted over that span
--   p50           median, interpolated (seconds; tokens for the size histograms)
--   p50_lo        lower bound of the bucket holding the median
--   p50_hi        upper bound of that bucket (NULL: the +Inf bucket)
--   p90           90th percentile, interpolated
--   p90_lo        lower bound of its bucket
--   p90_hi        upper bound of its bucket
--   p99           99th percentile, interpolated
--   p99_lo        lower bound of its bucket
--   p99_hi        upper bound of its bucket
CREATE OR REPLACE VIEW engine_histogram_quantiles AS
SELECT * EXCLUDE (window_start_s) FROM engine_histogram_windows(NULL, true, NULL, NULL);

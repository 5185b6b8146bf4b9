-- requests_sizes: the sizes of a run's counted requests whose prompt and output lengths are both known (what the
-- latency model is given to classify an arrival trace).
-- requires: requests_latency
-- columns:
--   run_id         run
--   requests       counted requests with both sizes
--   input_mean     mean prompt tokens
--   output_mean    mean output tokens
--   input_total    summed prompt tokens
--   output_total   summed output tokens
CREATE OR REPLACE VIEW requests_sizes AS
SELECT run_id, count(*) AS requests, avg(input_tokens) AS input_mean, avg(output_tokens) AS output_mean,
       sum(input_tokens) AS input_total, sum(output_tokens) AS output_total
FROM requests_latency WHERE input_tokens IS NOT NULL AND output_tokens IS NOT NULL AND counted GROUP BY run_id;

-- workload_mix: what a run's traffic looked like: sizes, rate, prefix reuse and concurrency.
-- requires: requests_prefix_reuse
-- Prefix reuse is requests_prefix_reuse's: leading prefix blocks (Mooncake hash_ids) an earlier request of
-- the run already had, the KV a prefix cache could have kept. Mean concurrency is Little's law over the
-- requests with an e2e (failed ones included: they occupied the server too).
-- columns:
--   run_id                   run
--   requests                 requests with sizes
--   input_p50                median prompt tokens
--   input_p90                90th percentile prompt tokens
--   input_mean               mean prompt tokens
--   output_p50               median output tokens
--   output_p90               90th percentile output tokens
--   output_mean              mean output tokens
--   span_s                   first to last arrival, seconds
--   rate_per_s               requests per second over the span
--   prefix_blocks            prefix blocks over all requests (where the source gives them)
--   prefix_blocks_reused     leading blocks an earlier request already had
--   prefix_reuse             prefix_blocks_reused / prefix_blocks (0-1; NULL without block ids)
--   mean_concurrency         summed e2e / span: requests in flight on average (NULL without latencies)
CREATE OR REPLACE VIEW workload_mix AS
WITH sizes AS (
    SELECT run_id, count(*) AS requests,
           quantile_cont(input_tokens, 0.5) AS input_p50, quantile_cont(input_tokens, 0.9) AS input_p90,
           avg(input_tokens) AS input_mean,
           quantile_cont(output_tokens, 0.5) AS output_p50, quantile_cont(output_tokens, 0.9) AS output_p90,
           avg(output_tokens) AS output_mean,
           max(arrival_s) - min(arrival_s) AS span_s,
           sum(e2e_s) AS e2e_sum,
           sum(prefix_blocks) AS prefix_blocks, sum(prefix_blocks_reused) AS prefix_blocks_reused
    FROM requests_prefix_reuse WHERE input_tokens IS NOT NULL GROUP BY run_id
)
SELECT run_id, requests, input_p50, input_p90, input_mean, output_p50, output_p90, output_mean,
       span_s, requests / nullif(span_s, 0) AS rate_per_s,
       prefix_blocks, prefix_blocks_reused,
       prefix_blocks_reused / nullif(prefix_blocks, 0) AS prefix_reuse,
       e2e_sum / nullif(span_s, 0) AS mean_concurrency
FROM sizes;

-- workload_mix: what a run's traffic looked like: sizes, rate, prefix reuse and concurrency.
-- requires: requests
-- Prefix reuse counts prefix blocks (Mooncake hash_ids) already seen by an earlier request of the run: the
-- KV a prefix cache could have kept. Mean concurrency is Little's law over the requests with an e2e.
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
--   prefix_blocks_reused     blocks an earlier request already had
--   prefix_reuse             prefix_blocks_reused / prefix_blocks (0-1; NULL without block ids)
--   mean_concurrency         summed e2e / span: requests in flight on average (NULL without latencies)
CREATE OR REPLACE VIEW workload_mix AS
WITH r AS (
    SELECT * FROM requests WHERE input_tokens IS NOT NULL
), blocks AS (
    SELECT run_id, arrival_ns, unnest(prefix_block_ids) AS block FROM r WHERE prefix_block_ids IS NOT NULL
), firsts AS (
    SELECT run_id, block, count(*) AS uses FROM blocks GROUP BY run_id, block
), reuse AS (
    SELECT run_id, sum(uses) AS prefix_blocks, sum(uses - 1) AS prefix_blocks_reused FROM firsts GROUP BY run_id
), sizes AS (
    SELECT run_id, count(*) AS requests,
           quantile_cont(input_tokens, 0.5) AS input_p50, quantile_cont(input_tokens, 0.9) AS input_p90,
           avg(input_tokens) AS input_mean,
           quantile_cont(output_tokens, 0.5) AS output_p50, quantile_cont(output_tokens, 0.9) AS output_p90,
           avg(output_tokens) AS output_mean,
           max(arrival_s) - min(arrival_s) AS span_s,
           sum(coalesce(e2e_s, server_e2e_s)) AS e2e_sum
    FROM r GROUP BY run_id
)
SELECT s.run_id, s.requests, s.input_p50, s.input_p90, s.input_mean, s.output_p50, s.output_p90, s.output_mean,
       s.span_s, s.requests / nullif(s.span_s, 0) AS rate_per_s,
       u.prefix_blocks, u.prefix_blocks_reused,
       u.prefix_blocks_reused / nullif(u.prefix_blocks, 0) AS prefix_reuse,
       s.e2e_sum / nullif(s.span_s, 0) AS mean_concurrency
FROM sizes s LEFT JOIN reuse u USING (run_id);

-- requests_summary: latency percentiles over a run's successful requests.
-- requires: requests_latency, requests
-- columns:
--   run_id      run
--   requests    requests in the run (all statuses)
--   errors      requests that failed
--   basis       client | server | mixed: where the latencies come from
--   ttft_p50    median time to first token, seconds
--   ttft_p90    90th percentile TTFT, seconds
--   ttft_p99    99th percentile TTFT, seconds
--   ttft_mean   mean TTFT, seconds
--   tpot_p50    median time per output token, seconds
--   tpot_p90    90th percentile TPOT, seconds
--   tpot_p99    99th percentile TPOT, seconds
--   tpot_mean   mean TPOT, seconds
--   e2e_p50     median end-to-end latency, seconds
--   e2e_p90     90th percentile e2e, seconds
--   e2e_p99     99th percentile e2e, seconds
--   e2e_mean    mean e2e, seconds
--   queue_p50   median engine queue time, seconds
--   queue_p90   90th percentile queue time, seconds
--   queue_p99   99th percentile queue time, seconds
--   queue_mean  mean queue time, seconds
CREATE OR REPLACE VIEW requests_summary AS
WITH counts AS (
    SELECT run_id, count(*) AS requests, count(*) FILTER (WHERE status = 'error') AS errors
    FROM requests GROUP BY run_id
), lat AS (
    SELECT run_id,
           CASE WHEN min(basis) = max(basis) THEN min(basis) ELSE 'mixed' END AS basis,
           quantile_cont(ttft_s, 0.5) AS ttft_p50, quantile_cont(ttft_s, 0.9) AS ttft_p90,
           quantile_cont(ttft_s, 0.99) AS ttft_p99, avg(ttft_s) AS ttft_mean,
           quantile_cont(tpot_s, 0.5) AS tpot_p50, quantile_cont(tpot_s, 0.9) AS tpot_p90,
           quantile_cont(tpot_s, 0.99) AS tpot_p99, avg(tpot_s) AS tpot_mean,
           quantile_cont(e2e_s, 0.5) AS e2e_p50, quantile_cont(e2e_s, 0.9) AS e2e_p90,
           quantile_cont(e2e_s, 0.99) AS e2e_p99, avg(e2e_s) AS e2e_mean,
           quantile_cont(queue_s, 0.5) AS queue_p50, quantile_cont(queue_s, 0.9) AS queue_p90,
           quantile_cont(queue_s, 0.99) AS queue_p99, avg(queue_s) AS queue_mean
    FROM requests_latency GROUP BY run_id
)
SELECT c.run_id, c.requests, c.errors, l.* EXCLUDE (run_id)
FROM counts c LEFT JOIN lat l USING (run_id);

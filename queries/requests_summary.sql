-- requests_summary: latency percentiles over a run's counted requests (requests_latency.counted).
-- requires: requests_latency, latency_stats
-- columns:
--   run_id      run
--   requests    requests in the run (all statuses)
--   errors      requests that failed
--   counted     requests the run's figures count (requests_latency.counted)
--   excluded    requests left out of the figures: failed, cancelled, incomplete, warm-up or cool-down
--   basis       client | server | mixed: where the latencies come from (NULL: no request has one)
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
    SELECT run_id, count(*) AS requests, count(*) FILTER (WHERE failed) AS errors,
           count(*) FILTER (WHERE counted) AS counted, count(*) FILTER (WHERE NOT counted) AS excluded
    FROM requests_latency GROUP BY run_id
), lat AS (
    SELECT run_id,
           CASE WHEN count(basis) = 0 THEN NULL WHEN min(basis) = max(basis) THEN min(basis) ELSE 'mixed' END
               AS basis,
           latency_stats(ttft_s) AS ttft, latency_stats(tpot_s) AS tpot, latency_stats(e2e_s) AS e2e,
           latency_stats(queue_s) AS queue
    FROM requests_latency WHERE counted GROUP BY run_id
)
SELECT c.run_id, c.requests, c.errors, c.counted, c.excluded, l.basis,
       l.ttft.p50 AS ttft_p50, l.ttft.p90 AS ttft_p90, l.ttft.p99 AS ttft_p99, l.ttft.mean AS ttft_mean,
       l.tpot.p50 AS tpot_p50, l.tpot.p90 AS tpot_p90, l.tpot.p99 AS tpot_p99, l.tpot.mean AS tpot_mean,
       l.e2e.p50 AS e2e_p50, l.e2e.p90 AS e2e_p90, l.e2e.p99 AS e2e_p99, l.e2e.mean AS e2e_mean,
       l.queue.p50 AS queue_p50, l.queue.p90 AS queue_p90, l.queue.p99 AS queue_p99, l.queue.mean AS queue_mean
FROM counts c LEFT JOIN lat l USING (run_id);

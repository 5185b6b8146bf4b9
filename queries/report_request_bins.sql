-- report_request_bins: requests ordered by end-to-end latency, in at most 200 bins, with the mean of each
-- component: what the per-request latency chart draws (a million requests become 200 bars).
-- requires: attribution_request
-- columns:
--   run_id       run
--   bin          bin number, 1 = fastest requests
--   requests     requests in the bin
--   e2e_s        mean end-to-end latency, seconds
--   queue_s      mean queue, seconds
--   prefill_s    mean prefill, seconds
--   decode_s     mean decode, seconds
--   preempted_s  mean preempted time, seconds
--   overhead_s   mean overhead, seconds
CREATE OR REPLACE VIEW report_request_bins AS
WITH a AS (
    SELECT *, ntile(200) OVER (PARTITION BY run_id ORDER BY e2e_s) AS bin
    FROM attribution_request
    WHERE e2e_s IS NOT NULL AND queue_s IS NOT NULL AND prefill_s IS NOT NULL AND decode_s IS NOT NULL
)
SELECT run_id, bin, count(*) AS requests, avg(e2e_s) AS e2e_s, avg(queue_s) AS queue_s, avg(prefill_s) AS prefill_s,
       avg(decode_s) AS decode_s, avg(preempted_s) AS preempted_s, avg(overhead_s) AS overhead_s
FROM a GROUP BY run_id, bin;

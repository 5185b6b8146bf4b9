-- report_latency_hist: histograms of TTFT, TPOT and e2e of successful requests (40 equal-width bins per
-- metric and run).
-- requires: requests_latency
-- columns:
--   run_id   run
--   metric   ttft | tpot | e2e
--   bin_lo   lower edge, seconds
--   bin_hi   upper edge, seconds
--   requests requests in the bin
CREATE OR REPLACE VIEW report_latency_hist AS
WITH v AS (
    SELECT run_id, 'ttft' AS metric, ttft_s AS x FROM requests_latency WHERE ttft_s IS NOT NULL AND counted
    UNION ALL SELECT run_id, 'tpot', tpot_s FROM requests_latency WHERE tpot_s IS NOT NULL AND counted
    UNION ALL SELECT run_id, 'e2e', e2e_s FROM requests_latency WHERE e2e_s IS NOT NULL AND counted
), r AS (
    SELECT run_id, metric, min(x) AS lo, greatest(max(x) - min(x), 1e-9) / 40 AS w FROM v GROUP BY run_id, metric
), b AS (
    SELECT v.run_id, v.metric, least(floor((v.x - r.lo) / r.w), 39) AS k, r.lo, r.w
    FROM v JOIN r USING (run_id, metric)
)
SELECT run_id, metric, lo + k * w AS bin_lo, lo + (k + 1) * w AS bin_hi, count(*) AS requests
FROM b GROUP BY run_id, metric, k, lo, w;

-- engine_latency_histograms: the mean latencies the engine's own Prometheus histograms give, per run: what a
-- /metrics scrape says about requests even without a client or spans (vLLM e2e_request_latency_seconds,
-- time_to_first_token_seconds, request_queue_time_seconds; SGLang's alike).
-- requires: engine_stats
-- Histograms are cumulative: between the first and the last scrape of each engine the change of sum over the
-- change of count is the mean over the requests finished in between; a single scrape gives the mean since the
-- server started (basis says which). Summed over engines before dividing.
-- columns:
--   run_id        run
--   scrapes       readings with histogram figures
--   basis         between scrapes | since server start, one scrape
--   e2e_requests  requests the e2e histogram counted over that span
--   e2e_mean_s    mean end-to-end latency by the engine, seconds (NULL without the histogram)
--   ttft_mean_s   mean time to first token by the engine, seconds
--   queue_mean_s  mean time in the engine's waiting queue, seconds
--   queue_sum_s   summed queue time over the span, seconds
--   e2e_sum_s     summed end-to-end latency over the span, seconds
--   queue_share   queue_sum_s / e2e_sum_s: the share of the requests' time spent waiting to be scheduled
--   prefill_sum_s summed prefill time (vLLM request_prefill_time_seconds), seconds
--   decode_sum_s  summed decode time (vLLM request_decode_time_seconds), seconds
--   prefill_share prefill_sum_s / e2e_sum_s
--   decode_share  decode_sum_s / e2e_sum_s
CREATE OR REPLACE VIEW engine_latency_histograms AS
WITH per_engine AS (
    SELECT run_id, engine, count(*) AS scrapes,
           max(e2e_sum_s) - CASE WHEN count(*) > 1 THEN min(e2e_sum_s) ELSE 0 END AS e2e_sum,
           max(e2e_count) - CASE WHEN count(*) > 1 THEN min(e2e_count) ELSE 0 END AS e2e_n,
           max(ttft_sum_s) - CASE WHEN count(*) > 1 THEN min(ttft_sum_s) ELSE 0 END AS ttft_sum,
           max(ttft_count) - CASE WHEN count(*) > 1 THEN min(ttft_count) ELSE 0 END AS ttft_n,
           max(queue_time_sum_s) - CASE WHEN count(*) > 1 THEN min(queue_time_sum_s) ELSE 0 END AS queue_sum,
           max(queue_time_count) - CASE WHEN count(*) > 1 THEN min(queue_time_count) ELSE 0 END AS queue_n,
           max(prefill_time_sum_s) - CASE WHEN count(*) > 1 THEN min(prefill_time_sum_s) ELSE 0 END AS prefill_sum,
           max(decode_time_sum_s) - CASE WHEN count(*) > 1 THEN min(decode_time_sum_s) ELSE 0 END AS decode_sum
    FROM engine_stats
    WHERE source = 'prometheus' AND (e2e_count IS NOT NULL OR ttft_count IS NOT NULL OR queue_time_count IS NOT NULL)
    GROUP BY run_id, engine
)
SELECT run_id, sum(scrapes) AS scrapes,
       CASE WHEN max(scrapes) > 1 THEN 'between scrapes' ELSE 'since server start, one scrape' END AS basis,
       sum(e2e_n) AS e2e_requests,
       sum(e2e_sum) / nullif(sum(e2e_n), 0) AS e2e_mean_s,
       sum(ttft_sum) / nullif(sum(ttft_n), 0) AS ttft_mean_s,
       sum(queue_sum) / nullif(sum(queue_n), 0) AS queue_mean_s,
       sum(queue_sum) AS queue_sum_s, sum(e2e_sum) AS e2e_sum_s,
       sum(queue_sum) / nullif(sum(e2e_sum), 0) AS queue_share,
       sum(prefill_sum) AS prefill_sum_s, sum(decode_sum) AS decode_sum_s,
       sum(prefill_sum) / nullif(sum(e2e_sum), 0) AS prefill_share,
       sum(decode_sum) / nullif(sum(e2e_sum), 0) AS decode_share
FROM per_engine GROUP BY run_id;

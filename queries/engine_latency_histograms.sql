-- engine_latency_histograms: the mean latencies the engine's own Prometheus histograms give, per run: what a
-- /metrics scrape says about requests even without a client or spans (vLLM e2e_request_latency_seconds,
-- time_to_first_token_seconds, request_queue_time_seconds; SGLang's alike), and the API server's responses by status.
-- requires: engine_stats, engine_windows
-- Histograms are cumulative: between the first and the last scrape of each engine the change of sum over the
-- change of count is the mean over the requests finished in between; a single scrape gives the mean since the
-- server started (basis says which). Summed over engines before dividing: engine_windows over one window,
-- the whole run.
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
--   http_2xx      the API server's responses over that span with a 2xx status (vLLM's http_requests_total)
--   http_4xx      its responses with a 4xx status: requests it refused
--   http_5xx      its responses with a 5xx status: requests it failed
--   http_failed   its responses with a 4xx or 5xx status
--   http_failed_share  http_failed over all its responses of those classes
CREATE OR REPLACE VIEW engine_latency_histograms AS
WITH scraped AS (
    SELECT run_id, engine, count(*) AS scrapes FROM engine_stats
    WHERE source = 'prometheus' AND (e2e_count IS NOT NULL OR ttft_count IS NOT NULL OR queue_time_count IS NOT NULL)
    GROUP BY run_id, engine
), per_run AS (
    SELECT run_id, sum(scrapes) AS scrapes, max(scrapes) AS most FROM scraped GROUP BY run_id
)
SELECT p.run_id, p.scrapes,
       CASE WHEN p.most > 1 THEN 'between scrapes' ELSE 'since server start, one scrape' END AS basis,
       w.e2e_requests, w.e2e_mean_s, w.ttft_mean_s, w.queue_mean_s, w.queue_sum_s, w.e2e_sum_s, w.queue_share,
       w.prefill_sum_s, w.decode_sum_s,
       w.prefill_sum_s / nullif(w.e2e_sum_s, 0) AS prefill_share,
       w.decode_sum_s / nullif(w.e2e_sum_s, 0) AS decode_share,
       w.http_2xx, w.http_4xx, w.http_5xx, w.http_failed,
       w.http_failed / nullif(w.http_responses, 0) AS http_failed_share
FROM per_run p JOIN engine_windows(NULL, NULL, NULL) w USING (run_id);

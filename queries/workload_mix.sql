-- workload_mix: what a run's traffic looked like: sizes, rate, prefix reuse and concurrency.
-- requires: requests_prefix_reuse
-- Counted requests only (requests_latency.counted): failed, cancelled, incomplete and warm-up / cool-down
-- requests are not the workload the run measured (an HTTP 429 row carries 1 output token and no latency).
-- Prefix reuse is requests_prefix_reuse's: leading prefix blocks (Mooncake hash_ids) an earlier request of
-- the run already had, the KV a prefix cache could have kept. Two windows: the arrival span (first to last
-- arrival) gives the offered rate, and only from threshold_rate_min_requests() arrivals on; the run window
-- (first arrival to last finish) gives the request throughput the clients print (AIPerf request_throughput,
-- vLLM bench request_throughput: completed requests over the benchmark's duration) and, by Little's law, the
-- mean number of requests in flight (summed e2e over the run window).
-- columns:
--   run_id                   run
--   requests                 counted requests
--   sized                    of those, the requests whose source gives their prompt size (the size figures are
--                            theirs; a vLLM log of 0.11 on lists arrivals only)
--   input_p50                median prompt tokens
--   input_p90                90th percentile prompt tokens
--   input_mean               mean prompt tokens
--   output_p50               median output tokens
--   output_p90               90th percentile output tokens
--   output_mean              mean output tokens
--   span_s                   first to last arrival (a lone client's send times where no arrival is on the
--                            run clock), seconds
--   rate_per_s               requests per second over the arrival span (NULL under threshold_rate_min_requests(),
--                            and where the arrival stamps' resolution could move it by more than
--                            threshold_rate_stamp_error(): resolution / span)
--   arrival_resolution_s     the coarsest arrival stamp's resolution (requests.arrival_resolution_s; NULL: a
--                            millisecond or finer)
--   window_s                 first arrival to last finish (arrival + e2e, else the finish time), seconds
--   throughput_per_s         requests finished per second over the run window (NULL without finish times)
--   prefix_blocks            prefix blocks over all requests (where the source gives them)
--   prefix_blocks_reused     leading blocks an earlier request already had
--   prefix_reuse             prefix_blocks_reused / prefix_blocks (0-1; NULL without block ids)
--   mean_concurrency         summed e2e / run window: requests in flight on average (NULL without latencies)
--   peak_concurrency         most requests in flight at one instant (vLLM bench's "Peak concurrent requests"
--                            counts a request in every whole second it touches, so it reads higher)
CREATE OR REPLACE VIEW workload_mix AS
WITH clock AS (
    -- the run clock where requests have arrivals; else one client's own send clock (perf_counter: one
    -- process, one origin), never several clients' clocks mixed
    SELECT run_id, count(arrival_s) > 0 AS on_run_clock, count(DISTINCT client_id) = 1 AS one_client
    FROM requests GROUP BY run_id
), counted AS (
    SELECT r.*, t.start_s, coalesce(t.start_s + r.e2e_s, CASE WHEN c.on_run_clock THEN r.finished_s END) AS finish_s
    FROM requests_prefix_reuse r JOIN clock c USING (run_id),
         LATERAL (SELECT CASE WHEN c.on_run_clock THEN r.arrival_s WHEN c.one_client THEN r.client_start_s END
                  AS start_s) t
    WHERE r.counted
), flight AS (
    -- the most requests in flight at one instant: +1 at each send, -1 at each finish (a finish before a
    -- send at the same instant)
    SELECT run_id, max(in_flight) AS peak_concurrency FROM (
        SELECT run_id, sum(d) OVER (PARTITION BY run_id ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS in_flight
        FROM (SELECT run_id, start_s AS t, 1 AS d FROM counted WHERE finish_s IS NOT NULL AND start_s IS NOT NULL
              UNION ALL
              SELECT run_id, finish_s, -1 FROM counted WHERE finish_s IS NOT NULL AND start_s IS NOT NULL)
    ) GROUP BY run_id
), sizes AS (
    SELECT run_id, count(*) AS requests, count(input_tokens) AS sized,
           quantile_cont(input_tokens, 0.5) AS input_p50, quantile_cont(input_tokens, 0.9) AS input_p90,
           avg(input_tokens) AS input_mean,
           quantile_cont(output_tokens, 0.5) AS output_p50, quantile_cont(output_tokens, 0.9) AS output_p90,
           avg(output_tokens) AS output_mean,
           count(start_s) AS arrivals, max(arrival_resolution_s) AS arrival_resolution_s,
           max(start_s) - min(start_s) AS span_s,
           max(finish_s) - min(start_s) AS window_s,
           count(finish_s) AS finished,
           sum(e2e_s) AS e2e_sum,
           sum(prefix_blocks) AS prefix_blocks, sum(prefix_blocks_reused) AS prefix_blocks_reused
    FROM counted GROUP BY run_id
)
SELECT run_id, requests, sized, input_p50, input_p90, input_mean, output_p50, output_p90, output_mean,
       span_s,
       CASE WHEN arrivals >= threshold_rate_min_requests()
                 AND coalesce(arrival_resolution_s / nullif(span_s, 0), 0) <= threshold_rate_stamp_error()
            THEN arrivals / nullif(span_s, 0) END AS rate_per_s,
       arrival_resolution_s,
       window_s, finished / nullif(window_s, 0) AS throughput_per_s,
       prefix_blocks, prefix_blocks_reused,
       prefix_blocks_reused / nullif(prefix_blocks, 0) AS prefix_reuse,
       e2e_sum / nullif(window_s, 0) AS mean_concurrency,
       f.peak_concurrency
FROM sizes LEFT JOIN flight f USING (run_id);

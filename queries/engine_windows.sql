-- engine_windows: the engine's own figures per run and time window, summed over its engines (replicas): load and
-- KV from the gauges, requests, tokens, preemptions and mean latencies from the counters and histogram sums (a
-- table macro: engine_windows(width_s, from_s, to_s) over the samples in [from_s, to_s), NULL: unbounded; NULL
-- width: one window, all of them). What a Prometheus export says about a window without any request file.
-- requires: engine_stats
-- A window's counts are each counter's change from its last reading in an earlier window to its last reading
-- in this one (in the first window with readings, from its first; a counter with a single reading counts since
-- its server started), per engine and source. A benchmark's stage rows (source stage: means over a stage, no
-- time) are not samples and are left out. Sources of one engine (a log and a scrape) count the same requests: the
-- larger figure is kept. Load figures are each engine's mean over the window's samples, summed over engines.
-- columns:
--   run_id             run
--   window_start_s     start of the window, seconds on the run clock (from_s, else 0, with a NULL width)
--   samples            engine samples in the window
--   engines            engines with a sample in the window
--   mean_running       requests running, mean over the window (summed over engines)
--   mean_waiting       requests waiting, mean over the window (summed over engines)
--   peak_waiting_capacity  most requests waiting for scheduling capacity at one engine sample
--   peak_kv_usage      highest KV-cache usage at an engine sample (0-1)
--   e2e_requests       requests the e2e histogram counted (finished in the window)
--   e2e_sum_s          summed end-to-end latency, seconds
--   ttft_n             requests the TTFT histogram counted
--   ttft_sum_s         summed TTFT, seconds
--   queue_n            requests the queue-time histogram counted
--   queue_sum_s        summed queue time, seconds
--   prefill_sum_s      summed prefill time, seconds
--   decode_sum_s       summed decode time, seconds
--   prompt_tokens      prompt tokens processed
--   generation_tokens  tokens generated
--   preemptions        preemptions
--   http_2xx           the API server's responses with a 2xx status (vLLM's http_requests_total, every handler)
--   http_4xx           its responses with a 4xx status (refused: a bad request, too many requests...)
--   http_5xx           its responses with a 5xx status (the server failed)
--   e2e_mean_s         e2e_sum_s / e2e_requests
--   ttft_mean_s        ttft_sum_s / ttft_n
--   queue_mean_s       queue_sum_s / queue_n
--   queue_share        queue_sum_s / e2e_sum_s
--   http_responses     the API server's responses with a 2xx, 4xx or 5xx status (NULL where no class was read)
--   http_failed        its responses with a 4xx or 5xx status: requests refused or failed (NULL where neither was read)
CREATE OR REPLACE MACRO engine_windows(width_s, from_s, to_s) AS TABLE
WITH per_window AS (
    SELECT run_id, engine, source,
           CASE WHEN width_s IS NULL THEN coalesce(from_s, 0.0) ELSE floor(ts_s / width_s) * width_s END
               AS window_start_s,
           count(*) AS samples, avg(running) AS running, avg(waiting) AS waiting,
           max(waiting_capacity) AS waiting_capacity, max(kv_usage) AS kv_usage,
           max(e2e_count) AS e2e_requests_end,
           min(e2e_count) AS e2e_requests_start, count(e2e_count) AS e2e_requests_n,
           max(e2e_sum_s) AS e2e_sum_s_end,
           min(e2e_sum_s) AS e2e_sum_s_start, count(e2e_sum_s) AS e2e_sum_s_n,
           max(ttft_count) AS ttft_n_end,
           min(ttft_count) AS ttft_n_start, count(ttft_count) AS ttft_n_n,
           max(ttft_sum_s) AS ttft_sum_s_end,
           min(ttft_sum_s) AS ttft_sum_s_start, count(ttft_sum_s) AS ttft_sum_s_n,
           max(queue_time_count) AS queue_n_end,
           min(queue_time_count) AS queue_n_start, count(queue_time_count) AS queue_n_n,
           max(queue_time_sum_s) AS queue_sum_s_end,
           min(queue_time_sum_s) AS queue_sum_s_start, count(queue_time_sum_s) AS queue_sum_s_n,
           max(prefill_time_sum_s) AS prefill_sum_s_end,
           min(prefill_time_sum_s) AS prefill_sum_s_start, count(prefill_time_sum_s) AS prefill_sum_s_n,
           max(decode_time_sum_s) AS decode_sum_s_end,
           min(decode_time_sum_s) AS decode_sum_s_start, count(decode_time_sum_s) AS decode_sum_s_n,
           max(prompt_tokens_total) AS prompt_tokens_end,
           min(prompt_tokens_total) AS prompt_tokens_start, count(prompt_tokens_total) AS prompt_tokens_n,
           max(generation_tokens_total) AS generation_tokens_end,
           min(generation_tokens_total) AS generation_tokens_start,
           count(generation_tokens_total) AS generation_tokens_n,
           max(preemptions_total) AS preemptions_end,
           min(preemptions_total) AS preemptions_start, count(preemptions_total) AS preemptions_n,
           max(http_2xx_total) AS http_2xx_end,
           min(http_2xx_total) AS http_2xx_start, count(http_2xx_total) AS http_2xx_n,
           max(http_4xx_total) AS http_4xx_end,
           min(http_4xx_total) AS http_4xx_start, count(http_4xx_total) AS http_4xx_n,
           max(http_5xx_total) AS http_5xx_end,
           min(http_5xx_total) AS http_5xx_start, count(http_5xx_total) AS http_5xx_n
    FROM engine_stats
    WHERE source IS DISTINCT FROM 'stage' AND (width_s IS NULL OR ts_s IS NOT NULL)
      AND (from_s IS NULL OR ts_s >= from_s) AND (to_s IS NULL OR ts_s < to_s)
    GROUP BY run_id, engine, source, window_start_s
), counted AS (
    SELECT *,
           sum(e2e_requests_n) OVER s AS e2e_requests_readings,
           sum(e2e_sum_s_n) OVER s AS e2e_sum_s_readings,
           sum(ttft_n_n) OVER s AS ttft_n_readings,
           sum(ttft_sum_s_n) OVER s AS ttft_sum_s_readings,
           sum(queue_n_n) OVER s AS queue_n_readings,
           sum(queue_sum_s_n) OVER s AS queue_sum_s_readings,
           sum(prefill_sum_s_n) OVER s AS prefill_sum_s_readings,
           sum(decode_sum_s_n) OVER s AS decode_sum_s_readings,
           sum(prompt_tokens_n) OVER s AS prompt_tokens_readings,
           sum(generation_tokens_n) OVER s AS generation_tokens_readings,
           sum(preemptions_n) OVER s AS preemptions_readings,
           sum(http_2xx_n) OVER s AS http_2xx_readings,
           sum(http_4xx_n) OVER s AS http_4xx_readings,
           sum(http_5xx_n) OVER s AS http_5xx_readings
    FROM per_window WINDOW s AS (PARTITION BY run_id, engine, source)
), per_source AS (
    SELECT run_id, engine, source, window_start_s, samples, running, waiting, waiting_capacity, kv_usage,
           e2e_requests_end - coalesce(last_value(e2e_requests_end IGNORE NULLS) OVER e,
                     CASE WHEN e2e_requests_readings > 1 THEN e2e_requests_start ELSE 0 END) AS e2e_requests,
           e2e_sum_s_end - coalesce(last_value(e2e_sum_s_end IGNORE NULLS) OVER e,
                     CASE WHEN e2e_sum_s_readings > 1 THEN e2e_sum_s_start ELSE 0 END) AS e2e_sum_s,
           ttft_n_end - coalesce(last_value(ttft_n_end IGNORE NULLS) OVER e,
                     CASE WHEN ttft_n_readings > 1 THEN ttft_n_start ELSE 0 END) AS ttft_n,
           ttft_sum_s_end - coalesce(last_value(ttft_sum_s_end IGNORE NULLS) OVER e,
                     CASE WHEN ttft_sum_s_readings > 1 THEN ttft_sum_s_start ELSE 0 END) AS ttft_sum_s,
           queue_n_end - coalesce(last_value(queue_n_end IGNORE NULLS) OVER e,
                     CASE WHEN queue_n_readings > 1 THEN queue_n_start ELSE 0 END) AS queue_n,
           queue_sum_s_end - coalesce(last_value(queue_sum_s_end IGNORE NULLS) OVER e,
                     CASE WHEN queue_sum_s_readings > 1 THEN queue_sum_s_start ELSE 0 END) AS queue_sum_s,
           prefill_sum_s_end - coalesce(last_value(prefill_sum_s_end IGNORE NULLS) OVER e,
                     CASE WHEN prefill_sum_s_readings > 1 THEN prefill_sum_s_start ELSE 0 END) AS prefill_sum_s,
           decode_sum_s_end - coalesce(last_value(decode_sum_s_end IGNORE NULLS) OVER e,
                     CASE WHEN decode_sum_s_readings > 1 THEN decode_sum_s_start ELSE 0 END) AS decode_sum_s,
           prompt_tokens_end - coalesce(last_value(prompt_tokens_end IGNORE NULLS) OVER e,
                     CASE WHEN prompt_tokens_readings > 1 THEN prompt_tokens_start ELSE 0 END) AS prompt_tokens,
           generation_tokens_end - coalesce(last_value(generation_tokens_end IGNORE NULLS) OVER e,
                     CASE WHEN generation_tokens_readings > 1 THEN generation_tokens_start ELSE 0 END)
               AS generation_tokens,
           preemptions_end - coalesce(last_value(preemptions_end IGNORE NULLS) OVER e,
                     CASE WHEN preemptions_readings > 1 THEN preemptions_start ELSE 0 END) AS preemptions,
           http_2xx_end - coalesce(last_value(http_2xx_end IGNORE NULLS) OVER e,
                     CASE WHEN http_2xx_readings > 1 THEN http_2xx_start ELSE 0 END) AS http_2xx,
           http_4xx_end - coalesce(last_value(http_4xx_end IGNORE NULLS) OVER e,
                     CASE WHEN http_4xx_readings > 1 THEN http_4xx_start ELSE 0 END) AS http_4xx,
           http_5xx_end - coalesce(last_value(http_5xx_end IGNORE NULLS) OVER e,
                     CASE WHEN http_5xx_readings > 1 THEN http_5xx_start ELSE 0 END) AS http_5xx
    FROM counted
    WINDOW e AS (PARTITION BY run_id, engine, source ORDER BY window_start_s
                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
), per_engine AS (
    SELECT run_id, engine, window_start_s, max(samples) AS samples, max(running) AS running, max(waiting) AS waiting,
           max(waiting_capacity) AS waiting_capacity, max(kv_usage) AS kv_usage,
           max(e2e_requests) AS e2e_requests, max(e2e_sum_s) AS e2e_sum_s, max(ttft_n) AS ttft_n, max(ttft_sum_s) AS
           ttft_sum_s, max(queue_n) AS queue_n, max(queue_sum_s) AS queue_sum_s, max(prefill_sum_s) AS
           prefill_sum_s, max(decode_sum_s) AS decode_sum_s, max(prompt_tokens) AS prompt_tokens,
           max(generation_tokens) AS generation_tokens, max(preemptions) AS preemptions,
           max(http_2xx) AS http_2xx, max(http_4xx) AS http_4xx, max(http_5xx) AS http_5xx
    FROM per_source GROUP BY run_id, engine, window_start_s
), summed AS (
    SELECT run_id, window_start_s, sum(samples) AS samples, count(*) AS engines, sum(running) AS mean_running,
           sum(waiting) AS mean_waiting, max(waiting_capacity) AS peak_waiting_capacity,
           max(kv_usage) AS peak_kv_usage,
           sum(e2e_requests) AS e2e_requests, sum(e2e_sum_s) AS e2e_sum_s, sum(ttft_n) AS ttft_n, sum(ttft_sum_s) AS
           ttft_sum_s, sum(queue_n) AS queue_n, sum(queue_sum_s) AS queue_sum_s, sum(prefill_sum_s) AS
           prefill_sum_s, sum(decode_sum_s) AS decode_sum_s, sum(prompt_tokens) AS prompt_tokens,
           sum(generation_tokens) AS generation_tokens, sum(preemptions) AS preemptions,
           sum(http_2xx) AS http_2xx, sum(http_4xx) AS http_4xx, sum(http_5xx) AS http_5xx
    FROM per_engine GROUP BY run_id, window_start_s
)
SELECT *, e2e_sum_s / nullif(e2e_requests, 0) AS e2e_mean_s, ttft_sum_s / nullif(ttft_n, 0) AS ttft_mean_s,
       queue_sum_s / nullif(queue_n, 0) AS queue_mean_s, queue_sum_s / nullif(e2e_sum_s, 0) AS queue_share,
       CASE WHEN coalesce(http_2xx, http_4xx, http_5xx) IS NOT NULL
            THEN coalesce(http_2xx, 0) + coalesce(http_4xx, 0) + coalesce(http_5xx, 0) END AS http_responses,
       CASE WHEN coalesce(http_4xx, http_5xx) IS NOT NULL THEN coalesce(http_4xx, 0) + coalesce(http_5xx, 0) END
           AS http_failed
FROM summed;

-- engine_windows_summed: the engine's own figures per time window, summed over the runs of the connection (or one
-- run alone) and their replicas: what analyze's engine timeline, weekly's engine windows and an engine-only diff
-- show (a table macro: engine_windows_summed(width_s, from_s, to_s, only_run) over engine_windows(width_s, from_s,
-- to_s); only_run NULL: every run, as one fleet).
-- requires: engine_windows
-- columns:
--   window_start_s         start of the window, seconds on the run clock
--   runs                   runs with a sample in the window
--   engines                engines with a sample in the window, summed over the runs
--   requests               requests the e2e histograms counted (finished in the window)
--   mean_running           requests running, mean over the window, summed over the runs
--   mean_waiting           requests waiting, mean over the window, summed over the runs
--   peak_kv_usage          highest KV-cache usage at an engine sample (0-1)
--   preemptions            preemptions
--   peak_waiting_capacity  most requests waiting for scheduling capacity at one engine sample
--   queue_share            summed queue time / summed e2e (0-1)
--   prefill_time_share     summed prefill time / summed prefill and decode time (0-1)
--   e2e_mean_s             summed e2e / requests, seconds
--   prompt_tokens          prompt tokens processed
--   generation_tokens      tokens generated
--   e2e_sum_s              summed end-to-end latency, seconds
--   queue_sum_s            summed queue time, seconds
--   queue_n                requests the queue-time histograms counted
--   prefill_sum_s          summed prefill time, seconds
--   decode_sum_s           summed decode time, seconds
--   http_2xx               the API servers' responses with a 2xx status
--   http_4xx               their responses with a 4xx status
--   http_5xx               their responses with a 5xx status
--   http_responses         their responses with a 2xx, 4xx or 5xx status
--   http_failed            their responses with a 4xx or 5xx status
CREATE OR REPLACE MACRO engine_windows_summed(width_s, from_s, to_s, only_run) AS TABLE
SELECT window_start_s, count(DISTINCT run_id) AS runs, sum(engines) AS engines,
       sum(e2e_requests) AS requests, sum(mean_running) AS mean_running, sum(mean_waiting) AS mean_waiting,
       max(peak_kv_usage) AS peak_kv_usage, sum(preemptions) AS preemptions,
       max(peak_waiting_capacity) AS peak_waiting_capacity,
       sum(queue_sum_s) / nullif(sum(e2e_sum_s), 0) AS queue_share,
       sum(prefill_sum_s) / nullif(sum(prefill_sum_s) + sum(decode_sum_s), 0) AS prefill_time_share,
       sum(e2e_sum_s) / nullif(sum(e2e_requests), 0) AS e2e_mean_s,
       sum(prompt_tokens) AS prompt_tokens, sum(generation_tokens) AS generation_tokens,
       sum(e2e_sum_s) AS e2e_sum_s, sum(queue_sum_s) AS queue_sum_s, sum(queue_n) AS queue_n,
       sum(prefill_sum_s) AS prefill_sum_s, sum(decode_sum_s) AS decode_sum_s,
       sum(http_2xx) AS http_2xx, sum(http_4xx) AS http_4xx, sum(http_5xx) AS http_5xx,
       sum(http_responses) AS http_responses, sum(http_failed) AS http_failed
FROM engine_windows(width_s, from_s, to_s) WHERE only_run IS NULL OR run_id = only_run
GROUP BY window_start_s ORDER BY window_start_s;

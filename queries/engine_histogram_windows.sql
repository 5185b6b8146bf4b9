-- engine_histogram_windows: quantiles of the engine's own latency and size histograms per run, time window and
-- metric (a table macro: engine_histogram_windows(width_s, by_run, from_s, to_s) over the samples in [from_s,
-- to_s), NULL: unbounded; NULL width: one window, all of them; by_run false: every run's buckets summed, as one
-- fleet, run_id NULL). What a
-- Prometheus export says about requests without any request file. Estimates, labelled: a quantile is
-- interpolated inside the bucket that holds its rank (Prometheus' histogram_quantile rule: linear between the
-- bucket's bounds, the first bucket from 0, the +Inf bucket gives the highest finite bound), so the bucket's
-- bounds are its precision. Where the engine also exports the histogram's sum (queue_time, ttft, e2e, prefill_time,
-- decode_time: engine_stats' *_sum_s), its window mean m bounds each quantile from above (Markov: a nonnegative
-- latency's q-quantile is at most m / (1 - q)): the bucket's upper bound is cut to it and the estimate with it. vLLM's
-- queue and prefill buckets start at 0.3 s, so on an engine whose requests never wait the rule's 150 ms median
-- (the middle of [0, 0.3]) becomes at most twice the measured mean.
-- requires: engine_histograms, engine_stats
-- A window's counts are each bucket's change from the previous window's last sample to this window's last
-- sample (in the first window, from its first sample), per engine, summed over engines; an engine with a
-- single sample in the whole run counts since its server started (basis says which).
-- columns:
--   run_id          run (NULL when by_run is false)
--   window_start_s  start of the window, seconds on the run clock (from_s, else 0, with a NULL width)
--   metric          queue_time | ttft | e2e | tpot | itl | prefill_time | decode_time | prompt_tokens | generation_tokens
--   basis           between samples | since server start, one sample
--   observations    requests (or tokens) the histogram counted in the window
--   mean            the window's mean from the histogram's sum, where exported (NULL: no sum)
--   p50             median, interpolated (seconds; tokens for the size histograms)
--   p50_lo          lower bound of the bucket holding the median
--   p50_hi          upper bound of that bucket (NULL: the +Inf bucket), or the mean's bound where lower
--   p90             90th percentile, interpolated
--   p90_lo          lower bound of its bucket
--   p90_hi          upper bound of its bucket
--   p99             99th percentile, interpolated
--   p99_lo          lower bound of its bucket
--   p99_hi          upper bound of its bucket
CREATE OR REPLACE MACRO engine_histogram_windows(width_s, by_run, from_s, to_s) AS TABLE
WITH series AS (
    -- each bucket's cumulative count, and (is_sum) the histogram's cumulative sum where engine_stats has it
    SELECT run_id, engine, metric, le, false AS is_sum, ts_s, count AS value FROM engine_histograms
    UNION ALL
    SELECT run_id, engine, metric, NULL, true, ts_s, value
    FROM (UNPIVOT (SELECT run_id, engine, ts_s, queue_time_sum_s AS queue_time, ttft_sum_s AS ttft, e2e_sum_s AS e2e,
                          prefill_time_sum_s AS prefill_time, decode_time_sum_s AS decode_time
                   FROM engine_stats WHERE source = 'prometheus')
          ON queue_time, ttft, e2e, prefill_time, decode_time INTO NAME metric VALUE value)
), per_window AS (
    SELECT run_id, engine, metric, le, is_sum,
           CASE WHEN width_s IS NULL THEN coalesce(from_s, 0.0) ELSE floor(ts_s / width_s) * width_s END AS window_start_s,
           max(value) AS c_end, min(value) AS c_start, count(*) AS samples
    FROM series
    WHERE (width_s IS NULL OR ts_s IS NOT NULL) AND (from_s IS NULL OR ts_s >= from_s) AND (to_s IS NULL OR ts_s < to_s)
    GROUP BY run_id, engine, metric, le, is_sum, window_start_s
), per_engine AS (
    SELECT run_id, engine, metric, le, is_sum, window_start_s,
           c_end - coalesce(lag(c_end) OVER e, CASE WHEN sum(samples) OVER e_all > 1 THEN c_start ELSE 0 END) AS n,
           sum(samples) OVER e_all = 1 AS since_start
    FROM per_window
    WINDOW e AS (PARTITION BY run_id, engine, metric, le, is_sum ORDER BY window_start_s),
           e_all AS (PARTITION BY run_id, engine, metric, le, is_sum)
), summed AS (
    SELECT CASE WHEN by_run THEN run_id END AS run_id, window_start_s, metric, le, is_sum, sum(n) AS cum,
           bool_and(since_start) AS since_start
    FROM per_engine GROUP BY ALL
), window_sum AS (
    SELECT run_id, window_start_s, metric, cum AS sum_value FROM summed WHERE is_sum
), ordered AS (
    SELECT run_id, window_start_s, metric, le AS hi, cum, since_start,
           coalesce(lag(le) OVER w, 0.0) AS lo, coalesce(lag(cum) OVER w, 0.0) AS cum_lo,
           max(cum) OVER (PARTITION BY run_id, window_start_s, metric) AS total
    FROM summed WHERE NOT is_sum
    WINDOW w AS (PARTITION BY run_id, window_start_s, metric ORDER BY le ASC NULLS LAST)
), ranked AS (
    SELECT o.*, q.q, q.q * o.total AS rank
    FROM ordered o CROSS JOIN (SELECT unnest([0.5, 0.9, 0.99]) AS q) q
), holding AS (
    -- the first bucket whose cumulative count reaches the rank
    SELECT run_id, window_start_s, metric, q,
           arg_min(struct_pack(lo := lo, hi := hi, cum := cum, cum_lo := cum_lo, rank := rank),
                   coalesce(hi, 'infinity'::DOUBLE)) AS b,
           any_value(total) AS total, bool_and(since_start) AS since_start
    FROM ranked WHERE cum >= rank AND total > 0 GROUP BY run_id, window_start_s, metric, q
), interpolated AS (
    SELECT h.run_id, h.window_start_s, h.metric, q, total, since_start, b.lo, b.hi,
           CASE WHEN b.hi IS NULL THEN b.lo
                WHEN b.cum = b.cum_lo THEN b.hi
                ELSE b.lo + (b.hi - b.lo) * (b.rank - b.cum_lo) / (b.cum - b.cum_lo) END AS v,
           -- the mean's bound, where the sum is known and agrees with the bucket (a bound below the bucket's lower
           -- edge means the sum and the buckets disagree: not used)
           CASE WHEN s.sum_value >= 0 AND s.sum_value / total / (1 - q) >= b.lo THEN s.sum_value / total / (1 - q) END
               AS bound,
           s.sum_value / total AS mean
    FROM holding h LEFT JOIN window_sum s
        ON s.run_id IS NOT DISTINCT FROM h.run_id AND s.window_start_s = h.window_start_s AND s.metric = h.metric
), valued AS (
    SELECT run_id, window_start_s, metric, q, total, since_start, lo, mean,
           CASE WHEN bound < coalesce(hi, 'infinity'::DOUBLE) THEN bound ELSE hi END AS hi,
           least(v, coalesce(bound, v)) AS v
    FROM interpolated
)
SELECT run_id, window_start_s, metric,
       CASE WHEN bool_and(since_start) THEN 'since server start, one sample' ELSE 'between samples' END AS basis,
       any_value(total) AS observations, any_value(mean) AS mean,
       max(v) FILTER (WHERE q = 0.5) AS p50, max(lo) FILTER (WHERE q = 0.5) AS p50_lo,
       max(hi) FILTER (WHERE q = 0.5) AS p50_hi,
       max(v) FILTER (WHERE q = 0.9) AS p90, max(lo) FILTER (WHERE q = 0.9) AS p90_lo,
       max(hi) FILTER (WHERE q = 0.9) AS p90_hi,
       max(v) FILTER (WHERE q = 0.99) AS p99, max(lo) FILTER (WHERE q = 0.99) AS p99_lo,
       max(hi) FILTER (WHERE q = 0.99) AS p99_hi
FROM valued GROUP BY run_id, window_start_s, metric;

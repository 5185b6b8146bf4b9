-- engine_histogram_windows: quantiles of the engine's own latency and size histograms per run, time window and
-- metric (a table macro: engine_histogram_windows(width_s, by_run, from_s, to_s) over the samples in [from_s,
-- to_s), NULL: unbounded; NULL width: one window, all of them; by_run false: every run's buckets summed, as one
-- fleet, run_id NULL). What a
-- Prometheus export says about requests without any request file. Estimates, labelled: a quantile is
-- interpolated inside the bucket that holds its rank (Prometheus' histogram_quantile rule: linear between the
-- bucket's bounds, the first bucket from 0, the +Inf bucket gives the highest finite bound), so the bucket's
-- bounds are its precision.
-- requires: engine_histograms
-- A window's counts are each bucket's change from the previous window's last sample to this window's last
-- sample (in the first window, from its first sample), per engine, summed over engines; an engine with a
-- single sample in the whole run counts since its server started (basis says which).
-- columns:
--   run_id          run (NULL when by_run is false)
--   window_start_s  start of the window, seconds on the run clock (from_s, else 0, with a NULL width)
--   metric          queue_time | ttft | e2e | tpot | itl | prefill_time | decode_time | prompt_tokens | generation_tokens
--   basis           between samples | since server start, one sample
--   observations    requests (or tokens) the histogram counted in the window
--   p50             median, interpolated (seconds; tokens for the size histograms)
--   p50_lo          lower bound of the bucket holding the median
--   p50_hi          upper bound of that bucket (NULL: the +Inf bucket)
--   p90             90th percentile, interpolated
--   p90_lo          lower bound of its bucket
--   p90_hi          upper bound of its bucket
--   p99             99th percentile, interpolated
--   p99_lo          lower bound of its bucket
--   p99_hi          upper bound of its bucket
CREATE OR REPLACE MACRO engine_histogram_windows(width_s, by_run, from_s, to_s) AS TABLE
WITH per_window AS (
    SELECT run_id, engine, metric, le,
           CASE WHEN width_s IS NULL THEN coalesce(from_s, 0.0) ELSE floor(ts_s / width_s) * width_s END AS window_start_s,
           max(count) AS c_end, min(count) AS c_start, count(*) AS samples
    FROM engine_histograms
    WHERE (width_s IS NULL OR ts_s IS NOT NULL) AND (from_s IS NULL OR ts_s >= from_s) AND (to_s IS NULL OR ts_s < to_s)
    GROUP BY run_id, engine, metric, le, window_start_s
), per_engine AS (
    SELECT run_id, engine, metric, le, window_start_s,
           c_end - coalesce(lag(c_end) OVER e, CASE WHEN sum(samples) OVER e_all > 1 THEN c_start ELSE 0 END) AS n,
           sum(samples) OVER e_all = 1 AS since_start
    FROM per_window
    WINDOW e AS (PARTITION BY run_id, engine, metric, le ORDER BY window_start_s),
           e_all AS (PARTITION BY run_id, engine, metric, le)
), summed AS (
    SELECT CASE WHEN by_run THEN run_id END AS run_id, window_start_s, metric, le, sum(n) AS cum,
           bool_and(since_start) AS since_start
    FROM per_engine GROUP BY ALL
), ordered AS (
    SELECT run_id, window_start_s, metric, le AS hi, cum, since_start,
           coalesce(lag(le) OVER w, 0.0) AS lo, coalesce(lag(cum) OVER w, 0.0) AS cum_lo,
           max(cum) OVER (PARTITION BY run_id, window_start_s, metric) AS total
    FROM summed WINDOW w AS (PARTITION BY run_id, window_start_s, metric ORDER BY le ASC NULLS LAST)
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
), valued AS (
    SELECT run_id, window_start_s, metric, q, total, since_start, b.lo, b.hi,
           CASE WHEN b.hi IS NULL THEN b.lo
                WHEN b.cum = b.cum_lo THEN b.hi
                ELSE b.lo + (b.hi - b.lo) * (b.rank - b.cum_lo) / (b.cum - b.cum_lo) END AS v
    FROM holding
)
SELECT run_id, window_start_s, metric,
       CASE WHEN bool_and(since_start) THEN 'since server start, one sample' ELSE 'between samples' END AS basis,
       any_value(total) AS observations,
       max(v) FILTER (WHERE q = 0.5) AS p50, max(lo) FILTER (WHERE q = 0.5) AS p50_lo,
       max(hi) FILTER (WHERE q = 0.5) AS p50_hi,
       max(v) FILTER (WHERE q = 0.9) AS p90, max(lo) FILTER (WHERE q = 0.9) AS p90_lo,
       max(hi) FILTER (WHERE q = 0.9) AS p90_hi,
       max(v) FILTER (WHERE q = 0.99) AS p99, max(lo) FILTER (WHERE q = 0.99) AS p99_lo,
       max(hi) FILTER (WHERE q = 0.99) AS p99_hi
FROM valued GROUP BY run_id, window_start_s, metric;

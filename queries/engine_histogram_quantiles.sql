-- engine_histogram_quantiles: quantiles of the engine's own latency and size histograms, per run and metric:
-- what a Prometheus export says about requests without any request file. Estimates, labelled: a quantile is
-- interpolated inside the bucket that holds its rank (Prometheus' histogram_quantile rule: linear between the
-- bucket's bounds, the first bucket from 0, the +Inf bucket gives the highest finite bound), so the bucket's
-- bounds are its precision.
-- requires: engine_histograms
-- Counts are each bucket's change between the first and the last sample of each engine (the count since the
-- server started where there is one sample), summed over engines.
-- columns:
--   run_id        run
--   metric        queue_time | ttft | e2e | tpot | itl | prefill_time | decode_time | prompt_tokens | generation_tokens
--   basis         between samples | since server start, one sample
--   observations  requests (or tokens) the histogram counted over that span
--   p50           median, interpolated (seconds; tokens for the size histograms)
--   p50_lo        lower bound of the bucket holding the median
--   p50_hi        upper bound of that bucket (NULL: the +Inf bucket)
--   p90           90th percentile, interpolated
--   p90_lo        lower bound of its bucket
--   p90_hi        upper bound of its bucket
--   p99           99th percentile, interpolated
--   p99_lo        lower bound of its bucket
--   p99_hi        upper bound of its bucket
CREATE OR REPLACE VIEW engine_histogram_quantiles AS
WITH per_engine AS (
    SELECT run_id, engine, metric, le, count(*) AS samples,
           max(count) - CASE WHEN count(*) > 1 THEN min(count) ELSE 0 END AS n
    FROM engine_histograms GROUP BY run_id, engine, metric, le
), summed AS (
    SELECT run_id, metric, le, sum(n) AS cum, max(samples) AS samples FROM per_engine GROUP BY run_id, metric, le
), ordered AS (
    SELECT run_id, metric, le AS hi, cum, samples,
           coalesce(lag(le) OVER w, 0.0) AS lo, coalesce(lag(cum) OVER w, 0.0) AS cum_lo,
           max(cum) OVER (PARTITION BY run_id, metric) AS total
    FROM summed WINDOW w AS (PARTITION BY run_id, metric ORDER BY le ASC NULLS LAST)
), ranked AS (
    SELECT o.*, q.q, q.q * o.total AS rank
    FROM ordered o CROSS JOIN (SELECT unnest([0.5, 0.9, 0.99]) AS q) q
), holding AS (
    -- the first bucket whose cumulative count reaches the rank
    SELECT run_id, metric, q, arg_min(struct_pack(lo := lo, hi := hi, cum := cum, cum_lo := cum_lo, rank := rank),
                                      coalesce(hi, 'infinity'::DOUBLE)) AS b,
           any_value(total) AS total, max(samples) AS samples
    FROM ranked WHERE cum >= rank AND total > 0 GROUP BY run_id, metric, q
), valued AS (
    SELECT run_id, metric, q, total, samples, b.lo, b.hi,
           CASE WHEN b.hi IS NULL THEN b.lo
                WHEN b.cum = b.cum_lo THEN b.hi
                ELSE b.lo + (b.hi - b.lo) * (b.rank - b.cum_lo) / (b.cum - b.cum_lo) END AS v
    FROM holding
)
SELECT run_id, metric,
       CASE WHEN max(samples) > 1 THEN 'between samples' ELSE 'since server start, one sample' END AS basis,
       any_value(total) AS observations,
       max(v) FILTER (WHERE q = 0.5) AS p50, max(lo) FILTER (WHERE q = 0.5) AS p50_lo,
       max(hi) FILTER (WHERE q = 0.5) AS p50_hi,
       max(v) FILTER (WHERE q = 0.9) AS p90, max(lo) FILTER (WHERE q = 0.9) AS p90_lo,
       max(hi) FILTER (WHERE q = 0.9) AS p90_hi,
       max(v) FILTER (WHERE q = 0.99) AS p99, max(lo) FILTER (WHERE q = 0.99) AS p99_lo,
       max(hi) FILTER (WHERE q = 0.99) AS p99_hi
FROM valued GROUP BY run_id, metric;

-- attribution_run: a run's latency by component, summed over its requests, with shares of summed e2e.
-- requires: attribution_request, requests_cached_tokens
-- Only requests with every component known count (others are listed in requests_incomplete); the five
-- shares then sum to 1.
-- columns:
--   run_id               run
--   requests             requests attributed
--   requests_incomplete  successful requests with a component unknown
--   clock_errors         attributed requests whose overhead is negative beyond tolerance
--   e2e_s                summed e2e, seconds
--   queue_s              summed queue, seconds
--   prefill_s            summed prefill, seconds
--   decode_s             summed decode, seconds
--   preempted_s          summed preempted time, seconds
--   overhead_s           summed overhead, seconds
--   queue_share          queue_s / e2e_s
--   prefill_share        prefill_s / e2e_s
--   decode_share         decode_s / e2e_s
--   preempted_share      preempted_s / e2e_s
--   overhead_share       overhead_s / e2e_s
--   queue_basis          measured | estimated | mixed
--   prefill_basis        measured | estimated | mixed
--   decode_basis         measured | derived | mixed
--   prefill_tokens_per_s summed input tokens / summed prefill time (the run's measured prefill rate, of prompt
--                        tokens: those taken from the prefix cache count as prefilled)
--   prefill_cached_tokens summed prompt tokens the requests took from the prefix cache (requests_cached_tokens),
--                        NULL unless every attributed request's figure is known
--   prefill_computed_tokens_per_s (summed input tokens - prefill_cached_tokens) / summed prefill time: the rate
--                        of the prompt tokens the engine computed (NULL where prefill_cached_tokens is)
--   decode_s_per_token   summed decode time / summed tokens after the first (the run's time per output token)
--   mean_output_tokens   mean generated tokens per request
--   prefill_dominant_requests  requests whose prefill took longer than their decode
CREATE OR REPLACE VIEW attribution_run AS
WITH a AS (
    SELECT * FROM attribution_request
    WHERE e2e_s IS NOT NULL AND queue_s IS NOT NULL AND prefill_s IS NOT NULL AND decode_s IS NOT NULL
), inc AS (
    SELECT run_id, count(*) FILTER (WHERE e2e_s IS NULL OR queue_s IS NULL OR prefill_s IS NULL
                                     OR decode_s IS NULL) AS n
    FROM attribution_request GROUP BY run_id
), cached AS (  -- one figure per request id (an id given twice gets none)
    SELECT run_id, request_id, any_value(cached_tokens) AS cached_tokens
    FROM requests_cached_tokens GROUP BY run_id, request_id HAVING count(*) = 1
)
SELECT a.run_id, count(*) AS requests, any_value(inc.n) AS requests_incomplete,
       count(*) FILTER (WHERE clock_error) AS clock_errors,
       sum(e2e_s) AS e2e_s, sum(queue_s) AS queue_s, sum(prefill_s) AS prefill_s, sum(decode_s) AS decode_s,
       sum(preempted_s) AS preempted_s, sum(overhead_s) AS overhead_s,
       sum(queue_s) / sum(e2e_s) AS queue_share, sum(prefill_s) / sum(e2e_s) AS prefill_share,
       sum(decode_s) / sum(e2e_s) AS decode_share, sum(preempted_s) / sum(e2e_s) AS preempted_share,
       sum(overhead_s) / sum(e2e_s) AS overhead_share,
       CASE WHEN min(queue_basis) = max(queue_basis) THEN min(queue_basis) ELSE 'mixed' END AS queue_basis,
       CASE WHEN min(prefill_basis) = max(prefill_basis) THEN min(prefill_basis) ELSE 'mixed' END AS prefill_basis,
       CASE WHEN min(decode_basis) = max(decode_basis) THEN min(decode_basis) ELSE 'mixed' END AS decode_basis,
       sum(input_tokens) / nullif(sum(prefill_s), 0) AS prefill_tokens_per_s,
       CASE WHEN count(c.cached_tokens) = count(*) THEN sum(c.cached_tokens) END AS prefill_cached_tokens,
       CASE WHEN count(c.cached_tokens) = count(*)
            THEN (sum(input_tokens) - sum(c.cached_tokens)) / nullif(sum(prefill_s), 0) END
           AS prefill_computed_tokens_per_s,
       sum(decode_s) / nullif(sum(greatest(output_tokens - 1, 0)), 0) AS decode_s_per_token,
       avg(output_tokens) AS mean_output_tokens,
       count(*) FILTER (WHERE dominant_phase = 'prefill') AS prefill_dominant_requests
FROM a JOIN inc USING (run_id)
LEFT JOIN cached c ON c.run_id = a.run_id AND c.request_id = a.request_id
GROUP BY a.run_id;

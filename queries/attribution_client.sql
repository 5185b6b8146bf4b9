-- attribution_client: a run's latency by component per client, as means per request: each file or benchmark the
-- requests came from (a guidellm or vLLM sweep's load levels, two clients run at once), so that how each part grows
-- with the load, or which client waited, is read off one table.
-- requires: attribution_request, attribution_queue_causes
-- Only requests with every component known count, as in attribution_run; the queue parts are the means of
-- attribution_queue_causes over the same requests (NULL where its sources cannot tell them).
-- columns:
--   run_id              run
--   client_id           client or file the requests came from
--   requests            requests attributed
--   first_arrival_s     the client's first arrival on the run clock, seconds
--   arrival_rate_per_s  its requests over the span of its arrivals, per second (NULL for fewer than two)
--   e2e_s               mean e2e, seconds
--   e2e_p90_s           90th percentile e2e, seconds
--   queue_s             mean queue, seconds
--   kv_wait_s           mean queue time waiting for KV room, seconds
--   slot_wait_s         mean queue time waiting for a sequence slot, seconds
--   budget_wait_s       mean queue time waiting for the token budget, seconds
--   prefill_s           mean prefill, seconds
--   decode_s            mean decode, seconds
--   preempted_s         mean preempted time, seconds
--   overhead_s          mean overhead, seconds
--   mean_input_tokens   mean prompt tokens
--   mean_output_tokens  mean generated tokens
CREATE OR REPLACE VIEW attribution_client AS
WITH a AS (
    SELECT * FROM attribution_request
    WHERE e2e_s IS NOT NULL AND queue_s IS NOT NULL AND prefill_s IS NOT NULL AND decode_s IS NOT NULL
), causes AS (  -- one figure per request id (an id given twice gets none)
    SELECT run_id, request_id, any_value(kv_wait_s) AS kv_wait_s, any_value(slot_wait_s) AS slot_wait_s,
           any_value(budget_wait_s) AS budget_wait_s
    FROM attribution_queue_causes GROUP BY run_id, request_id HAVING count(*) = 1
)
SELECT a.run_id, a.client_id, count(*) AS requests, min(a.arrival_s) AS first_arrival_s,
       CASE WHEN count(a.arrival_s) > 1 AND max(a.arrival_s) > min(a.arrival_s)
            THEN (count(a.arrival_s) - 1) / (max(a.arrival_s) - min(a.arrival_s)) END AS arrival_rate_per_s,
       avg(a.e2e_s) AS e2e_s, quantile_cont(a.e2e_s, 0.9) AS e2e_p90_s, avg(a.queue_s) AS queue_s,
       avg(c.kv_wait_s) AS kv_wait_s, avg(c.slot_wait_s) AS slot_wait_s, avg(c.budget_wait_s) AS budget_wait_s,
       avg(a.prefill_s) AS prefill_s, avg(a.decode_s) AS decode_s, avg(a.preempted_s) AS preempted_s,
       avg(a.overhead_s) AS overhead_s, avg(a.input_tokens) AS mean_input_tokens,
       avg(a.output_tokens) AS mean_output_tokens
FROM a LEFT JOIN causes c ON c.run_id = a.run_id AND c.request_id = a.request_id
GROUP BY a.run_id, a.client_id;

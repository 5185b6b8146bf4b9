-- attribution_client: a run's latency by component per client, as means per request: each file or benchmark the
-- requests came from (a guidellm or vLLM sweep's load levels, two clients run at once), so that how each part grows
-- with the load, or which client waited, is read off one table.
-- requires: attribution_parts
-- Only requests with every component known count, as in attribution_run; the queue parts are NULL where the
-- run's sources cannot tell them.
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
SELECT run_id, client_id, count(*) AS requests, min(arrival_s) AS first_arrival_s,
       CASE WHEN count(arrival_s) > 1 AND max(arrival_s) > min(arrival_s)
            THEN (count(arrival_s) - 1) / (max(arrival_s) - min(arrival_s)) END AS arrival_rate_per_s,
       avg(e2e_s) AS e2e_s, quantile_cont(e2e_s, 0.9) AS e2e_p90_s, avg(queue_s) AS queue_s,
       avg(kv_wait_s) AS kv_wait_s, avg(slot_wait_s) AS slot_wait_s, avg(budget_wait_s) AS budget_wait_s,
       avg(prefill_s) AS prefill_s, avg(decode_s) AS decode_s, avg(preempted_s) AS preempted_s,
       avg(overhead_s) AS overhead_s, avg(input_tokens) AS mean_input_tokens, avg(output_tokens) AS mean_output_tokens
FROM attribution_parts
GROUP BY run_id, client_id;

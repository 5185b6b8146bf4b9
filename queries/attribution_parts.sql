-- attribution_parts: each request whose every part is known (as attribution_run counts them), with its queue
-- split by cause beside: the rows the per-client and tail tables average.
-- requires: attribution_request, attribution_queue_causes
-- A request id given twice gets no queue split (its causes cannot be told apart); the parts are NULL where the
-- run's sources cannot tell them (attribution_queue_causes).
-- columns:
--   run_id          run
--   request_id      request
--   client_id       client or file the request came from
--   arrival_s       arrival on the run clock, seconds
--   input_tokens    prompt tokens
--   output_tokens   generated tokens
--   e2e_s           reference end-to-end latency, seconds
--   queue_s         queue, seconds
--   kv_wait_s       queue time waiting for KV room, seconds
--   slot_wait_s     queue time waiting for a sequence slot, seconds
--   budget_wait_s   queue time waiting for the token budget, seconds
--   prefill_s       prefill, seconds
--   decode_s        decode, seconds
--   preempted_s     preempted time, seconds
--   overhead_s      overhead, seconds
CREATE OR REPLACE VIEW attribution_parts AS
WITH causes AS (
    SELECT run_id, request_id, any_value(kv_wait_s) AS kv_wait_s, any_value(slot_wait_s) AS slot_wait_s,
           any_value(budget_wait_s) AS budget_wait_s
    FROM attribution_queue_causes GROUP BY run_id, request_id HAVING count(*) = 1
)
SELECT a.run_id, a.request_id, a.client_id, a.arrival_s, a.input_tokens, a.output_tokens, a.e2e_s, a.queue_s,
       c.kv_wait_s, c.slot_wait_s, c.budget_wait_s, a.prefill_s, a.decode_s, a.preempted_s, a.overhead_s
FROM attribution_request a
LEFT JOIN causes c ON c.run_id = a.run_id AND c.request_id = a.request_id
WHERE a.e2e_s IS NOT NULL AND a.queue_s IS NOT NULL AND a.prefill_s IS NOT NULL AND a.decode_s IS NOT NULL;

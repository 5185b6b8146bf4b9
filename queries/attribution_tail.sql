-- attribution_tail: the slowest tenth of a run's requests (e2e at or above the run's 90th percentile) against the
-- rest, as means per request with their sizes: what made the slow requests slow (waiting, a long prompt, a long
-- answer, a slower decode per token) read off two rows.
-- requires: attribution_parts
-- Only requests with every component known count, as in attribution_run.
-- columns:
--   run_id              run
--   part                slowest | rest
--   requests            requests in the part
--   e2e_from_s          the part's smallest e2e, seconds (the slowest: the run's p90)
--   e2e_s               mean e2e, seconds
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
--   decode_s_per_token  summed decode over summed tokens after the first, seconds
CREATE OR REPLACE VIEW attribution_tail AS
WITH cut AS (
    SELECT run_id, quantile_cont(e2e_s, 0.9) AS p90 FROM attribution_parts GROUP BY run_id
)
SELECT p.run_id, CASE WHEN p.e2e_s >= cut.p90 THEN 'slowest' ELSE 'rest' END AS part, count(*) AS requests,
       min(p.e2e_s) AS e2e_from_s, avg(p.e2e_s) AS e2e_s, avg(p.queue_s) AS queue_s, avg(p.kv_wait_s) AS kv_wait_s,
       avg(p.slot_wait_s) AS slot_wait_s, avg(p.budget_wait_s) AS budget_wait_s, avg(p.prefill_s) AS prefill_s,
       avg(p.decode_s) AS decode_s, avg(p.preempted_s) AS preempted_s, avg(p.overhead_s) AS overhead_s,
       avg(p.input_tokens) AS mean_input_tokens, avg(p.output_tokens) AS mean_output_tokens,
       sum(p.decode_s) / nullif(sum(greatest(p.output_tokens - 1, 0)), 0) AS decode_s_per_token
FROM attribution_parts p JOIN cut USING (run_id)
GROUP BY ALL;

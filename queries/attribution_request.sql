-- attribution_request: each request's end-to-end latency split into additive parts (docs/latency-model.md).
-- requires: requests_latency
-- e2e is the reference latency of requests_latency (the client's when a client measured it, so network and
-- client effects land in overhead; else the engine's). queue and prefill are the engine's measurements, else
-- the labelled estimates; decode is the engine's, else derived from the reference first and last token when
-- one side measured both. Time preempted (a preemption until the rescheduling) is taken out of prefill /
-- decode where a source gives those timestamps (vLLM journey events); elsewhere it stays inside them and
-- preempted is 0. A negative overhead beyond max(threshold_clock_error_s, threshold_clock_error_share x e2e)
-- is a clock-alignment error: reported in clock_error, never clipped. Failed requests are left out.
-- columns:
--   run_id            run
--   request_id        request (NULL for traces without ids)
--   client_id         client or file the request came from
--   arrival_s         arrival on the run clock, seconds
--   input_tokens      prompt tokens
--   output_tokens     generated tokens
--   e2e_s             reference end-to-end latency, seconds
--   e2e_basis         client | server
--   queue_s           queued before first scheduled, seconds
--   queue_basis       measured | estimated
--   prefill_s         first scheduled to first token, seconds
--   prefill_basis     measured | estimated
--   decode_s          first to last token, seconds
--   decode_basis      measured | derived
--   preempted_s       preempted until rescheduled, seconds (0 where no source times it: inside prefill / decode)
--   overhead_s        e2e - (queue + prefill + decode + preempted), seconds
--   num_preemptions   preemptions of this request where a source counts them
--   clock_error       true when overhead is negative beyond tolerance (clocks misaligned)
--   prefill_share     prefill_s / (prefill_s + decode_s): this request's own prefill share (0-1)
--   dominant_phase    prefill | decode: which of the two took longer for this request
CREATE OR REPLACE VIEW attribution_request AS
WITH r AS (
    SELECT run_id, request_id, client_id, arrival_s, input_tokens, output_tokens, num_preemptions,
           e2e_s, e2e_basis,
           coalesce(queue_s, queue_s_est) AS queue_s,
           CASE WHEN queue_s IS NOT NULL THEN 'measured' WHEN queue_s_est IS NOT NULL THEN 'estimated' END
               AS queue_basis,
           coalesce(prefill_s - coalesce(preempted_in_prefill_s, 0), prefill_s_est) AS prefill_s,
           CASE WHEN prefill_s IS NOT NULL THEN 'measured' WHEN prefill_s_est IS NOT NULL THEN 'estimated' END
               AS prefill_basis,
           coalesce(decode_s - coalesce(preempted_s - preempted_in_prefill_s, 0),
                    CASE WHEN ttft_basis = e2e_basis THEN e2e_s - ttft_s END) AS decode_s,
           coalesce(preempted_s, 0.0) AS preempted_s,
           CASE WHEN decode_s IS NOT NULL THEN 'measured' WHEN ttft_basis = e2e_basis THEN 'derived' END
               AS decode_basis
    FROM requests_latency
    WHERE counted
)
SELECT run_id, request_id, client_id, arrival_s, input_tokens, output_tokens, e2e_s, e2e_basis,
       queue_s, queue_basis, prefill_s, prefill_basis, decode_s, decode_basis,
       preempted_s,
       e2e_s - (queue_s + prefill_s + decode_s + preempted_s) AS overhead_s,
       num_preemptions,
       coalesce(e2e_s - (queue_s + prefill_s + decode_s + preempted_s)
                < -greatest(threshold_clock_error_s(), threshold_clock_error_share() * e2e_s), false) AS clock_error,
       prefill_s / nullif(prefill_s + decode_s, 0) AS prefill_share,
       CASE WHEN prefill_s > decode_s THEN 'prefill' WHEN prefill_s IS NOT NULL AND decode_s IS NOT NULL
            THEN 'decode' END AS dominant_phase
FROM r;

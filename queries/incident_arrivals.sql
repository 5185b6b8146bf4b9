-- incident_arrivals: each counted request on a clock from the run's first counted arrival, with its client, size
-- class and latencies: what the incident rules judge windows by (docs/incidents.md).
-- requires: requests_latency
-- The size class is the power of two below the prompt length (the diff's buckets): 1024 holds prompts of 1,024
-- to 2,047 tokens.
-- columns:
--   run_id         run
--   request_id     request
--   client_id      client or file the request came from
--   t_s            arrival, seconds since the run's first counted arrival
--   arrival_s      arrival on the run clock, seconds
--   size_class     prompt tokens rounded down to a power of two (NULL: prompt length unknown)
--   input_tokens   prompt tokens
--   output_tokens  generated tokens
--   ttft_s         time to first token, seconds (requests_latency's)
--   tpot_s         time per output token after the first, seconds
--   e2e_s          end-to-end latency, seconds
--   queue_s        engine queue time, seconds
--   num_preemptions times the engine preempted it
--   slot_s         seconds it held a sequence slot (first scheduled to finished)
CREATE OR REPLACE VIEW incident_arrivals AS
SELECT run_id, request_id, client_id, arrival_s - min(arrival_s) OVER (PARTITION BY run_id) AS t_s, arrival_s,
       CASE WHEN input_tokens > 0 THEN CAST(pow(2, floor(log2(input_tokens))) AS BIGINT) END AS size_class,
       input_tokens, output_tokens, ttft_s, tpot_s, e2e_s, queue_s, num_preemptions,
       finished_s - scheduled_s AS slot_s
FROM requests_latency WHERE counted AND arrival_s IS NOT NULL;

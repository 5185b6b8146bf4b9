-- requests_latency: the latency each request saw, one row per request, from the best source at hand.
-- requires: requests
-- Client measurements win where a client measured (they include network and frontend time); otherwise
-- the engine's own span figures are used. basis says which.
-- columns:
--   run_id      run
--   request_id  request
--   basis       client | server | NULL (no latency known, e.g. an arrival trace)
--   ttft_s      time to first token, seconds
--   e2e_s       end-to-end latency, seconds
--   tpot_s      time per output token after the first, seconds (NULL for one-token outputs)
--   queue_s     engine queue time (span time_in_queue), seconds (NULL without engine data)
CREATE OR REPLACE VIEW requests_latency AS
SELECT run_id, request_id,
       CASE WHEN e2e_s IS NOT NULL OR ttft_s IS NOT NULL THEN 'client'
            WHEN server_e2e_s IS NOT NULL OR server_ttft_s IS NOT NULL THEN 'server' END AS basis,
       coalesce(ttft_s, server_ttft_s) AS ttft_s,
       coalesce(e2e_s, server_e2e_s) AS e2e_s,
       CASE WHEN output_tokens > 1
            THEN (coalesce(e2e_s, server_e2e_s) - coalesce(ttft_s, server_ttft_s)) / (output_tokens - 1)
       END AS tpot_s,
       queue_s
FROM requests
WHERE status IS DISTINCT FROM 'error';

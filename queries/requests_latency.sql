-- requests_latency: each request with the latency it saw, from the best source at hand: the one definition of
-- a request's TTFT, TPOT, end-to-end latency and queue time that every command reads.
-- requires: requests, requests_cached_tokens
-- Client measurements win where a client measured (they include network and frontend time); otherwise the
-- engine's own span figures are used, and the *_basis columns say which. Failed, cancelled, incomplete and
-- warm-up / cool-down requests are kept (their latencies as the sources give them) and flagged: the run's
-- figures read counted requests only.
-- columns:
--   requests.*   every column of requests (lltrace.tables); ttft_s and e2e_s here are the reference time to
--                first token and end-to-end latency, seconds (the client's, else the server's)
--   basis        client | server | NULL: where the request's latencies come from (client if it measured any)
--   ttft_basis   client | server | NULL: where ttft_s comes from
--   e2e_basis    client | server | NULL: where e2e_s comes from
--   tpot_s       time per output token after the first, seconds: (e2e_s - ttft_s) / (output_tokens - 1)
--   failed       true for a request whose status is error
--   outcome      ok | failed | cancelled | incomplete | warmup | cooldown | unjoined: how the request ended, in the
--                terms of the tool that ran it (status error is failed; warm-up and cool-down are the benchmark's
--                own phases, which its statistics leave out: guidellm's measurement window, AIPerf's credit phase);
--                unjoined: a client's record the join could neither pair nor place beside the engine's unpaired
--                records (no send time), which may be the same requests: never counted twice
--   counted      true when the request counts in the run's figures (outcome ok): the latency statistics, the
--                workload mix and the verdict read counted requests only; the others are counted and shown
--   cached_basis measured | derived | NULL: where cached_tokens comes from (the source's figure, else derived
--                from the engine's iteration log: requests_cached_tokens)
CREATE OR REPLACE VIEW requests_latency AS
WITH derived AS (
    -- one derived figure per request id (an id the run holds twice gets none: never a doubled row)
    SELECT run_id, request_id, any_value(cached_tokens) AS derived_cached
    FROM requests_cached_tokens WHERE basis = 'derived' GROUP BY run_id, request_id HAVING count(*) = 1
)
SELECT r.* REPLACE (coalesce(r.ttft_s, r.server_ttft_s) AS ttft_s, coalesce(r.e2e_s, r.server_e2e_s) AS e2e_s,
                    coalesce(r.cached_tokens, d.derived_cached) AS cached_tokens),
       CASE WHEN e2e_s IS NOT NULL OR ttft_s IS NOT NULL THEN 'client'
            WHEN server_e2e_s IS NOT NULL OR server_ttft_s IS NOT NULL THEN 'server' END AS basis,
       CASE WHEN ttft_s IS NOT NULL THEN 'client' WHEN server_ttft_s IS NOT NULL THEN 'server' END AS ttft_basis,
       CASE WHEN e2e_s IS NOT NULL THEN 'client' WHEN server_e2e_s IS NOT NULL THEN 'server' END AS e2e_basis,
       CASE WHEN output_tokens > 1
            THEN (coalesce(e2e_s, server_e2e_s) - coalesce(ttft_s, server_ttft_s)) / (output_tokens - 1)
       END AS tpot_s,
       status IS NOT DISTINCT FROM 'error' AS failed,
       CASE WHEN status = 'error' THEN 'failed'
            WHEN status IN ('cancelled', 'aborted', 'incomplete', 'warmup', 'cooldown', 'unjoined') THEN status
            ELSE 'ok' END
           AS outcome,
       coalesce(status NOT IN ('error', 'cancelled', 'aborted', 'incomplete', 'warmup', 'cooldown', 'unjoined'), true)
           AS counted,
       CASE WHEN r.cached_tokens IS NOT NULL THEN 'measured' WHEN d.derived_cached IS NOT NULL THEN 'derived' END
           AS cached_basis
FROM requests r LEFT JOIN derived d ON r.run_id = d.run_id AND r.request_id = d.request_id;

-- requests_latency: each request with the latency it saw, from the best source at hand: the one definition of
-- a request's TTFT, TPOT, end-to-end latency and queue time that every command reads.
-- requires: requests
-- Client measurements win where a client measured (they include network and frontend time); otherwise the
-- engine's own span figures are used, and the *_basis columns say which. Failed requests are kept (their
-- latencies as the sources give them) and flagged: latency statistics leave them out, traffic counts do not.
-- columns:
--   requests.*   every column of requests (lltrace.tables); ttft_s and e2e_s here are the reference time to
--                first token and end-to-end latency, seconds (the client's, else the server's)
--   basis        client | server | NULL: where the request's latencies come from (client if it measured any)
--   ttft_basis   client | server | NULL: where ttft_s comes from
--   e2e_basis    client | server | NULL: where e2e_s comes from
--   tpot_s       time per output token after the first, seconds: (e2e_s - ttft_s) / (output_tokens - 1)
--   failed       true for a request whose status is error
CREATE OR REPLACE VIEW requests_latency AS
SELECT * REPLACE (coalesce(ttft_s, server_ttft_s) AS ttft_s, coalesce(e2e_s, server_e2e_s) AS e2e_s),
       CASE WHEN e2e_s IS NOT NULL OR ttft_s IS NOT NULL THEN 'client'
            WHEN server_e2e_s IS NOT NULL OR server_ttft_s IS NOT NULL THEN 'server' END AS basis,
       CASE WHEN ttft_s IS NOT NULL THEN 'client' WHEN server_ttft_s IS NOT NULL THEN 'server' END AS ttft_basis,
       CASE WHEN e2e_s IS NOT NULL THEN 'client' WHEN server_e2e_s IS NOT NULL THEN 'server' END AS e2e_basis,
       CASE WHEN output_tokens > 1
            THEN (coalesce(e2e_s, server_e2e_s) - coalesce(ttft_s, server_ttft_s)) / (output_tokens - 1)
       END AS tpot_s,
       status IS NOT DISTINCT FROM 'error' AS failed
FROM requests;

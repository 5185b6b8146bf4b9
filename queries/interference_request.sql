-- interference_request: per request, the decode time it lost to other requests' prefills ("suffered") and
-- the inflation its own prefill caused to others ("caused").
-- requires: interference_steps, requests
-- A request suffers a mixed step's extra_s when the step falls inside its decode interval [first_token_s,
-- last_token_s]; it is charged extra_s x decode_reqs / prefill_reqs when the step falls inside its prefill
-- interval [scheduled_s, first_token_s]. Steps come from the log where a run has both (it covers the whole
-- run). Log step times are known to about a second, so these are estimates.
-- columns:
--   run_id       run
--   request_id   request
--   suffered_s   decode time lost to mixed steps, seconds
--   caused_s     inflation charged to this request's prefill, seconds
--   mixed_steps  mixed steps during its decode
CREATE OR REPLACE VIEW interference_request AS
WITH pick AS (
    SELECT run_id, CASE WHEN bool_or(source = 'log') THEN 'log' ELSE 'profiler' END AS source
    FROM interference_steps GROUP BY run_id
), st AS (
    SELECT i.* FROM interference_steps i JOIN pick USING (run_id, source) WHERE i.start_s IS NOT NULL
), suffered AS (
    SELECT r.run_id, r.request_id, sum(st.extra_s) AS suffered_s, count(*) AS mixed_steps
    FROM requests r JOIN st ON st.run_id = r.run_id
         AND st.start_s >= r.first_token_s AND st.end_s <= r.last_token_s
    GROUP BY r.run_id, r.request_id
), caused AS (
    SELECT r.run_id, r.request_id, sum(st.extra_s * st.decode_reqs / greatest(st.prefill_reqs, 1)) AS caused_s
    FROM requests r JOIN st ON st.run_id = r.run_id
         AND st.end_s > r.scheduled_s AND st.start_s < r.first_token_s
    GROUP BY r.run_id, r.request_id
)
SELECT r.run_id, r.request_id, coalesce(s.suffered_s, 0.0) AS suffered_s, coalesce(c.caused_s, 0.0) AS caused_s,
       coalesce(s.mixed_steps, 0) AS mixed_steps
FROM requests r
LEFT JOIN suffered s ON s.run_id = r.run_id AND s.request_id = r.request_id
LEFT JOIN caused c ON c.run_id = r.run_id AND c.request_id = r.request_id
WHERE r.run_id IN (SELECT run_id FROM pick) AND r.first_token_s IS NOT NULL;

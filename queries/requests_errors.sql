-- requests_errors: why the requests the run's figures leave out ended as they did, as the sources say it: one row
-- per outcome and cause (the HTTP status where a source gives one, else the error text)
-- requires: requests_latency
-- Requests whose source states no cause are not here (requests_latency counts every outcome); a group keyed by a
-- status holds every text that came with it, the commonest shown.
-- columns:
--   run_id           the run
--   outcome          failed | cancelled | aborted | incomplete | ...: requests_latency.outcome
--   error_code       the HTTP status (or the client's own code) the requests failed with; NULL where the source
--                    gives text only
--   error            the error text: the group's own where it has no status, else the commonest with it (NULL
--                    where the source gives the status alone)
--   texts            distinct error texts in the group
--   requests         requests in the group
--   first_arrival_s  when the group's first request arrived, seconds after the run's first arrival (NULL where the
--                    sources place no arrival)
--   last_arrival_s   when its last request arrived, seconds after the run's first arrival
CREATE OR REPLACE VIEW requests_errors AS
WITH start AS (SELECT run_id, min(arrival_s) AS t0 FROM requests_latency GROUP BY run_id)
SELECT r.run_id, outcome, error_code,
       mode(error) AS error,
       count(DISTINCT error) AS texts,
       count(*) AS requests,
       min(arrival_s) - any_value(s.t0) AS first_arrival_s,
       max(arrival_s) - any_value(s.t0) AS last_arrival_s
FROM requests_latency r JOIN start s ON r.run_id = s.run_id
WHERE NOT counted AND (error_code IS NOT NULL OR error IS NOT NULL)
GROUP BY r.run_id, outcome, error_code, CASE WHEN error_code IS NULL THEN error END;

-- interference_run: the decode time a run's requests lost to other requests' prefill in shared steps, in all.
-- requires: interference_request, interference_steps
-- columns:
--   run_id       run
--   suffered_s   decode time lost, summed over the requests, seconds (estimated: interference_request)
--   caused_s     the same time charged to the prefilling requests that caused it, seconds
--   mixed_steps  steps that carried prefill and decode work (interference_steps)
CREATE OR REPLACE VIEW interference_run AS
WITH steps AS (SELECT run_id, count(*) AS mixed_steps FROM interference_steps GROUP BY run_id),
charged AS (
    SELECT run_id, sum(suffered_s) AS suffered_s, sum(caused_s) AS caused_s FROM interference_request GROUP BY run_id
)
SELECT coalesce(s.run_id, c.run_id) AS run_id, c.suffered_s, c.caused_s, coalesce(s.mixed_steps, 0) AS mixed_steps
FROM steps s FULL JOIN charged c ON s.run_id = c.run_id;

-- incident_requests: incident_arrivals with what explains a request's latency: its queue split, its preempted time
-- and the interference it suffered and caused (docs/incidents.md). Read for an incident's own requests only.
-- requires: incident_arrivals, attribution_parts, interference_request
-- The queue split and the interference are NULL where the run's sources cannot tell them (a request id given twice
-- gets neither: its rows cannot be told apart).
-- columns:
--   incident_arrivals.*  every column of incident_arrivals
--   slot_wait_s    queue time waiting for a sequence slot, seconds
--   budget_wait_s  queue time waiting for the token budget, seconds
--   kv_wait_s      queue time waiting for KV room, seconds
--   preempted_s    preempted until rescheduled, seconds
--   suffered_s     decode time it lost to other requests' prefills (interference), seconds
--   caused_s       extra step time its prefill caused the requests decoding beside them, seconds
CREATE OR REPLACE VIEW incident_requests AS
WITH parts AS (
    SELECT run_id, request_id, any_value(slot_wait_s) AS slot_wait_s, any_value(budget_wait_s) AS budget_wait_s,
           any_value(kv_wait_s) AS kv_wait_s, any_value(preempted_s) AS preempted_s
    FROM attribution_parts WHERE request_id IS NOT NULL GROUP BY run_id, request_id HAVING count(*) = 1
), inter AS (
    SELECT run_id, request_id, any_value(suffered_s) AS suffered_s, any_value(caused_s) AS caused_s
    FROM interference_request WHERE request_id IS NOT NULL GROUP BY run_id, request_id HAVING count(*) = 1
)
SELECT r.*, p.slot_wait_s, p.budget_wait_s, p.kv_wait_s, p.preempted_s, i.suffered_s, i.caused_s
FROM incident_arrivals r
LEFT JOIN parts p ON p.run_id = r.run_id AND p.request_id = r.request_id
LEFT JOIN inter i ON i.run_id = r.run_id AND i.request_id = r.request_id;

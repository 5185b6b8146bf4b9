-- request_preemptions: each time a request was preempted, until the engine scheduled it again (the one
-- pairing of preemptions with reschedulings: the ingest sums it into requests.preempted_s, the Perfetto
-- export draws it).
-- requires: request_events
-- A preempted event pairs with the request's next event among preempted and scheduled when that is a
-- scheduled one (a second preemption before any rescheduling supersedes the first); a preemption never
-- followed by a rescheduling (still preempted when the trace ends) has resumed_s and duration_s NULL.
-- columns:
--   run_id               run
--   request_id           request
--   preempted_at_s       the preemption, run clock seconds
--   resumed_at_s         the rescheduling, run clock seconds (NULL when none followed)
--   duration_s           resumed_at_s - preempted_at_s, seconds
--   before_first_token   true when the preemption came before the request's first token (inside its prefill)
CREATE OR REPLACE VIEW request_preemptions AS
WITH e AS (
    SELECT run_id, request_id, ts_s, event,
           lead(event) OVER w AS next_event, lead(ts_s) OVER w AS next_ts
    FROM request_events
    WHERE event IN ('preempted', 'scheduled')
    WINDOW w AS (PARTITION BY run_id, request_id ORDER BY ts_s)
), first_token AS (
    SELECT run_id, request_id, min(ts_s) AS first_token_s FROM request_events WHERE event = 'first_token'
    GROUP BY run_id, request_id
)
SELECT e.run_id, e.request_id, e.ts_s AS preempted_at_s,
       CASE WHEN e.next_event = 'scheduled' THEN e.next_ts END AS resumed_at_s,
       CASE WHEN e.next_event = 'scheduled' THEN e.next_ts - e.ts_s END AS duration_s,
       f.first_token_s IS NULL OR e.ts_s < f.first_token_s AS before_first_token
FROM e LEFT JOIN first_token f USING (run_id, request_id)
WHERE e.event = 'preempted' AND e.next_event IS DISTINCT FROM 'preempted';

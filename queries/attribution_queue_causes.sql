-- attribution_queue_causes: each request's queue time split by what the engine was out of while it waited: KV
-- room, a sequence slot, the token budget; the rest is load (waiting behind other work with none of those
-- binding, or no source to tell).
-- requires: requests, engine_state
-- A request's queue interval is [queued_s, scheduled_s]; each part is the time of it spent in engine_state
-- segments of that cause (disjoint: one cause per segment, in the order kv, slot, budget). Computed with a
-- cumulative clock per cause and two ASOF joins, so a million requests against a long step log stays linear.
-- A part is NULL for a run whose sources cannot tell it (no KV usage, counts or limits: see engine_state).
-- A run of several engines' timelines (data-parallel engines, replicas) has no request that says which engine held
-- it: there a moment has a cause where every timeline has that cause then (whichever engine held the request, it
-- was out of that), none where no timeline has one, and is mixed where they differ (in the load part, counted
-- apart in mixed_wait_s).
-- columns:
--   run_id         run
--   request_id     request
--   queue_s        the request's queue time, seconds
--   kv_wait_s      queue time while the head of the queue had no KV room, seconds
--   slot_wait_s    queue time while every sequence slot was taken (KV room to spare), seconds
--   budget_wait_s  queue time while steps used the whole token budget (slots and KV room to spare), seconds
--   load_wait_s    the rest of the queue time, seconds (it holds any part the sources cannot tell)
--   mixed_wait_s   of load_wait_s, the time while several engines' timelines had different causes, seconds
CREATE OR REPLACE VIEW attribution_queue_causes AS
WITH state AS MATERIALIZED (
    SELECT run_id, coalesce(instance, '') || '/' || engine AS timeline, start_s, end_s, cause, kv_out, slots_full,
           budget_full
    FROM engine_state
), known AS (
    SELECT run_id, bool_or(kv_out IS NOT NULL) AS kv, bool_or(slots_full IS NOT NULL) AS slot,
           bool_or(budget_full IS NOT NULL) AS budget, count(DISTINCT timeline) AS timelines
    FROM state GROUP BY run_id
), single AS (
    SELECT s.run_id, s.start_s, s.end_s, s.cause FROM state s JOIN known k USING (run_id)
    WHERE k.timelines = 1 AND s.end_s IS NOT NULL
), edges AS (
    -- several timelines: every moment one of them changes, each timeline's segment then
    SELECT DISTINCT s.run_id, s.start_s AS t FROM state s JOIN known k USING (run_id) WHERE k.timelines > 1
), grid AS (
    SELECT e.run_id, e.t, l.timeline FROM edges e JOIN (SELECT DISTINCT run_id, timeline FROM state) l USING (run_id)
), held AS (
    SELECT g.run_id, g.t, g.timeline, CASE WHEN g.t < s.end_s THEN coalesce(s.cause, 'none') END AS cause
    FROM grid g ASOF LEFT JOIN state s ON g.run_id = s.run_id AND g.timeline = s.timeline AND g.t >= s.start_s
), agreed AS (
    SELECT run_id, t AS start_s, lead(t) OVER (PARTITION BY run_id ORDER BY t) AS end_s,
           CASE WHEN count(cause) < count(*) THEN NULL  -- a timeline with no segment here: nothing to tell
                WHEN count(DISTINCT cause) > 1 THEN 'mixed'
                WHEN any_value(cause) <> 'none' THEN any_value(cause) END AS cause
    FROM held GROUP BY run_id, t
), merged AS (
    SELECT * FROM single UNION ALL SELECT * FROM agreed WHERE end_s IS NOT NULL
), clock AS (
    -- time of each cause accumulated before a segment's start
    SELECT run_id, start_s, end_s, cause,
           coalesce(sum(CASE WHEN cause = 'kv' THEN end_s - start_s END) OVER w, 0) AS kv0,
           coalesce(sum(CASE WHEN cause = 'slot' THEN end_s - start_s END) OVER w, 0) AS slot0,
           coalesce(sum(CASE WHEN cause = 'budget' THEN end_s - start_s END) OVER w, 0) AS budget0,
           coalesce(sum(CASE WHEN cause = 'mixed' THEN end_s - start_s END) OVER w, 0) AS mixed0
    FROM merged
    WINDOW w AS (PARTITION BY run_id ORDER BY start_s ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
), q AS (
    SELECT run_id, request_id, queued_s, scheduled_s, scheduled_s - queued_s AS queue_s
    FROM requests WHERE queued_s IS NOT NULL AND scheduled_s IS NOT NULL
), at_queued AS (
    SELECT q.*,
           coalesce(c.kv0 + CASE WHEN c.cause = 'kv' THEN least(q.queued_s, c.end_s) - c.start_s ELSE 0 END, 0) AS kv_q,
           coalesce(c.slot0 + CASE WHEN c.cause = 'slot' THEN least(q.queued_s, c.end_s) - c.start_s ELSE 0 END, 0)
               AS slot_q,
           coalesce(c.budget0 + CASE WHEN c.cause = 'budget' THEN least(q.queued_s, c.end_s) - c.start_s ELSE 0 END,
                    0) AS budget_q,
           coalesce(c.mixed0 + CASE WHEN c.cause = 'mixed' THEN least(q.queued_s, c.end_s) - c.start_s ELSE 0 END, 0)
               AS mixed_q
    FROM q ASOF LEFT JOIN clock c ON q.run_id = c.run_id AND q.queued_s >= c.start_s
), at_scheduled AS (
    SELECT a.*,
           coalesce(c.kv0 + CASE WHEN c.cause = 'kv' THEN least(a.scheduled_s, c.end_s) - c.start_s ELSE 0 END, 0)
               AS kv_s,
           coalesce(c.slot0 + CASE WHEN c.cause = 'slot' THEN least(a.scheduled_s, c.end_s) - c.start_s ELSE 0 END, 0)
               AS slot_s,
           coalesce(c.budget0 + CASE WHEN c.cause = 'budget' THEN least(a.scheduled_s, c.end_s) - c.start_s ELSE 0
                                     END, 0) AS budget_s,
           coalesce(c.mixed0 + CASE WHEN c.cause = 'mixed' THEN least(a.scheduled_s, c.end_s) - c.start_s ELSE 0 END,
                    0) AS mixed_s
    FROM at_queued a ASOF LEFT JOIN clock c ON a.run_id = c.run_id AND a.scheduled_s >= c.start_s
), parts AS (
    SELECT s.run_id, s.request_id, s.queue_s,
           CASE WHEN k.kv THEN least(s.queue_s, greatest(0.0, s.kv_s - s.kv_q)) END AS kv_wait_s,
           CASE WHEN k.slot THEN least(s.queue_s, greatest(0.0, s.slot_s - s.slot_q)) END AS slot_wait_s,
           CASE WHEN k.budget THEN least(s.queue_s, greatest(0.0, s.budget_s - s.budget_q)) END AS budget_wait_s,
           CASE WHEN k.timelines > 1 THEN least(s.queue_s, greatest(0.0, s.mixed_s - s.mixed_q)) END AS mixed_wait_s
    FROM at_scheduled s LEFT JOIN known k USING (run_id)
)
SELECT run_id, request_id, queue_s, kv_wait_s, slot_wait_s, budget_wait_s,
       greatest(0.0, queue_s - coalesce(kv_wait_s, 0) - coalesce(slot_wait_s, 0) - coalesce(budget_wait_s, 0))
           AS load_wait_s,
       mixed_wait_s
FROM parts;

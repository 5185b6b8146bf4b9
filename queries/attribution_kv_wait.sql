-- attribution_kv_wait: the part of each request's queue time spent while the engine was out of KV-cache room:
-- requests waiting for capacity where the engine says so (vLLM num_requests_waiting_by_reason{reason=
-- "capacity"} > 0); where it does not, requests waiting while KV usage is at least threshold_kv_full_usage()
-- (vLLM V0 Pending, SGLang #queue-req with token usage near 1), or requests paused / swapped out for room
-- (TensorRT-LLM numPausedRequests, vLLM V0 Swapped).
-- requires: requests, engine_stats
-- Samples are a step function: each holds until the next one of the run (scrapes every few seconds, so
-- this is derived at that resolution). A request's queue interval is [queued_s, scheduled_s]; its KV wait
-- is C(scheduled_s) - C(queued_s), where C(t) is the capacity-waiting time accumulated up to t (two ASOF
-- joins, so a million requests against thousands of samples stays linear).
-- columns:
--   run_id       run
--   request_id   request
--   queue_s      the request's queue time, seconds
--   kv_wait_s    queue time overlapping samples with requests waiting for capacity, seconds (<= queue_s)
CREATE OR REPLACE VIEW attribution_kv_wait AS
WITH _reason AS (
    -- a run whose engine states the capacity reason is read from those samples only: another source's
    -- usage-based guess between them would contradict the engine's own count
    SELECT run_id, bool_or(waiting_capacity IS NOT NULL) AS stated FROM engine_stats GROUP BY run_id
), samples AS (
    SELECT e.run_id, e.ts_s AS s, lead(e.ts_s) OVER (PARTITION BY e.run_id ORDER BY e.ts_s) AS e,
           CASE WHEN r.stated THEN e.waiting_capacity > 0
                ELSE coalesce(e.kv_usage >= threshold_kv_full_usage() AND e.waiting > 0, false) OR coalesce(e.swapped > 0, false) END AS cap
    FROM engine_stats e JOIN _reason r USING (run_id)
    WHERE e.ts_s IS NOT NULL
      AND CASE WHEN r.stated THEN e.waiting_capacity IS NOT NULL ELSE e.kv_usage IS NOT NULL OR e.swapped IS NOT NULL END
), _capacity_clock AS (
    -- c0: capacity-waiting time accumulated before sample s, so that C(t) = c0 + (t - s) inside a waiting span
    SELECT run_id, s, e, cap,
           coalesce(sum(CASE WHEN cap AND e IS NOT NULL THEN e - s ELSE 0 END)
                    OVER (PARTITION BY run_id ORDER BY s ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS c0
    FROM samples
), q AS (
    SELECT run_id, request_id, queued_s, scheduled_s, scheduled_s - queued_s AS queue_s
    FROM requests WHERE queued_s IS NOT NULL AND scheduled_s IS NOT NULL
), at_queued AS (
    SELECT q.*, coalesce(c.c0 + CASE WHEN c.cap AND c.e IS NOT NULL THEN least(q.queued_s, c.e) - c.s ELSE 0 END, 0)
                AS c_queued
    FROM q ASOF LEFT JOIN _capacity_clock c ON q.run_id = c.run_id AND q.queued_s >= c.s
), at_scheduled AS (
    SELECT a.*, coalesce(c.c0 + CASE WHEN c.cap AND c.e IS NOT NULL THEN least(a.scheduled_s, c.e) - c.s ELSE 0 END,
                         0) AS c_scheduled
    FROM at_queued a ASOF LEFT JOIN _capacity_clock c ON a.run_id = c.run_id AND a.scheduled_s >= c.s
)
SELECT run_id, request_id, queue_s, least(queue_s, greatest(0.0, c_scheduled - c_queued)) AS kv_wait_s
FROM at_scheduled;

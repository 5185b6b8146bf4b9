-- attribution_kv_wait: the part of each request's queue time spent while the engine reported requests
-- waiting for KV-cache capacity (vLLM num_requests_waiting_by_reason{reason="capacity"} > 0).
-- requires: requests, engine_stats
-- Samples are a step function: each holds until the next one of the run (scrapes every few seconds, so
-- this is derived at that resolution). A request's queue interval is [queued_s, scheduled_s].
-- columns:
--   run_id       run
--   request_id   request
--   queue_s      the request's queue time, seconds
--   kv_wait_s    queue time overlapping samples with requests waiting for capacity, seconds (<= queue_s)
CREATE OR REPLACE VIEW attribution_kv_wait AS
WITH samples AS (
    SELECT run_id, ts_s AS s, lead(ts_s) OVER (PARTITION BY run_id ORDER BY ts_s) AS e, waiting_capacity
    FROM engine_stats
    WHERE ts_s IS NOT NULL AND waiting_capacity IS NOT NULL
), capacity AS (
    SELECT run_id, s, e FROM samples WHERE waiting_capacity > 0 AND e IS NOT NULL
), q AS (
    SELECT run_id, request_id, queued_s, scheduled_s, scheduled_s - queued_s AS queue_s
    FROM requests WHERE queued_s IS NOT NULL AND scheduled_s IS NOT NULL
)
SELECT q.run_id, q.request_id, q.queue_s,
       least(q.queue_s, coalesce(sum(greatest(0.0, least(q.scheduled_s, c.e) - greatest(q.queued_s, c.s))), 0.0))
           AS kv_wait_s
FROM q LEFT JOIN capacity c ON c.run_id = q.run_id AND c.s < q.scheduled_s AND c.e > q.queued_s
GROUP BY q.run_id, q.request_id, q.queue_s;

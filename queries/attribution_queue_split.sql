-- attribution_queue_split: a run's queue time split by what the engine was out of, summed over its attributed
-- requests (each request's own split: attribution_queue_causes).
-- requires: attribution_request, attribution_queue_causes
-- An id the run holds twice is joined to neither: its queue is left to load, never counted twice.
-- columns:
--   run_id          run
--   kv_wait_s       queue time with no KV room for the queue head, seconds
--   slot_wait_s     queue time with every sequence slot taken, seconds
--   budget_wait_s   queue time with the step's token budget used, seconds
--   requests_split  attributed requests whose queue was placed on the engine's state
--   unplaced_s      queue time of the attributed requests with no engine queue interval to place, seconds
--   mixed_wait_s    queue time while several engines' states differed (no source says which held it), seconds
CREATE OR REPLACE VIEW attribution_queue_split AS
WITH a AS (
    SELECT run_id, request_id, sum(queue_s) AS queue_s, count(*) AS n FROM attribution_request
    WHERE e2e_s IS NOT NULL AND queue_s IS NOT NULL AND prefill_s IS NOT NULL AND decode_s IS NOT NULL
    GROUP BY run_id, request_id
), c AS (
    SELECT run_id, request_id, sum(kv_wait_s) AS kv, sum(slot_wait_s) AS slot, sum(budget_wait_s) AS budget,
           sum(mixed_wait_s) AS mixed
    FROM attribution_queue_causes WHERE request_id IS NOT NULL
    GROUP BY run_id, request_id HAVING count(*) = 1
)
SELECT a.run_id, sum(c.kv) AS kv_wait_s, sum(c.slot) AS slot_wait_s, sum(c.budget) AS budget_wait_s,
       count(c.request_id) AS requests_split, sum(a.queue_s) FILTER (WHERE c.request_id IS NULL) AS unplaced_s,
       sum(c.mixed) AS mixed_wait_s
FROM a LEFT JOIN c
    ON a.run_id = c.run_id AND a.request_id = c.request_id AND a.n = 1 AND a.request_id IS NOT NULL
GROUP BY a.run_id;

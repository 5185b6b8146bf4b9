-- engine_queue_causes: the queue's time split by what the engine was out of, from the engine's samples alone
-- (what a Prometheus export says about why requests waited, without any request file): per run, the
-- waiting requests' time in engine_state segments of each cause.
-- requires: engine_state
-- Each segment of a timeline of samples holds the waiting gauge of its first sample until the next sample (a
-- sum over the samples: an estimate, as fine as the scrape interval), times its length, by the segment's
-- cause (kv, slot, budget: engine_state's rule). Summed over replicas. A part is NULL where the samples cannot
-- tell it: no KV usage or preemption counter for kv, no known max_num_seqs for slot; samples never tell the
-- token budget. By Little's law waiting_request_s is the queue time of the requests that waited in the span,
-- what the queue-time histogram's sum counts (less those still waiting at the ends).
-- columns:
--   run_id             run
--   replicas           replicas (timelines) with samples
--   samples            sample segments with a waiting count and a length
--   waiting_request_s  requests waiting x time, summed over the segments (request-seconds)
--   kv_wait_s          of it, while the queue head had no KV room
--   slot_wait_s        of it, while every sequence slot was taken (KV room to spare)
--   budget_wait_s      of it, while the token budget bound (NULL: samples do not tell)
--   load_wait_s        the rest: none of those binding, or no source to tell
--   kv_share           kv_wait_s / waiting_request_s
--   slot_share         slot_wait_s / waiting_request_s
CREATE OR REPLACE VIEW engine_queue_causes AS
WITH seg AS (
    SELECT run_id, instance, cause, kv_out, slots_full, waiting * (end_s - start_s) AS w
    FROM engine_state WHERE basis = 'samples' AND end_s IS NOT NULL AND waiting IS NOT NULL
), parts AS (
    SELECT run_id, count(DISTINCT coalesce(instance, '')) AS replicas, count(*) AS samples, sum(w) AS total,
           CASE WHEN bool_or(kv_out IS NOT NULL) THEN coalesce(sum(w) FILTER (WHERE cause = 'kv'), 0) END AS kv,
           CASE WHEN bool_or(slots_full IS NOT NULL) THEN coalesce(sum(w) FILTER (WHERE cause = 'slot'), 0) END
               AS slot
    FROM seg GROUP BY run_id
)
SELECT run_id, replicas, samples, total AS waiting_request_s, kv AS kv_wait_s, slot AS slot_wait_s,
       CAST(NULL AS DOUBLE) AS budget_wait_s, total - coalesce(kv, 0) - coalesce(slot, 0) AS load_wait_s,
       kv / nullif(total, 0) AS kv_share, slot / nullif(total, 0) AS slot_share
FROM parts;

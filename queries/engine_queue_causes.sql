-- engine_queue_causes: the queue's time split by what the engine was out of, from the engine's own timeline alone
-- (what a Prometheus export or a server log says about why requests waited, without any request file): per run,
-- the waiting requests' time in engine_state segments of each cause.
-- requires: engine_state
-- Each segment (a logged step, else the span from one sample to the next) holds the waiting gauge of the latest
-- sample at its start (a sum over the segments: an estimate, as fine as the samples), times its length, by the
-- segment's cause (kv, slot, budget: engine_state's rule, per step where the log has every step). Summed over
-- the timelines (replicas, data-parallel engines: each queues its own requests). A part is NULL where the
-- timeline cannot tell it: no KV usage or preemption counter for kv, no known max_num_seqs for slot; samples
-- never tell the token budget (a step log does). By Little's law waiting_request_s is the queue time of the
-- requests that waited in the span, what the queue-time histogram's sum counts (less those still waiting at the
-- ends).
-- columns:
--   run_id             run
--   replicas           timelines with samples (replicas, and data-parallel engines within one)
--   samples            segments (steps or sample spans) with a waiting count and a length
--   basis              steps | samples: what the segments are (engine_state.basis)
--   waiting_request_s  requests waiting x time, summed over the segments (request-seconds)
--   kv_wait_s          of it, while the queue head had no KV room
--   slot_wait_s        of it, while every sequence slot was taken (KV room to spare)
--   budget_wait_s      of it, while the token budget bound (slots and KV room to spare; NULL: samples do not tell)
--   load_wait_s        the rest: none of those binding, or no source to tell
--   kv_share           kv_wait_s / waiting_request_s
--   slot_share         slot_wait_s / waiting_request_s
--   budget_share       budget_wait_s / waiting_request_s
--   running_request_s  requests running x time over the same segments (request-seconds; NULL: not counted)
--   queue_share        waiting_request_s / (waiting_request_s + running_request_s): by Little's law the queue's
--                      share of the requests' summed time in the engine (an estimate, as fine as the samples)
CREATE OR REPLACE VIEW engine_queue_causes AS
WITH seg AS (
    SELECT run_id, coalesce(instance, '') || '/' || engine AS timeline, basis, cause, kv_out, slots_full, budget_full,
           waiting * (end_s - start_s) AS w, scheduled_reqs * (end_s - start_s) AS r
    FROM engine_state WHERE end_s IS NOT NULL AND waiting IS NOT NULL
), parts AS (
    SELECT run_id, count(DISTINCT timeline) AS replicas, count(*) AS samples,
           string_agg(DISTINCT basis, ' and ' ORDER BY basis) AS basis, sum(w) AS total,
           CASE WHEN count(r) = count(*) THEN sum(r) END AS running,
           CASE WHEN bool_or(kv_out IS NOT NULL) THEN coalesce(sum(w) FILTER (WHERE cause = 'kv'), 0) END AS kv,
           CASE WHEN bool_or(slots_full IS NOT NULL) THEN coalesce(sum(w) FILTER (WHERE cause = 'slot'), 0) END
               AS slot,
           CASE WHEN bool_or(budget_full IS NOT NULL) THEN coalesce(sum(w) FILTER (WHERE cause = 'budget'), 0) END
               AS budget
    FROM seg GROUP BY run_id
)
SELECT run_id, replicas, samples, basis, total AS waiting_request_s, kv AS kv_wait_s, slot AS slot_wait_s,
       budget AS budget_wait_s, total - coalesce(kv, 0) - coalesce(slot, 0) - coalesce(budget, 0) AS load_wait_s,
       kv / nullif(total, 0) AS kv_share, slot / nullif(total, 0) AS slot_share,
       budget / nullif(total, 0) AS budget_share, running AS running_request_s,
       total / nullif(total + running, 0) AS queue_share
FROM parts;

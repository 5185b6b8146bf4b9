-- incident_step_speed: how fast the engine itself ran inside a stretch of the run against outside it, at equal
-- composition (a table macro: incident_step_speed(from_s, to_s), run clock seconds): decode-only steps' median
-- time inside over outside at the same number of requests decoding, averaged (geometrically) over the batch
-- sizes both sides have, weighted by the inside steps (docs/incidents.md).
-- requires: engine_steps
-- An engine that slowed at the same batch points at the host (other work on it, throttling), not the workload.
-- Steps as incident_engine reads them (the iteration log where the run has one, else the profiler's).
-- columns:
--   run_id           run
--   step_time_ratio  inside over outside (NULL: no batch size with decode-only steps on both sides)
--   batch_sizes      batch sizes compared
--   steps_inside     decode-only steps inside at those sizes
CREATE OR REPLACE MACRO incident_step_speed(from_s, to_s) AS TABLE
WITH pick AS (
    SELECT run_id, CASE WHEN bool_or(source = 'log') THEN 'log' ELSE 'profiler' END AS source
    FROM engine_steps WHERE start_s IS NOT NULL GROUP BY run_id
), d AS (
    SELECT s.run_id, s.start_s >= from_s AND s.start_s < to_s AS inside, s.decode_reqs,
           median(s.wall_s) AS wall_s, count(*) AS n
    FROM engine_steps s JOIN pick USING (run_id, source)
    WHERE s.start_s IS NOT NULL AND s.prefill_tokens = 0 AND s.decode_reqs > 0 AND s.wall_s > 0
    GROUP BY ALL
)
SELECT i.run_id, exp(sum(ln(i.wall_s / o.wall_s) * i.n) / sum(i.n)) AS step_time_ratio,
       count(*) AS batch_sizes, sum(i.n) AS steps_inside
FROM d i JOIN d o ON i.run_id = o.run_id AND i.decode_reqs = o.decode_reqs AND i.inside AND NOT o.inside
GROUP BY i.run_id;

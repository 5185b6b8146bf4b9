-- interference_steps: how much longer each mixed step (prefill tokens sharing the batch) took than a
-- decode-only step of the same size, fitted on the same run and step source.
-- requires: engine_steps
-- The fit is least squares of decode-only step time on decode tokens (wall = a + b x tokens), per run and
-- source; extra_s is the mixed step's time minus that prediction: what every decoding request in it waited
-- because prefill work shared the step. Raw, not clipped (a negative value is noise around the fit). The fit
-- needs 10 decode-only steps of at least two sizes: steps all of one size give no slope, and so no
-- prediction for a mixed step of another size (a source with no such fit has no rows here). The 10 is
-- threshold_interference_fit_steps().
-- columns:
--   run_id              run
--   source              profiler | log
--   step_id             step
--   start_s             step start on the run clock, seconds (estimated for log steps)
--   end_s               step end, seconds
--   prefill_reqs        requests prefilling in the step
--   prefill_tokens      prefill tokens in the step
--   decode_reqs         requests decoding in the step
--   wall_s              step time, seconds
--   predicted_decode_s  fitted time of a decode-only step with as many decode tokens, seconds
--   extra_s             wall_s - predicted_decode_s, seconds
--   fit_steps           decode-only steps the fit rests on
CREATE OR REPLACE VIEW interference_steps AS
WITH fit AS (
    SELECT run_id, source, regr_intercept(wall_s, decode_tokens) AS a, regr_slope(wall_s, decode_tokens) AS b,
           count(*) AS n
    FROM engine_steps
    WHERE kind = 'decode' AND wall_s IS NOT NULL AND decode_tokens IS NOT NULL
    GROUP BY run_id, source
    HAVING count(*) >= threshold_interference_fit_steps() AND count(DISTINCT decode_tokens) >= 2
)
SELECT s.run_id, s.source, s.step_id, s.start_s, s.end_s, s.prefill_reqs, s.prefill_tokens, s.decode_reqs,
       s.wall_s, f.a + f.b * s.decode_tokens AS predicted_decode_s,
       s.wall_s - (f.a + f.b * s.decode_tokens) AS extra_s, f.n AS fit_steps
FROM engine_steps s JOIN fit f USING (run_id, source)
WHERE s.kind = 'mixed' AND s.wall_s IS NOT NULL AND s.decode_tokens IS NOT NULL AND s.decode_reqs > 0;

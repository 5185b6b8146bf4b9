-- engine_state_causes: how many segments of a run's engine timeline each cause held (what the queue split's
-- evidence counts).
-- requires: engine_state
-- columns:
--   run_id    run
--   cause     kv, slot, budget, or NULL (none binding, or no source to tell)
--   segments  timeline segments with that cause
--   basis     steps | samples: what the segments are
CREATE OR REPLACE VIEW engine_state_causes AS
SELECT run_id, cause, count(*) AS segments, any_value(basis) AS basis FROM engine_state GROUP BY run_id, cause;

-- engine_steps_counts: a run's engine steps by source and kind (a step of no kind: kind NULL).
-- requires: engine_steps
-- columns:
--   run_id  run
--   source  profiler or log
--   kind    prefill, decode, mixed, idle, or NULL (the evidence did not tell)
--   steps   how many
CREATE OR REPLACE VIEW engine_steps_counts AS
SELECT run_id, source, kind, count(*) AS steps FROM engine_steps GROUP BY run_id, source, kind;

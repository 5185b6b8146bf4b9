-- requests_outcomes: the requests a run's figures leave out, by outcome (failed, cancelled, warm-up, ...).
-- requires: requests_latency
-- columns:
--   run_id    run
--   outcome   why they are left out (requests_latency.outcome)
--   requests  how many
CREATE OR REPLACE VIEW requests_outcomes AS
SELECT run_id, outcome, count(*) AS requests FROM requests_latency WHERE NOT counted GROUP BY run_id, outcome;

-- requests_cached_count: how many of a run's requests have a prefix-cached token count, and where it comes from.
-- requires: requests_cached_tokens
-- columns:
--   run_id    run
--   requests  requests with a cached-token figure
--   bases     their bases, in words (measured, derived, or both: "derived and measured")
CREATE OR REPLACE VIEW requests_cached_count AS
SELECT run_id, count(*) AS requests, string_agg(DISTINCT basis, ' and ' ORDER BY basis) AS bases
FROM requests_cached_tokens GROUP BY run_id;

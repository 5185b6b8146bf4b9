-- requests_cached_tokens: prompt tokens each request took from the engine's prefix cache.
-- requires: requests, engine_steps, engine_stats, engine_config
-- measured: the source's own per-request figure (requests.cached_tokens: SGLang, benchmark clients that report
-- it). derived: vLLM's Iteration(k) lines, which count the context (prompt) tokens each step computed. The
-- scheduler admits requests first come, first served, so the k-th context request of the log is the k-th request
-- the engine scheduled; a step with one context request computed that request's uncached prompt: its cached
-- tokens are its prompt tokens less the step's context tokens.
-- The pairing is used only where it is provable from the run itself: the log starts at iteration 0, its context
-- requests add up to the run's scheduled requests (every prompt computed in one step: no chunk spread over
-- steps, no recompute after a preemption, none preempted), and every derived figure is a whole number of KV
-- blocks no larger than input_tokens - 1 (vLLM caches only full blocks, and always computes a prompt's last
-- token). Otherwise no request gets a derived figure. A step with two context requests computed both prompts
-- together: their cached tokens are derived where exactly one split of the step's total into whole blocks fits
-- both prompts (none fitting disproves the pairing); more than two, or a split that is not unique, stay NULL.
-- columns:
--   run_id          run
--   request_id      request
--   input_tokens    prompt tokens
--   cached_tokens   prompt tokens served from the prefix cache, tokens
--   basis           measured | derived
--   step_id         derived: the logged step that computed the request's uncached prompt (NULL where measured)
CREATE OR REPLACE VIEW requests_cached_tokens AS
WITH log AS (
    SELECT run_id, step_id, prefill_reqs, prefill_tokens
    FROM engine_steps WHERE source = 'log' AND detection = 'vllm iteration log'
), complete AS (
    SELECT run_id FROM log GROUP BY run_id HAVING min(step_id) = 0
), occurrences AS (
    SELECT run_id, step_id, prefill_reqs, prefill_tokens,
           sum(prefill_reqs) OVER (PARTITION BY run_id ORDER BY step_id ROWS UNBOUNDED PRECEDING) AS upto
    FROM log WHERE prefill_reqs > 0 AND run_id IN (SELECT run_id FROM complete)
), scheduled AS (
    SELECT run_id, request_id, input_tokens, num_preemptions,
           row_number() OVER (PARTITION BY run_id ORDER BY scheduled_s, queued_s, request_id) AS k,
           count(*) OVER (PARTITION BY run_id) AS n
    FROM requests WHERE scheduled_s IS NOT NULL AND run_id IN (SELECT run_id FROM complete)
), blocks AS (
    SELECT run_id, CAST(max(value) FILTER (WHERE setting = 'block_size') AS BIGINT) AS block_size
    FROM engine_config GROUP BY run_id
), single AS (
    SELECT s.run_id, s.request_id, s.input_tokens, s.input_tokens - o.prefill_tokens AS cached_tokens, o.step_id
    FROM scheduled s JOIN occurrences o ON s.run_id = o.run_id AND s.k = o.upto AND o.prefill_reqs = 1
), pairs AS (
    SELECT o.run_id, o.step_id, a.request_id AS r1, a.input_tokens AS p1, b.request_id AS r2, b.input_tokens AS p2,
           a.input_tokens + b.input_tokens - o.prefill_tokens AS total, k.block_size
    FROM occurrences o
    JOIN scheduled a ON a.run_id = o.run_id AND a.k = o.upto - 1
    JOIN scheduled b ON b.run_id = o.run_id AND b.k = o.upto
    JOIN blocks k ON k.run_id = o.run_id
    WHERE o.prefill_reqs = 2 AND k.block_size > 0 AND a.input_tokens IS NOT NULL AND b.input_tokens IS NOT NULL
), splits AS (
    -- every split of the pair's cached total into whole blocks that fits both prompts
    SELECT run_id, step_id, r1, p1, r2, p2, c1, total - c1 AS c2
    FROM (SELECT *, unnest(range(0, greatest(p1, 1), block_size)) AS c1 FROM pairs)
    WHERE c1 <= p1 - 1 AND total - c1 BETWEEN 0 AND p2 - 1 AND (total - c1) % block_size = 0
), split_count AS (
    SELECT p.run_id, p.step_id, count(s.c1) AS n FROM pairs p LEFT JOIN splits s USING (run_id, step_id)
    GROUP BY p.run_id, p.step_id
), paired AS (
    SELECT * FROM single
    UNION ALL
    SELECT s.run_id, x.request_id, x.input_tokens, x.cached_tokens, s.step_id
    FROM splits s JOIN split_count c USING (run_id, step_id),
         LATERAL (SELECT s.r1 AS request_id, s.p1 AS input_tokens, s.c1 AS cached_tokens
                  UNION ALL SELECT s.r2, s.p2, s.c2) x
    WHERE c.n = 1
), provable AS (
    SELECT s.run_id
    FROM (SELECT run_id, any_value(n) AS n, coalesce(sum(num_preemptions), 0) AS preempted
          FROM scheduled GROUP BY run_id) s
    JOIN (SELECT run_id, max(upto) AS occurrences FROM occurrences GROUP BY run_id) o USING (run_id)
    WHERE o.occurrences = s.n AND s.preempted = 0
      AND s.run_id NOT IN (SELECT run_id FROM engine_stats WHERE preemptions_total > 0)
      AND s.run_id NOT IN (SELECT run_id FROM split_count WHERE n = 0)
      AND NOT EXISTS (
          SELECT 1 FROM single p LEFT JOIN blocks b USING (run_id)
          WHERE p.run_id = s.run_id
            AND (p.input_tokens IS NULL OR p.cached_tokens < 0 OR p.cached_tokens > p.input_tokens - 1
                 OR (b.block_size IS NOT NULL AND p.cached_tokens % b.block_size <> 0)))
)
SELECT run_id, request_id, input_tokens, cached_tokens, 'measured' AS basis, CAST(NULL AS BIGINT) AS step_id
FROM requests WHERE cached_tokens IS NOT NULL
UNION ALL
SELECT p.run_id, p.request_id, p.input_tokens, p.cached_tokens, 'derived' AS basis, p.step_id
FROM paired p
WHERE p.run_id IN (SELECT run_id FROM provable)
  AND NOT EXISTS (SELECT 1 FROM requests r WHERE r.run_id = p.run_id AND r.request_id = p.request_id
                                               AND r.cached_tokens IS NOT NULL);

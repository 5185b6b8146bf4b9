-- engine_prefix_cache: how much of the prompts the engine's prefix cache served, per run.
-- requires: engine_stats, engine_steps, requests
-- hit_rate is the engine's own counters: prompt tokens found in the cache over tokens looked up (vLLM
-- prefix_cache_hits / queries; TensorRT-LLM's reused / reused + missed blocks), from the first to the last
-- reading of each source (the whole count when there is one), summed over engines; else SGLang's prefill batch lines (#cached-token over #cached-token +
-- #new-token). cached_share is cached prompt tokens over prompt tokens: summed per-request cached tokens where
-- a source gives them, else the engine's iteration log (vLLM Iteration(k) lines count only the context tokens
-- computed: one minus their sum over the engine's prompt-token counter; the log must start at iteration 0,
-- as the counter does at the server's start; data-parallel engines' lines and counters are summed).
-- columns:
--   run_id          run
--   hit_rate        prompt tokens served from the cache / prompt tokens looked up (0-1; NULL: no counters)
--   hit_tokens      prompt tokens served from the cache, by that count
--   queried_tokens  prompt tokens looked up, by that count
--   hit_basis       engine counters | sglang prefill batches
--   cached_share    cached prompt tokens / prompt tokens (0-1; NULL where not derivable)
--   cached_basis    requests cached_tokens | iteration log context tokens vs the prompt-token counter
CREATE OR REPLACE VIEW engine_prefix_cache AS
WITH counted AS (
    -- cumulative counters only grow: their change is the largest less the smallest reading (no clock needed)
    SELECT run_id, source, instance, engine,
           max(prefix_cache_hits_total) - CASE WHEN count(*) > 1 THEN min(prefix_cache_hits_total) ELSE 0 END AS hits,
           max(prefix_cache_queries_total) - CASE WHEN count(*) > 1 THEN min(prefix_cache_queries_total) ELSE 0 END
               AS queries
    FROM engine_stats
    WHERE prefix_cache_hits_total IS NOT NULL AND prefix_cache_queries_total IS NOT NULL
    GROUP BY run_id, source, instance, engine
), per_source AS (
    SELECT run_id, source, sum(hits) AS hits, sum(queries) AS queries FROM counted GROUP BY run_id, source
), counters AS (
    -- one source per run: the one that counted the most queries over its engines (scrapes and stats lines count
    -- the same)
    SELECT run_id, hits, queries
    FROM (SELECT *, rank() OVER (PARTITION BY run_id ORDER BY queries DESC, source) AS k FROM per_source)
    WHERE k = 1
), prompt_counter AS (
    -- each engine's count since its start (its largest reading), summed over a source's data-parallel engines
    SELECT run_id, max(prompt_tokens) AS prompt_tokens
    FROM (SELECT run_id, source, sum(counted) AS prompt_tokens
          FROM (SELECT run_id, source, instance, engine, max(prompt_tokens_total) AS counted FROM engine_stats
                WHERE prompt_tokens_total IS NOT NULL GROUP BY ALL)
          GROUP BY run_id, source)
    GROUP BY run_id
), sglang AS (
    SELECT run_id, sum(cached_tokens) AS hits, sum(cached_tokens + prefill_tokens) AS queries
    FROM engine_steps WHERE detection = 'sglang prefill batch log' AND cached_tokens IS NOT NULL GROUP BY run_id
), computed AS (
    -- every engine's log from its iteration 0 (data-parallel engines number their own)
    SELECT run_id, sum(context_tokens) AS context_tokens
    FROM (SELECT run_id, engine, sum(prefill_tokens) AS context_tokens, min(step_id) AS first_step FROM engine_steps
          WHERE detection = 'vllm iteration log' GROUP BY ALL)
    GROUP BY run_id HAVING max(first_step) = 0
), per_request AS (
    SELECT run_id, sum(cached_tokens) AS cached, sum(input_tokens) AS prompt
    FROM requests WHERE cached_tokens IS NOT NULL AND input_tokens IS NOT NULL GROUP BY run_id
), runs AS (
    SELECT run_id FROM counters UNION SELECT run_id FROM sglang UNION SELECT run_id FROM per_request
    UNION SELECT run_id FROM computed
)
SELECT r.run_id,
       CASE WHEN c.queries > 0 THEN c.hits / c.queries WHEN g.queries > 0 THEN g.hits / g.queries END AS hit_rate,
       CASE WHEN c.queries > 0 THEN c.hits WHEN g.queries > 0 THEN g.hits END AS hit_tokens,
       CASE WHEN c.queries > 0 THEN c.queries WHEN g.queries > 0 THEN g.queries END AS queried_tokens,
       CASE WHEN c.queries > 0 THEN 'engine counters' WHEN g.queries > 0 THEN 'sglang prefill batches' END
           AS hit_basis,
       CASE WHEN p.prompt > 0 THEN p.cached / p.prompt
            WHEN n.prompt_tokens > 0 AND m.context_tokens IS NOT NULL THEN 1 - m.context_tokens / n.prompt_tokens
       END AS cached_share,
       CASE WHEN p.prompt > 0 THEN 'requests cached_tokens'
            WHEN n.prompt_tokens > 0 AND m.context_tokens IS NOT NULL
            THEN 'iteration log context tokens vs the prompt-token counter' END AS cached_basis
FROM runs r
LEFT JOIN counters c USING (run_id)
LEFT JOIN sglang g USING (run_id)
LEFT JOIN per_request p USING (run_id)
LEFT JOIN computed m USING (run_id)
LEFT JOIN prompt_counter n USING (run_id);

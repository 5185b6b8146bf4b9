-- engine_speculative: speculative decoding, per run: how many tokens a step's drafts proposed and the target kept.
-- requires: engine_stats, engine_steps, engine_config
-- A draft is one request's proposal in one step (vLLM V1, v1/spec_decode/metrics.py): the target model checks its
-- tokens in that step and keeps the accepted ones, plus one token of its own. The counts are the engine's counters
-- (Prometheus: from the first to the last scrape), else its log's lines (V1's SpecDecoding lines, each interval's
-- counts, summed from the log's start; V0's totals), of the source that counted the most draft tokens, summed over
-- engines.
-- tokens_per_decode_step is what a decoding request gained per step over the whole run: one token a step plus the
-- accepted ones, over its steps (the iteration log's generation requests from iteration 0, as the counters count
-- from the server's start; NULL without that log). acceptance_length is vLLM's own figure, over drafting steps only
-- (ngram proposes nothing where no n-gram matches: those steps gain one token); for SGLang, which counts no drafts,
-- the mean of its accept-length readings (per logging interval: tokens per verify step).
-- columns:
--   run_id                   run
--   speculative_tokens       the tokens each draft may propose, as the engine's config states it (0: off)
--   drafts                   drafts proposed (NULL where the source does not count them: a log)
--   draft_tokens             tokens the drafts proposed
--   accepted_tokens          draft tokens the target kept
--   acceptance_rate          accepted_tokens / draft_tokens (0-1)
--   acceptance_length        1 + accepted_tokens / drafts: tokens per drafting step of a request (SGLang: its readings)
--   decode_request_steps     steps x decoding requests, from the iteration log (NULL without it)
--   tokens_per_decode_step   1 + accepted_tokens / decode_request_steps
--   basis                    engine counters | server log | the mean of SGLang's N accept-length readings (...)
CREATE OR REPLACE VIEW engine_speculative AS
WITH counted AS (
    -- cumulative counters only grow: their change is the largest less the smallest reading (one reading: its value);
    -- a log's readings count from its start (V1's lines summed) or the server's (V0's totals): the largest
    SELECT run_id, source, engine,
           max(spec_draft_tokens_total)
               - CASE WHEN count(*) > 1 AND source <> 'log' THEN min(spec_draft_tokens_total) ELSE 0 END
               AS draft_tokens,
           max(spec_accepted_tokens_total)
               - CASE WHEN count(*) > 1 AND source <> 'log' THEN min(spec_accepted_tokens_total) ELSE 0 END
               AS accepted_tokens,
           max(spec_drafts_total) - CASE WHEN count(spec_drafts_total) > 1 THEN min(spec_drafts_total) ELSE 0 END
               AS drafts,
           max(spec_accepted_tokens_total) AS accepted_since_start
    FROM engine_stats
    WHERE spec_draft_tokens_total IS NOT NULL AND spec_accepted_tokens_total IS NOT NULL
    GROUP BY run_id, source, engine
), counters AS (
    -- one source per run: the one that counted the most draft tokens (scrapes and log lines count the same)
    SELECT run_id, any_value(source) AS source, sum(draft_tokens) AS draft_tokens,
           sum(accepted_tokens) AS accepted_tokens, sum(drafts) AS drafts,
           sum(accepted_since_start) AS accepted_since_start
    FROM (SELECT *, rank() OVER (PARTITION BY run_id ORDER BY draft_tokens DESC, source) AS k FROM counted)
    WHERE k = 1 GROUP BY run_id
), sglang AS (
    -- SGLang counts no drafts or tokens for a run: its accept length per interval (decode batch lines, or the gauge
    -- of the last interval at each scrape), 0 where the interval verified nothing; the mean of its readings
    SELECT run_id, avg(spec_accept_length) AS accept_length, count(*) AS readings,
           bool_or(source = 'log') AS from_log
    FROM engine_stats WHERE spec_accept_length >= 1 GROUP BY run_id
), logged AS (
    SELECT run_id, sum(decode_reqs)::BIGINT AS decode_request_steps
    FROM engine_steps WHERE detection = 'vllm iteration log' GROUP BY run_id HAVING min(step_id) = 0
), config AS (
    SELECT run_id, any_value(value) AS speculative_tokens FROM engine_config
    WHERE setting = 'speculative_tokens' GROUP BY run_id
)
SELECT run_id,
       g.speculative_tokens,
       c.drafts, c.draft_tokens, c.accepted_tokens,
       CASE WHEN c.draft_tokens > 0 THEN c.accepted_tokens / c.draft_tokens END AS acceptance_rate,
       CASE WHEN c.drafts > 0 THEN 1 + c.accepted_tokens / c.drafts ELSE a.accept_length END AS acceptance_length,
       l.decode_request_steps,
       CASE WHEN l.decode_request_steps > 0 AND c.draft_tokens > 0
            THEN 1 + c.accepted_since_start / l.decode_request_steps END AS tokens_per_decode_step,
       CASE WHEN c.source = 'log' THEN 'server log' WHEN c.source IS NOT NULL THEN 'engine counters'
            WHEN a.readings IS NOT NULL
            THEN format('the mean of SGLang''s {} accept-length readings ({})', a.readings,
                        CASE WHEN a.from_log THEN 'decode batch lines' ELSE 'its gauge' END) END AS basis
FROM counters c
FULL JOIN config g USING (run_id)
FULL JOIN sglang a USING (run_id)
LEFT JOIN logged l USING (run_id)
WHERE c.draft_tokens > 0 OR g.speculative_tokens > 0 OR a.readings > 0;

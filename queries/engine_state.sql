-- engine_state: what the engine was out of, moment by moment: a step function per run of its scheduling state,
-- each segment saying whether KV room, a sequence slot or the token budget was lacking for the request at the
-- head of the queue.
-- requires: engine_steps, engine_stats, engine_config, requests
-- The timeline is the engine's iteration log where it logs every iteration (vLLM Iteration(k), TensorRT-LLM
-- iteration stats, Dynamo's full forward-pass trace: a segment from each step's start to the next's), else its
-- metrics samples (scrapes and stats lines: from each sample to the next, for at most threshold_sample_valid_s():
-- Prometheus's own lookback, beyond which a sample is stale; a longer gap is a hole in the record, not one
-- state). Per segment:
--   kv_out: no KV room: the free KV tokens ((1 - kv_usage) x the cache's tokens) cannot hold the blocks the
--     queue head needs next (its prompt, less cached tokens, capped by the budget left in the step when
--     prefill is chunked, the budget when the step used it all; the head is the next request the engine
--     scheduled); where the cache's size is not known, or no request file names the head, KV usage at
--     threshold_kv_full_usage() or above; and in any case requests swapped out or paused for room, or (on a
--     timeline of samples, which has no KV reading per step) preemptions counted since the previous scrape;
--   slots_full: scheduled (steps) or running (samples) requests at max_num_seqs;
--   budget_full: the step's scheduled tokens at max_num_batched_tokens (steps only), each scheduled request charged
--     draft_slots tokens more where the engine charges them (vLLM's input budget for a draft model: engine_config).
-- Limits come from engine_config as stated, derived or the engine's default; a limit inferred from the steps
-- themselves is not used (it cannot tell whether it bound). A flag is NULL where its inputs are unknown. The
-- cause is the first that binds in the order kv, slot, budget: a request that does not fit the KV cache waits
-- whatever else frees; a slot counts only with KV room to spare, the budget only with a slot free too.
-- Replicas of a Prometheus server's export (engine_stats.instance) and the data-parallel engines of one server
-- (engine_stats.engine, engine_steps.engine) each have their own timeline.
-- columns:
--   run_id          run
--   instance        the replica (a Prometheus server's export; NULL for one server's logs and scrapes)
--   engine          the data-parallel engine within it ('0' where the source names none): each its own timeline
--   basis           steps | samples: what the timeline is made of
--   start_s         segment start, run clock seconds
--   end_s           segment end (the next step or sample, a sample at most sample_valid_s on), seconds; NULL for
--                   the last sample
--   scheduled_reqs  requests scheduled in the step (steps), or running (samples)
--   scheduled_tokens tokens scheduled in the step, with the drafter's slots (draft_slots) (NULL for samples)
--   kv_usage        KV-cache usage (0-1) in the segment
--   kv_free_tokens  KV tokens free in the segment, where the cache's size is known
--   head_need_tokens KV tokens (whole blocks) the queue head needs next, where known
--   kv_out          true when the queue head could not get KV room (NULL: unknown)
--   slots_full      true when every sequence slot was taken (NULL: unknown)
--   budget_full     true when the step used the whole token budget (NULL: unknown)
--   cause           kv | slot | budget | NULL (none binding: load, or unknown)
--   waiting         requests waiting at the segment's start (the latest sample at or before it)
CREATE OR REPLACE VIEW engine_state AS
WITH limits AS (
    SELECT run_id,
           max(value) FILTER (WHERE setting = 'max_num_seqs' AND basis <> 'inferred') AS max_seqs,
           max(value) FILTER (WHERE setting = 'max_num_batched_tokens' AND basis <> 'inferred') AS max_tokens,
           max(value) FILTER (WHERE setting = 'kv_cache_tokens') AS kv_tokens,
           max(value) FILTER (WHERE setting = 'block_size') AS block_size,
           max(value) FILTER (WHERE setting = 'chunked_prefill') AS chunked,
           coalesce(max(value) FILTER (WHERE setting = 'draft_slots'), 0) AS draft_slots
    FROM engine_config GROUP BY run_id
), full_logs AS (
    SELECT DISTINCT run_id FROM engine_steps
    WHERE source = 'log' AND start_s IS NOT NULL
      AND detection IN ('vllm iteration log', 'trtllm iteration log', 'dynamo fpm trace')
), steps AS (
    SELECT run_id, CAST(NULL AS VARCHAR) AS instance, coalesce(engine, '0') AS engine, 'steps' AS basis, start_s,
           coalesce(lead(start_s) OVER (PARTITION BY run_id, coalesce(engine, '0') ORDER BY start_s, step_id), end_s)
               AS end_s,
           prefill_reqs + decode_reqs AS scheduled_reqs, prefill_tokens + decode_tokens AS scheduled_tokens,
           kv_usage
    FROM engine_steps
    WHERE source = 'log' AND start_s IS NOT NULL
      AND detection IN ('vllm iteration log', 'trtllm iteration log', 'dynamo fpm trace')
), by_source AS (
    -- one sample per timeline, source and time: samples of one time (a log's whole-second stamps) averaged, the
    -- counter's latest kept; their order in the file is not in the store, and no order among them is right
    SELECT run_id, instance, coalesce(engine, '0') AS engine, source, ts_s, avg(running) AS running,
           avg(waiting) AS waiting, avg(kv_usage) AS kv_usage, avg(swapped) AS swapped,
           max(preemptions_total) AS preemptions_total
    FROM engine_stats WHERE ts_s IS NOT NULL GROUP BY ALL
), samples_all AS (
    SELECT run_id, instance, engine, coalesce(instance, '') || '/' || engine AS replica, ts_s,
           avg(running) AS running, avg(waiting) AS waiting, avg(kv_usage) AS kv_usage, avg(swapped) AS swapped,
           bool_or(preempting) AS preempting
    FROM (SELECT *, preemptions_total > lag(preemptions_total)
                        OVER (PARTITION BY run_id, instance, engine, source ORDER BY ts_s) AS preempting
          FROM by_source)
    GROUP BY run_id, instance, engine, ts_s
), samples AS (
    SELECT run_id, instance, engine, 'samples' AS basis, ts_s AS start_s,
           -- (least() would skip a NULL: the last sample's end stays unknown)
           CASE WHEN lead(ts_s) OVER w IS NOT NULL THEN least(lead(ts_s) OVER w, ts_s + threshold_sample_valid_s())
                END AS end_s,
           running AS scheduled_reqs, CAST(NULL AS BIGINT) AS scheduled_tokens, kv_usage
    FROM samples_all WHERE run_id NOT IN (SELECT run_id FROM full_logs)
    WINDOW w AS (PARTITION BY run_id, instance, engine ORDER BY ts_s)
), segments AS (
    SELECT * FROM steps UNION ALL SELECT * FROM samples
), held AS (
    -- what the latest sample at or before a segment's start says (steps carry no swap counts): the KV reading
    -- from the latest sample that has one (a source that counts the queue without reading the cache, such as
    -- Dynamo's forward-pass trace, hides no reading), the queue from the latest that counts it
    SELECT g.*, a.kv_usage AS sample_kv_usage, a.swapped, w.waiting
    FROM segments g
    ASOF LEFT JOIN (SELECT * FROM samples_all WHERE kv_usage IS NOT NULL OR swapped IS NOT NULL) a
        ON g.run_id = a.run_id AND coalesce(g.instance, '') || '/' || g.engine = a.replica AND g.start_s >= a.ts_s
    ASOF LEFT JOIN (SELECT run_id, replica, ts_s, waiting FROM samples_all WHERE waiting IS NOT NULL) w
        ON g.run_id = w.run_id AND coalesce(g.instance, '') || '/' || g.engine = w.replica AND g.start_s >= w.ts_s
), preempted AS (
    -- whether the engine preempted during the segment: the first scrape after its start counts what happened
    -- since the scrape before it
    SELECT h.*, p.preempting
    FROM held h ASOF LEFT JOIN (SELECT * EXCLUDE (instance, engine, waiting) FROM samples_all
                                WHERE preempting IS NOT NULL) p
        ON h.run_id = p.run_id AND coalesce(h.instance, '') || '/' || h.engine = p.replica AND h.start_s < p.ts_s
), headed AS (
    -- the queue head: the next request the engine scheduled after the segment began (FCFS)
    SELECT p.*, q.input_tokens - coalesce(q.cached_tokens, 0) AS head_prompt
    FROM preempted p ASOF LEFT JOIN (SELECT run_id, scheduled_s, input_tokens, cached_tokens FROM requests
                                     WHERE scheduled_s IS NOT NULL) q
        ON p.run_id = q.run_id AND p.start_s < q.scheduled_s
), needs AS (
    SELECT h.* REPLACE (h.scheduled_tokens + h.scheduled_reqs * coalesce(l.draft_slots, 0) AS scheduled_tokens),
           l.max_seqs, l.max_tokens, l.kv_tokens,
           coalesce(h.kv_usage, h.sample_kv_usage) AS usage,
           (1 - coalesce(h.kv_usage, h.sample_kv_usage)) * l.kv_tokens AS free,
           -- chunked prefill: the head's next chunk is what the step's budget leaves (all of it when the step
           -- used the whole budget: then it waits for the budget, and whether its chunk would fit is the question)
           CASE WHEN coalesce(l.chunked, 1) = 1 AND l.max_tokens IS NOT NULL
                THEN least(h.head_prompt, CASE WHEN h.scheduled_tokens < l.max_tokens
                                               THEN l.max_tokens - h.scheduled_tokens ELSE l.max_tokens END)
                ELSE h.head_prompt END AS chunk,
           l.block_size
    FROM headed h LEFT JOIN limits l USING (run_id)
), flagged AS (
    SELECT *,
           CASE WHEN block_size IS NOT NULL THEN ceil(chunk / block_size) * block_size ELSE chunk END AS need,
           CASE WHEN usage IS NULL AND swapped IS NULL AND preempting IS NULL THEN NULL
                ELSE coalesce(CASE WHEN kv_tokens IS NOT NULL AND chunk IS NOT NULL
                                   THEN free < CASE WHEN block_size IS NOT NULL
                                       THEN ceil(chunk / block_size) * block_size ELSE chunk END
                                   ELSE usage >= threshold_kv_full_usage() END, false)
                     OR coalesce(swapped > 0, false) OR (basis = 'samples' AND coalesce(preempting, false)) END
               AS kv_out,
           scheduled_reqs >= max_seqs AS slots_full,
           scheduled_tokens >= max_tokens AS budget_full
    FROM needs
)
SELECT run_id, instance, engine, basis, start_s, end_s, scheduled_reqs, scheduled_tokens, usage AS kv_usage,
       free AS kv_free_tokens,
       need AS head_need_tokens, kv_out, slots_full, budget_full,
       CASE WHEN kv_out THEN 'kv' WHEN slots_full THEN 'slot' WHEN budget_full THEN 'budget' END AS cause, waiting
FROM flagged;

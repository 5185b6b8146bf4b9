-- incident_engine: the engine inside a stretch of the run against outside it (a table macro:
-- incident_engine(from_s, to_s), run clock seconds): its steps and their composition, its scheduling state and its
-- samples, one row per side (docs/incidents.md).
-- requires: engine_steps, engine_state, engine_stats
-- Steps are the iteration log's where the run has one (it covers the whole run), else the profiler's; a step is
-- inside when it starts inside. The scheduling state's shares are of the time its segments cover on each side. A
-- counter's increments are placed at the sample that first shows them. A side with no step, segment or sample
-- has NULL figures.
-- columns:
--   run_id                  run
--   side                    inside | outside
--   steps                   engine steps
--   step_time_mean_s        mean step time, seconds
--   prompt_tokens_per_step  mean prompt tokens computed a step
--   steps_with_prompts      share of steps computing prompt tokens (0-1)
--   decode_reqs_per_step    mean requests decoding a step
--   at_slot_cap             share of the time every sequence slot was taken (0-1)
--   at_budget               share of the time a step used the whole token budget (0-1)
--   kv_out                  share of the time the queue head found no KV room (0-1)
--   kv_peak                 highest KV-cache usage (0-1)
--   preemptions             preemptions the engine counted
--   running_mean            requests running, mean over the samples
--   waiting_mean            requests waiting, mean over the samples
CREATE OR REPLACE MACRO incident_engine(from_s, to_s) AS TABLE
WITH pick AS (
    SELECT run_id, CASE WHEN bool_or(source = 'log') THEN 'log' ELSE 'profiler' END AS source
    FROM engine_steps WHERE start_s IS NOT NULL GROUP BY run_id
), steps AS (
    SELECT s.run_id, CASE WHEN s.start_s >= from_s AND s.start_s < to_s THEN 'inside' ELSE 'outside' END AS side,
           count(*) AS steps, avg(s.wall_s) AS step_time_mean_s, avg(s.prefill_tokens) AS prompt_tokens_per_step,
           avg(CASE WHEN s.prefill_tokens > 0 THEN 1.0 WHEN s.prefill_tokens = 0 THEN 0.0 END) AS steps_with_prompts,
           avg(s.decode_reqs) AS decode_reqs_per_step
    FROM engine_steps s JOIN pick USING (run_id, source) WHERE s.start_s IS NOT NULL
    GROUP BY ALL
), state AS (
    SELECT run_id, CASE WHEN start_s >= from_s AND start_s < to_s THEN 'inside' ELSE 'outside' END AS side,
           sum((end_s - start_s) * CAST(slots_full AS DOUBLE)) / nullif(sum(end_s - start_s) FILTER (
               WHERE slots_full IS NOT NULL), 0) AS at_slot_cap,
           sum((end_s - start_s) * CAST(budget_full AS DOUBLE)) / nullif(sum(end_s - start_s) FILTER (
               WHERE budget_full IS NOT NULL), 0) AS at_budget,
           sum((end_s - start_s) * CAST(kv_out AS DOUBLE)) / nullif(sum(end_s - start_s) FILTER (
               WHERE kv_out IS NOT NULL), 0) AS kv_out
    FROM engine_state WHERE end_s IS NOT NULL AND end_s > start_s
    GROUP BY ALL
), samples AS (
    SELECT run_id, ts_s, running, waiting, kv_usage,
           preemptions_total - lag(preemptions_total) OVER (
               PARTITION BY run_id, instance, engine, source ORDER BY ts_s) AS preempted
    FROM engine_stats WHERE ts_s IS NOT NULL
), stats AS (
    SELECT run_id, CASE WHEN ts_s >= from_s AND ts_s < to_s THEN 'inside' ELSE 'outside' END AS side,
           max(kv_usage) AS kv_peak, sum(greatest(preempted, 0)) AS preemptions, avg(running) AS running_mean,
           avg(waiting) AS waiting_mean
    FROM samples GROUP BY ALL
), sides AS (
    SELECT run_id, side FROM steps UNION SELECT run_id, side FROM state UNION SELECT run_id, side FROM stats
)
SELECT x.run_id, x.side, st.steps, st.step_time_mean_s, st.prompt_tokens_per_step, st.steps_with_prompts,
       st.decode_reqs_per_step, g.at_slot_cap, g.at_budget, g.kv_out, a.kv_peak, a.preemptions, a.running_mean,
       a.waiting_mean
FROM sides x
LEFT JOIN steps st USING (run_id, side)
LEFT JOIN state g USING (run_id, side)
LEFT JOIN stats a USING (run_id, side);

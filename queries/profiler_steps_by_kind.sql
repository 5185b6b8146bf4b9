-- profiler_steps_by_kind: engine steps of each kind with their duration distribution, per run and step source.
-- requires: engine_steps
-- columns:
--   run_id          run
--   source          profiler | log: where the steps come from (a run may have both)
--   kind            prefill | decode | mixed | idle | NULL (kind not known)
--   steps           number of steps
--   wall_s_total    summed CPU-side step duration, seconds
--   wall_s_mean     mean CPU-side step duration, seconds
--   wall_s_p50      median CPU-side step duration, seconds
--   wall_s_p99      99th percentile CPU-side step duration, seconds
--   gpu_busy_s      summed GPU busy time of the steps, seconds (NULL without GPU data)
--   prefill_tokens  summed prefill tokens (NULL where no step gives them)
--   decode_tokens   summed decode tokens (NULL where no step gives them)
--   token_steps     steps whose prefill and decode token counts are both known (the sums above are theirs: a
--                   step whose kind came from its kernels has none)
--   cuda_graph_steps steps that ran (partly) as CUDA-graph replays (NULL when no step has GPU work)
--   gpu_longer_steps steps whose GPU busy time exceeds their CPU span: launched without waiting for their
--                    kernels (CUDA graphs, asynchronous scheduling), so the CPU span is not their time
--                    (NULL when no step has GPU work)
--   gpu_longer_busy_s_mean  those steps' mean GPU busy time, seconds
--   gpu_longer_start_s_mean those steps' mean time from the step's start to its first GPU op's start (launch_gap_s),
--                    seconds
CREATE OR REPLACE VIEW profiler_steps_by_kind AS
SELECT run_id, source, kind,
       count(*) AS steps,
       sum(wall_s) AS wall_s_total,
       avg(wall_s) AS wall_s_mean,
       quantile_cont(wall_s, 0.5) AS wall_s_p50,
       quantile_cont(wall_s, 0.99) AS wall_s_p99,
       sum(gpu_busy_s) AS gpu_busy_s,
       sum(prefill_tokens) AS prefill_tokens,
       sum(decode_tokens) AS decode_tokens,
       count(*) FILTER (WHERE prefill_tokens IS NOT NULL AND decode_tokens IS NOT NULL) AS token_steps,
       CASE WHEN count(cuda_graph) > 0 THEN count(*) FILTER (WHERE cuda_graph) END AS cuda_graph_steps,
       CASE WHEN count(gpu_busy_s) > 0 THEN count(*) FILTER (WHERE gpu_busy_s > wall_s) END AS gpu_longer_steps,
       avg(gpu_busy_s) FILTER (WHERE gpu_busy_s > wall_s) AS gpu_longer_busy_s_mean,
       avg(launch_gap_s) FILTER (WHERE gpu_busy_s > wall_s) AS gpu_longer_start_s_mean
FROM engine_steps
GROUP BY run_id, source, kind;

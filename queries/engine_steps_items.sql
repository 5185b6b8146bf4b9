-- engine_steps_items: each engine step as the analysis document lists it (its steps.items), with its source.
-- requires: engine_steps
-- columns:
--   run_id                run
--   source                profiler or log
--   part                  which file of the run the step came from
--   step_id               the step's number in its source
--   kind                  prefill, decode, mixed or idle (NULL: the evidence does not tell)
--   kind_from             the evidence that decided kind
--   start_s               step start on the run clock, seconds
--   dur_s                 step duration (engine_steps.wall_s), seconds
--   prefill_reqs          requests prefilling in the step
--   prefill_tokens        prompt tokens computed in the step
--   decode_reqs           requests decoding in the step
--   decode_tokens         tokens decoded in the step
--   gpu_busy_s            union of the step's GPU op intervals, seconds
--   launch_gap_s          step start to its first GPU op, seconds
--   gpu_idle_s            step span not covered by GPU work, seconds
--   kernels               GPU ops attributed to the step
--   cuda_graph            whether the step replayed CUDA graphs
--   graph_launches        graph launches in the step
--   t_gemm_s              GPU time in gemm kernels, seconds
--   t_attention_s         GPU time in attention kernels, seconds
--   t_communication_s     GPU time in communication kernels, seconds
--   t_memory_s            GPU time in memory kernels, seconds
--   t_elementwise_s       GPU time in elementwise kernels, seconds
--   t_other_s             GPU time in other kernels, seconds
--   shape_tokens          query tokens from the attention op's input shapes
--   shape_reqs            sequences from the input shapes
--   shape_query_len       query length per sequence from the input shapes
--   shape_context_tokens  key/value tokens from the input shapes
--   marker                the step marker's name as the trace wrote it
--   detection             the marker family (or log) that defined the steps
--   kind_why              the rule of parsers/step_kinds.csv that decided or declined (kinds read from kernels)
CREATE OR REPLACE VIEW engine_steps_items AS
SELECT run_id, source, part, step_id, kind, kind_from, start_s, wall_s AS dur_s, prefill_reqs, prefill_tokens,
       decode_reqs, decode_tokens, gpu_busy_s, launch_gap_s, gpu_idle_s, kernels, cuda_graph, graph_launches,
       t_gemm_s, t_attention_s, t_communication_s, t_memory_s, t_elementwise_s, t_other_s, shape_tokens,
       shape_reqs, shape_query_len, shape_context_tokens, marker, detection, kind_why
FROM engine_steps;

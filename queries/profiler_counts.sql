-- profiler_counts: how many GPU ops a run's profiler traces hold, those launched before the trace window (no
-- launch event) and those replayed from CUDA graphs.
-- requires: kernels
-- columns:
--   run_id              run
--   gpu_ops             GPU ops (kernels, copies, sets, syncs)
--   orphans             of them, with no launch in the trace (kernels.orphan)
--   cuda_graph_kernels  of them, replayed from a CUDA graph (kernels.cuda_graph)
CREATE OR REPLACE VIEW profiler_counts AS
SELECT run_id, count(*) AS gpu_ops, count(*) FILTER (WHERE orphan) AS orphans,
       count(*) FILTER (WHERE cuda_graph) AS cuda_graph_kernels
FROM kernels GROUP BY run_id;

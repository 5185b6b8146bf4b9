-- report_size_mix: prompt vs output length on log2 bins, with the count and mean latency per cell: the
-- size scatter of the report without shipping every request to the page.
-- requires: requests_latency
-- columns:
--   run_id         run
--   input_bin      prompt tokens, lower edge of the log2 bin
--   output_bin     output tokens, lower edge of the log2 bin
--   requests       requests in the cell
--   mean_input     mean prompt tokens in the cell
--   mean_output    mean output tokens in the cell
--   e2e_s          mean end-to-end latency in the cell, seconds (NULL without latencies)
CREATE OR REPLACE VIEW report_size_mix AS
SELECT run_id,
       CAST(pow(2, floor(log2(greatest(input_tokens, 1)))) AS BIGINT) AS input_bin,
       CAST(pow(2, floor(log2(greatest(output_tokens, 1)))) AS BIGINT) AS output_bin,
       count(*) AS requests, avg(input_tokens) AS mean_input, avg(output_tokens) AS mean_output,
       avg(e2e_s) AS e2e_s
FROM requests_latency
WHERE input_tokens IS NOT NULL AND output_tokens IS NOT NULL AND counted
GROUP BY ALL;

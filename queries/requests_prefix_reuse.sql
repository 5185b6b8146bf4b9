-- requests_prefix_reuse: each request with the leading prefix blocks of its prompt that an earlier request
-- already had: the part of the prompt a prefix cache could have served (the one definition of prefix reuse).
-- requires: requests_latency
-- Blocks are the source's prefix-block hash ids (Mooncake hash_ids: a block's hash covers its whole prefix,
-- so a prefix cache serves exactly a prompt's leading run of blocks seen before). A block counts as seen when
-- a request of the same run arrived strictly earlier with it: requests arriving at the same instant cannot
-- reuse each other's. The first block not seen before ends the reuse. An upper bound: the cache is taken to
-- keep every block. NULL for requests without block ids or arrival time.
-- columns:
--   requests_latency.*     every column of requests_latency
--   prefix_blocks          prefix blocks of the prompt
--   prefix_blocks_reused   leading blocks an earlier request already had (0 to prefix_blocks)
CREATE OR REPLACE VIEW requests_prefix_reuse AS
WITH keyed AS (
    -- a request's reuse depends only on these: identical rows get the same figures
    SELECT DISTINCT run_id, arrival_s, prefix_block_ids FROM requests_latency
    WHERE prefix_block_ids IS NOT NULL AND arrival_s IS NOT NULL
), blocks AS (
    SELECT run_id, arrival_s, prefix_block_ids, unnest(prefix_block_ids) AS block,
           generate_subscripts(prefix_block_ids, 1) AS pos
    FROM keyed
), first_seen AS (
    SELECT run_id, block, min(arrival_s) AS first_s FROM blocks GROUP BY run_id, block
), reuse AS (
    SELECT b.run_id, b.arrival_s, b.prefix_block_ids, count(*) AS prefix_blocks,
           coalesce(min(b.pos) FILTER (WHERE NOT f.first_s < b.arrival_s) - 1, count(*)) AS prefix_blocks_reused
    FROM blocks b JOIN first_seen f USING (run_id, block)
    GROUP BY b.run_id, b.arrival_s, b.prefix_block_ids
)
SELECT l.*, u.prefix_blocks, u.prefix_blocks_reused
FROM requests_latency l
LEFT JOIN reuse u ON u.run_id = l.run_id AND u.arrival_s = l.arrival_s AND u.prefix_block_ids = l.prefix_block_ids;

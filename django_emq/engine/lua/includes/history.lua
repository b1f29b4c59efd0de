-- The operator's history of a queue, in bounded memory. The enqueue, retry,
-- reap and cancel scripts count their own events here; the waits, `done` and
-- the finished window are added by record_history-2.lua, from what the
-- claim and complete replies told the caller (django_emq.engine.tally):
--   <prefix>finished     zset  the last FINISHED_WINDOW finished job ids (done,
--                              dead, cancelled) by time of finishing (ms)
--   <prefix>m:<minute>   hash  one minute's counters (enq, done, dead, cancel,
--                              retry) and wait histogram (w<b>: jobs whose wait
--                              from due (enqueue or run_after) to first start
--                              fell in bucket b);
--                              expires after METRIC_TTL_MS
--   <prefix>lw:<hour>    hash  every lane's wait histogram for one hour
--                              (field <lane>:<b>); expires after LANE_WAIT_TTL_MS
-- A script sets a key's TTL once per call (not per job), whatever it counts
-- (once per new field would make the commands a call costs depend on how many
-- lanes there are: tests/test_cost.py counts them).
-- Every write here goes through redis.pcall and its errors are dropped: the
-- history is a by-product, and a damaged history key (edited by hand) must
-- never fail, half-way, the script that moves a job.
-- Bucket b holds waits w (ms) with 2^(b/2) <= w < 2^((b+1)/2); waits under 1 ms
-- fall in bucket 0. Python reads these keys (django_emq.engine.history) with
-- the same constants.
local FINISHED_WINDOW = 10000
local METRIC_TTL_MS = 26 * 3600 * 1000
local LANE_WAIT_TTL_MS = 2 * 3600 * 1000
local MAX_BUCKET = 63
local expiring = {}

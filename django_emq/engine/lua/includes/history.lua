-- @include "now_ms"

-- The operator's history of a queue, kept by the scripts the jobs already run
-- (no extra round trip per job), in bounded memory:
--   <prefix>finished     zset  the last FINISHED_WINDOW finished job ids (done,
--                              dead, cancelled) by time of finishing (ms)
--   <prefix>m:<minute>   hash  one minute's counters (enq, done, dead, cancel,
--                              retry) and wait histogram (w<b>: jobs whose wait
--                              from enqueue to first start fell in bucket b);
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

-- counted(key, field, n, ttl): add n to hash field `field`; the key's TTL is
-- (re)set the first time this script call touches it.
local function counted(key, field, n, ttl)
  redis.pcall('HINCRBY', key, field, n)
  if not expiring[key] then
    expiring[key] = true
    redis.pcall('PEXPIRE', key, ttl)
  end
end

-- countEvent(prefix, now, field, n): add n to this minute's counter `field`.
local function countEvent(prefix, now, field, n)
  counted(prefix .. 'm:' .. math.floor(now / 60000), field, n, METRIC_TTL_MS)
end

-- finishedJobs(prefix, ids, now, field): the jobs enter the finished window
-- (the oldest leave it) and this minute's counter `field` ('done', 'dead',
-- 'cancel') grows by their number. finishedJob: the same for one job.
local function finishedJobs(prefix, ids, now, field)
  if #ids == 0 then return end
  local key = prefix .. 'finished'
  local members = {}
  for i, id in ipairs(ids) do
    members[2 * i - 1] = now
    members[2 * i] = id
  end
  redis.pcall('ZADD', key, unpack(members))
  -- trims nothing while the window is not full: one command either way
  redis.pcall('ZREMRANGEBYRANK', key, 0, -FINISHED_WINDOW - 1)
  countEvent(prefix, now, field, #ids)
end

local function finishedJob(prefix, id, now, field)
  finishedJobs(prefix, {id}, now, field)
end

local function waitBucket(wait)
  if wait < 1 then return 0 end
  local b = math.floor(2 * math.log(wait) / math.log(2))
  if b > MAX_BUCKET then b = MAX_BUCKET end
  return b
end

-- startedJob(prefix, lane, now, enq): a job's first start, enqueue_ms `enq`:
-- its wait counts in this minute's histogram (w<b>) and in this hour's lane
-- histograms (<lane>:<b>): two writes per job, whatever the lanes. (Adding
-- them up per call first saves little: a call's jobs are of distinct lanes,
-- and would make the count depend on how the waits fall.)
local function startedJob(prefix, lane, now, enq)
  local b = waitBucket(now - (tonumber(enq) or now))
  countEvent(prefix, now, 'w' .. b, 1)
  counted(prefix .. 'lw:' .. math.floor(now / 3600000), lane .. ':' .. b, 1, LANE_WAIT_TTL_MS)
end

--[[
  reap: return jobs whose lease expired (by the server clock) to the head of
  their own lanes. Their attempts counters are kept, so a worker still
  holding an old token is refused when it tries to complete.

  Each expiry is counted on the row (`expiries`). A job whose lease has now
  expired max_expiries times (ARGV[3]) is dead instead of returned: a
  poison job that kills or freezes every worker running it must not come back
  forever (and hold its lane's head) — its error says what happened.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  active    zset   claimed job ids by lease deadline (ms)
  KEYS[4]  paused    set    paused lanes
  KEYS[5]  ceilings  hash   lane -> concurrency ceiling
  KEYS[6]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[7]  depths    zset   lane -> pending depth
  KEYS[8]  stats     hash   queue counters
  KEYS[9]  wake      list   wake tokens for parked workers
  KEYS[10] dead      zset   dead job ids by time of death (ms)
  derived: <prefix>g:<lane>:pending, <prefix>g:<lane>:active and
           <prefix>g:<lane>:dead (zsets), <prefix>job:<id> (hash), <prefix>unique
           (hash, see includes/policies.lua: a dead job frees its unique key),
           <prefix>timeshare and <prefix>weights (hashes, see
           includes/timeshare.lua: the time held is charged to the job's lane)

  history: the keys of includes/history.lua (the finished window and this minute's `dead`),
           written with pcall: a damaged history key never fails the script

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  limit     at most this many jobs per call
  ARGV[3]  max_expiries  a job whose lease expired this many times is dead
  ARGV[4]  keep      how many of the latest errors a dead job's row keeps

  The attempt ends 'x' in `tries` ('x<n>' when it made the job dead with
  failure n; includes/tries.lua). Every key, the expired jobs' rows and their
  lanes' keys included, is checked before the first write (check.lua).

  Returns the ids of the jobs whose lease expired (returned to their lanes,
  or dead).
]]
-- @include "add_count"
-- @include "any_unique"
-- @include "check_lane"
-- @include "check_q"
-- @include "check_tenant_of"
-- @include "finished_job"
-- @include "guard"
-- @include "job_key"
-- @include "join_ring"
-- @include "lane_dead_key"
-- @include "lane_key"
-- @include "leave_active"
-- @include "now_ms"
-- @include "release_unique"
-- @include "return_to_lane"
-- @include "ts_active"
-- @include "ts_settle_all"
-- @include "with_error"
-- @include "tries_of"
-- @include "with_try"

local Q = {ring = KEYS[1], onring = KEYS[2], active = KEYS[3], paused = KEYS[4],
  ceilings = KEYS[5], inflight = KEYS[6], depths = KEYS[7], stats = KEYS[8],
  wake = KEYS[9], dead = KEYS[10]}
local prefix = ARGV[1]
local maxExpiries = tonumber(ARGV[3])
local keep = tonumber(ARGV[4])
local now = nowMs()

-- reads and checks: the expired leases, their rows, their lanes' keys
checkQ(Q)
local uniques = anyUnique(prefix)
local ts = tsActive(prefix)  -- @timeshare
local expired = redis.call('ZRANGEBYSCORE', Q.active, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local jobs, checked = {}, {}
for _, id in ipairs(expired) do
  local jk = jobKey(prefix, id)
  local row = guard(jk, 'HMGET', jk, 'group', 'worker', 'expiries', 'errors', 'errors_total', 'seq',
    'tries', 'claimed', 'workers')
  row[7] = triesOf(row[7], row[8], row[9])  -- a first attempt's entry is its claim time
  if row[1] and not checked[row[1]] then
    checkLane(prefix, row[1])
    checkTenantOf(prefix, row[1])  -- [tenants]
    checked[row[1]] = true
  end
  jobs[#jobs + 1] = {id, jk, row}
end

-- bury(id, jk, lane, expiries, row): the job is dead with a LeaseExpired error.
local function bury(id, jk, lane, expiries, row)
  leaveActive(Q, prefix, id, lane)
  if uniques then releaseUnique(prefix, jk, id) end
  local error = cjson.encode({
    exception_class_path = 'django_emq.exceptions.LeaseExpired',
    traceback = 'the lease expired ' .. expiries .. ' times (EMQ MAX_EXPIRIES): the worker '
      .. 'running it died or froze every time (last: ' .. (row[2] or '?') .. ')'})
  local errors, total = withError(row[4], row[5], error, keep)
  redis.call('HSET', jk, unpack(withTry({'state', 'dead', 'error', error, 'errors', errors,
    'errors_total', total, 'finished', now, 'expiries', expiries}, row[7], now, 'x' .. total)))
  redis.call('ZADD', Q.dead, now, id)
  redis.call('ZADD', laneDeadKey(prefix, lane), now, id)
  addCount(Q.stats, 'dead', 1, 1)
  finishedJob(prefix, id, now, 'dead')
  joinRing(Q, lane, laneKey(prefix, lane))  -- its in-flight slot is free
end

-- writes
for _, job in ipairs(jobs) do
  local id, jk, row = job[1], job[2], job[3]
  local lane = row[1]
  if lane then
    if ts then tsSettleAll(prefix, lane, {id}, now) end  -- @timeshare
    local expiries = (tonumber(row[3]) or 0) + 1
    if expiries >= maxExpiries then
      bury(id, jk, lane, expiries, row)
    else
      returnToLane(Q, prefix, id, lane, jk, row[6],
        withTry({'expiries', expiries}, row[7], now, 'x'))
    end
  else
    -- The row is gone (deleted by hand): nothing to return; forget the lease.
    redis.call('ZREM', Q.active, id)
  end
end
if #expired > 0 then addCount(Q.stats, 'reaped', #expired, #expired) end
return expired

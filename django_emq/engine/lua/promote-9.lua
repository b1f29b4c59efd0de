--[[
  promote: move scheduled jobs that are due (by the server clock) into their
  lanes at their mint place.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  schedule  zset   deferred job ids by due time (ms)
  KEYS[4]  paused    set    paused lanes
  KEYS[5]  ceilings  hash   lane -> concurrency ceiling
  KEYS[6]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[7]  depths    zset   lane -> pending depth
  KEYS[8]  stats     hash   queue counters
  KEYS[9]  wake      list   wake tokens for parked workers
  derived: <prefix>g:<lane>:pending (zset), <prefix>job:<id> (hash),
           <prefix>throttled (zset, see includes/rate.lua): rate-limited
           lanes whose next slot is due rejoin the ring here too;
           <prefix>dueat (zset): a job promoted before its first start, by its
           due time (ms), where its wait begins (read by record_history-2.lua,
           which removes it; kept at most DUE_KEEP_MS and DUE_MOST entries)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  limit     at most this many jobs per call

  A job promoted before its first start keeps its row's `due` (when it
  became due); a retried one's is removed.

  Every key, the due jobs' rows and their lanes included, is checked before
  the first write (check.lua).

  Returns {promoted, next_due_ms, lanes} where next_due_ms is the due time of
  the earliest job still scheduled or throttled lane (-1 when there is none)
  and lanes the number of throttled lanes that were due.
]]
-- @include "add_pending"
-- @include "check_q"
-- @include "check_tenant_of"
-- @include "due_lanes"
-- @include "expect_type"
-- @include "guard"
-- @include "job_key"
-- @include "join_ring"
-- @include "lane_key"
-- @include "now_ms"
-- @include "unthrottle"
-- @include "wake"

local Q = {ring = KEYS[1], onring = KEYS[2], schedule = KEYS[3], paused = KEYS[4],
  ceilings = KEYS[5], inflight = KEYS[6], depths = KEYS[7], stats = KEYS[8],
  wake = KEYS[9]}
local prefix = ARGV[1]
local dueAt = prefix .. 'dueat'
-- A promoted job's due time is kept until a record_history call reads it at
-- the job's first start; a job cancelled or drained before it starts leaves
-- its entry behind, so the set is trimmed by age and by size.
local DUE_KEEP_MS = 26 * 3600 * 1000
local DUE_MOST = 100000

-- reads and checks: the due jobs, their rows, their lanes
checkQ(Q)
local now = nowMs()
local lanesDue = dueLanes(prefix, now, tonumber(ARGV[2]))
local due = redis.call('ZRANGEBYSCORE', Q.schedule, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local jobs, checked, firsts = {}, {}, {}
for _, id in ipairs(due) do
  local jk = jobKey(prefix, id)
  local row = guard(jk, 'HMGET', jk, 'group', 'seq', 'attempts', 'due')
  -- never claimed: its wait begins at its due time
  if row[1] and (tonumber(row[3]) or 0) == 0 and tonumber(row[4]) then
    firsts[#firsts + 1] = tonumber(row[4])
    firsts[#firsts + 1] = id
  end
  if row[1] and not checked[row[1]] then
    expectType(laneKey(prefix, row[1]), 'zset')
    checkTenantOf(prefix, row[1])  -- [tenants]
    checked[row[1]] = true
  end
  jobs[#jobs + 1] = {id, jk, row}
end
if #firsts > 0 then expectType(dueAt, 'zset') end

-- writes
if #lanesDue > 0 then wake(Q, unthrottle(Q, prefix, lanesDue)) end
for _, job in ipairs(jobs) do
  local id, jk, row = job[1], job[2], job[3]
  redis.call('ZREM', Q.schedule, id)
  if row[1] then
    local pendingKey = laneKey(prefix, row[1])
    -- A row that lost its seq (edited by hand) goes to the head of its lane
    -- rather than failing half-way and stranding the job in no set.
    local seq = tonumber(row[2]) or 0
    redis.call('HSET', jk, 'state', 'pending', 'seq', seq)
    -- a job never claimed keeps `due`: when it became due, where its wait begins
    -- (the job page's "waited"); a retry's back-off is forgotten
    if (tonumber(row[3]) or 0) > 0 then redis.call('HDEL', jk, 'due') end
    addPending(Q, row[1], pendingKey, id, seq)
    joinRing(Q, row[1], pendingKey)
  end
end
if #firsts > 0 then
  redis.call('ZADD', dueAt, unpack(firsts))
  redis.call('ZREMRANGEBYSCORE', dueAt, '-inf', '(' .. (now - DUE_KEEP_MS))
  redis.call('ZREMRANGEBYRANK', dueAt, 0, -DUE_MOST - 1)
end
local nextDue = redis.call('ZRANGE', Q.schedule, 0, 0, 'WITHSCORES')
local nextMs = -1
if #nextDue > 0 then nextMs = tonumber(nextDue[2]) end
local nextLane = redis.call('ZRANGE', prefix .. 'throttled', 0, 0, 'WITHSCORES')
if #nextLane > 0 and (nextMs < 0 or tonumber(nextLane[2]) < nextMs) then
  nextMs = tonumber(nextLane[2])
end
return {#due, nextMs, #lanesDue}

--[[
  drain: delete up to `limit` of a lane's pending jobs (rows included). The
  lane's settings (pause, ceiling, weight) and its in-flight jobs are kept.
  Called in a loop by the client so a deep lane never blocks the server long.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  depths    zset   lane -> pending depth
  KEYS[4]  stats     hash   queue counters (`drained` grows by the jobs deleted)
  KEYS[5]  pending   zset   the lane (emq:{q}:g:<lane>:pending)
  derived: <prefix>job:<id> (hash) of each deleted job, <prefix>unique (hash,
           see includes/policies.lua: a drained job frees its unique key)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  lane      the lane id
  ARGV[3]  limit     at most this many jobs per call

  Returns {deleted, remaining}.
]]
-- @include "add_count"
-- @include "any_unique"
-- @include "check_q"
-- @include "check_tenant_of"
-- @include "expect_type"
-- @include "job_key"
-- @include "lane_leaves"
-- @include "release_unique"
-- @include "removed_pending"

local Q = {ring = KEYS[1], onring = KEYS[2], depths = KEYS[3], stats = KEYS[4]}
local prefix, lane, pendingKey = ARGV[1], ARGV[2], KEYS[5]
checkQ(Q)
expectType(pendingKey, 'zset')
checkTenantOf(prefix, lane)  -- [tenants]
local uniques = anyUnique(prefix)
local popped = redis.call('ZPOPMIN', pendingKey, tonumber(ARGV[3]))
for i = 1, #popped, 2 do
  if uniques then releaseUnique(prefix, jobKey(prefix, popped[i]), popped[i]) end
  redis.call('DEL', jobKey(prefix, popped[i]))
end
local n = #popped / 2
removedPending(Q, lane, n)
if n > 0 then addCount(Q.stats, 'drained', n, n) end
local remaining = redis.call('ZCARD', pendingKey)
if remaining == 0 then laneLeaves(Q, lane) end  -- [tenants] off its ring, the top or its tenant's
return {n, remaining}

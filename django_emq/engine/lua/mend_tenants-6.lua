--[[
  mend_tenants: the doctor's repair of one tenant, one atomic step: its ring
  is rebuilt from its serviceable lanes (rotation order restarts), its entry
  put on the top ring exactly when it can be served (leaving costs an LREM
  over the top ring), its in-flight count recounted from its lanes'.

  KEYS[1]  ring      list   serviceable lanes and tenant entries, in rotation order
  KEYS[2]  onring    set    lanes and tenant entries on a ring
  KEYS[3]  paused    set    paused lanes
  KEYS[4]  ceilings  hash   lane or '@<tenant>' -> concurrency ceiling
  KEYS[5]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[6]  wake      list   wake tokens for parked workers
  derived: <prefix>tenants (hash), <prefix>t:<tenant>:ring (list),
           <prefix>g:<lane>:pending and :active (zsets), <prefix>throttled (zset)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  tenant    the tenant id (validated by the caller)
  ARGV[3..] lanes    every lane the doctor found recorded under the tenant

  Every key is checked first (check.lua). Returns 1.
]]
-- @include "any_tenants"
-- @include "check_q"
-- @include "expect_type"
-- @include "lane_active_key"
-- @include "lane_key"
-- @include "serviceable"
-- @include "tenant_join"
-- @include "tenant_ring_key"
-- @include "wake"

local Q = {ring = KEYS[1], onring = KEYS[2], paused = KEYS[3], ceilings = KEYS[4],
  inflight = KEYS[5], wake = KEYS[6]}
local prefix, tenant = ARGV[1], ARGV[2]
local entry, ringKey = '@' .. tenant, tenantRingKey(prefix, tenant)
checkQ(Q)
anyTenants(prefix)
expectType(ringKey, 'list')
local mine = {}
for i = 3, #ARGV do
  expectType(laneKey(prefix, ARGV[i]), 'zset')
  expectType(laneActiveKey(prefix, ARGV[i]), 'zset')
  if redis.call('HGET', prefix .. 'tenants', ARGV[i]) == tenant then mine[#mine + 1] = ARGV[i] end
end
for _, lane in ipairs(redis.call('LRANGE', ringKey, 0, -1)) do
  if redis.call('HGET', prefix .. 'tenants', lane) == tenant then
    redis.call('SREM', Q.onring, lane)
  end
end
redis.call('DEL', ringKey)
if redis.call('SREM', Q.onring, entry) == 1 then redis.call('LREM', Q.ring, 0, entry) end
local sum = 0
for _, lane in ipairs(mine) do
  sum = sum + redis.call('ZCARD', laneActiveKey(prefix, lane))
end
if sum > 0 then redis.call('HSET', Q.inflight, entry, sum) else redis.call('HDEL', Q.inflight, entry) end
for _, lane in ipairs(mine) do
  if redis.call('SISMEMBER', Q.onring, lane) == 0 and serviceable(Q, lane, laneKey(prefix, lane)) then
    redis.call('SADD', Q.onring, lane)
    redis.call('RPUSH', ringKey, lane)
  end
end
if tenantJoin(Q, prefix, tenant) then wake(Q, 1) end
return 1

--[[
  set_limit: set or remove a lane's concurrency ceiling. A lane at or over
  its new ceiling leaves the ring (its in-flight jobs run on); a lane given
  headroom rejoins it. Lane control: may LREM the ring.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  paused    set    paused lanes
  KEYS[4]  ceilings  hash   lane -> concurrency ceiling
  KEYS[5]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[6]  wake      list   wake tokens for parked workers
  KEYS[7]  pending   zset   the lane (emq:{q}:g:<lane>:pending)
  derived: <prefix>g:<lane>:active (zset: its jobs in flight, which a ceiling
           counts; type-checked); <prefix>policies (hash, the policy index:
           includes/check.lua), kept by the write

  ARGV[1]  lane      the lane id
  ARGV[2]  ceiling   a positive integer, or '' to remove the ceiling

  Returns 1.
]]
-- @include "check_q"
-- @include "check_tenant_of"
-- @include "expect_type"
-- @include "index_policy"
-- @include "policy_indexed"
-- @include "lane_active_key"
-- @include "prefix_of_q"
-- @include "refresh_ring"

local Q = {ring = KEYS[1], onring = KEYS[2], paused = KEYS[3], ceilings = KEYS[4],
  inflight = KEYS[5], wake = KEYS[6]}
local lane = ARGV[1]
checkQ(Q)
expectType(KEYS[7], 'zset')
expectType(laneActiveKey(prefixOfQ(Q), lane), 'zset')
checkTenantOf(prefixOfQ(Q), lane)  -- [tenants]
policyIndexed(prefixOfQ(Q))  -- the index follows (includes/check.lua)
if ARGV[2] == '' then
  redis.call('HDEL', Q.ceilings, lane)
else
  redis.call('HSET', Q.ceilings, lane, ARGV[2])
end
indexPolicy(prefixOfQ(Q), 'ceilings', lane, ARGV[2] ~= '')
refreshRing(Q, lane, KEYS[7])
return 1

--[[
  pause / resume a lane. A paused lane leaves the ring; its backlog and its
  in-flight jobs are untouched. Resuming puts it back when it is serviceable.
  Leaving the ring from the middle costs an LREM over the ring: this is a
  lane-control operation, never on the hot path.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  paused    set    paused lanes
  KEYS[4]  ceilings  hash   lane -> concurrency ceiling
  KEYS[5]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[6]  wake      list   wake tokens for parked workers
  KEYS[7]  pending   zset   the lane (emq:{q}:g:<lane>:pending)
  derived: <prefix>g:<lane>:active (zset: its jobs in flight, which a ceiling
           counts; type-checked)

  ARGV[1]  lane      the lane id
  ARGV[2]  paused    '1' to pause, '0' to resume

  Returns 1 when the paused flag changed, 0 when it already had that value.
]]
-- @include "check_q"
-- @include "check_tenant_of"
-- @include "expect_type"
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
local changed
if ARGV[2] == '1' then
  changed = redis.call('SADD', Q.paused, lane)
else
  changed = redis.call('SREM', Q.paused, lane)
end
refreshRing(Q, lane, KEYS[7])
return changed

--[[
  set_rate: set or remove a lane's rate limit (at most `count` jobs started in
  any `per_ms`; see includes/rate.lua). Setting a limit keeps the lane's
  recent starts that fall in the new window (the newest `count` of them): a
  lane whose new window is full already is throttled until its next slot.
  Removing it forgets them and frees the lane. Its ring membership follows.
  Lane control: may LREM the ring. Every key is checked before the first
  write (check.lua).

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  paused    set    paused lanes
  KEYS[4]  ceilings  hash   lane -> concurrency ceiling
  KEYS[5]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[6]  wake      list   wake tokens for parked workers
  KEYS[7]  pending   zset   the lane (emq:{q}:g:<lane>:pending)
  derived: <prefix>g:<lane>:active (zset: its jobs in flight, which a ceiling
           counts; type-checked)
  KEYS[8]  rates     hash   lane -> '<count>:<per_ms>'
  KEYS[9]  throttled zset   throttled lanes by when their next start is allowed
  KEYS[10] starts    list   the lane's latest start times (emq:{q}:g:<lane>:starts)
  derived: <prefix>policies (hash, the policy index: includes/check.lua),
           kept by the write

  ARGV[1]  lane      the lane id (validated by the caller)
  ARGV[2]  rate      '<count>:<per_ms>' (validated by the caller), or '' to
                     remove the lane's own (the queue's default applies again)

  Returns 1.
]]
-- @include "check_q"
-- @include "check_tenant_of"
-- @include "expect_type"
-- @include "index_policy"
-- @include "policy_indexed"
-- @include "lane_active_key"
-- @include "now_ms"
-- @include "prefix_of_q"
-- @include "refresh_ring"

local Q = {ring = KEYS[1], onring = KEYS[2], paused = KEYS[3], ceilings = KEYS[4],
  inflight = KEYS[5], wake = KEYS[6]}
local lane, startsKey = ARGV[1], KEYS[10]
checkQ(Q)
expectType(KEYS[7], 'zset')
expectType(laneActiveKey(prefixOfQ(Q), lane), 'zset')
checkTenantOf(prefixOfQ(Q), lane)  -- [tenants]
expectType(KEYS[8], 'hash')
expectType(KEYS[9], 'zset')
expectType(startsKey, 'list')
policyIndexed(prefixOfQ(Q))  -- the index follows (includes/check.lua)
redis.call('ZREM', KEYS[9], lane)
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[8], lane)
  redis.call('DEL', startsKey)
else
  redis.call('HSET', KEYS[8], lane, ARGV[2])
  local count, per = string.match(ARGV[2], '^(%d+):(%d+)$')
  count, per = tonumber(count), tonumber(per)
  local now = nowMs()
  redis.call('LTRIM', startsKey, -count, -1)
  redis.call('PEXPIRE', startsKey, per)
  local oldest = redis.call('LINDEX', startsKey, 0)
  while oldest and tonumber(oldest) <= now - per do
    redis.call('LPOP', startsKey)
    oldest = redis.call('LINDEX', startsKey, 0)
  end
  if oldest and redis.call('LLEN', startsKey) >= count then
    redis.call('ZADD', KEYS[9], tonumber(oldest) + per, lane)  -- still full: throttled
  end
end
indexPolicy(prefixOfQ(Q), 'rates', lane, ARGV[2] ~= '')
indexPolicy(prefixOfQ(Q), 'throttled')
refreshRing(Q, lane, KEYS[7])
return 1

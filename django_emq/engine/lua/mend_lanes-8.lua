--[[
  mend_lanes: the doctor's repair of lanes, one small atomic step per call:
  the depth index and the in-flight count are recounted from the lane's
  sets, and the lane is on the ring exactly when it is serviceable (leaving
  it costs an LREM over the ring, as pausing does). A name that is no lane
  (a hand edit of the index, the ring or a setting) is purged from them all.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  paused    set    paused lanes
  KEYS[4]  ceilings  hash   lane -> concurrency ceiling
  KEYS[5]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[6]  depths    zset   lane -> pending depth
  KEYS[7]  wake      list   wake tokens for parked workers
  KEYS[8]  weights   hash   lane -> weight
  derived: <prefix>g:<lane>:pending and :active (zsets) of each lane; its
           tenant's ring (includes/tenants.lua); on purge
           <prefix>maxdepth, <prefix>rates, <prefix>timeshare (hashes: its
           '<name>' and '<name>:avg'), <prefix>throttled (zset)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2..] pairs    name, mode: 'lane' (a lane id, validated by the caller)
           or 'purge' (a name that is no lane id)

  Every key is checked first (check.lua). Returns how many lanes changed.
]]
-- @include "check_q"
-- @include "check_tenant_of"
-- @include "lane_active_key"
-- @include "lane_key"
-- @include "refresh_ring"
-- @include "serviceable"

local Q = {ring = KEYS[1], onring = KEYS[2], paused = KEYS[3], ceilings = KEYS[4],
  inflight = KEYS[5], depths = KEYS[6], wake = KEYS[7], weights = KEYS[8]}
local prefix = ARGV[1]
checkQ(Q)
for i = 2, #ARGV, 2 do  -- [tenants] the rings a lane may join or leave
  if ARGV[i + 1] ~= 'purge' then checkTenantOf(prefix, ARGV[i]) end
end
local changed = 0
for i = 2, #ARGV, 2 do
  local name, mode = ARGV[i], ARGV[i + 1]
  if mode == 'purge' then
    local n = redis.call('ZREM', Q.depths, name) + redis.call('HDEL', Q.inflight, name)
      + redis.call('SREM', Q.onring, name) + redis.call('LREM', Q.ring, 0, name)
      + redis.call('SREM', Q.paused, name) + redis.call('HDEL', Q.ceilings, name)
      + redis.call('HDEL', Q.weights, name)
    -- the lane policies' keys (derived; a wrong type is the doctor's to delete)
    n = n + (tonumber(redis.pcall('HDEL', prefix .. 'maxdepth', name)) or 0)
      + (tonumber(redis.pcall('HDEL', prefix .. 'rates', name)) or 0)
      + (tonumber(redis.pcall('ZREM', prefix .. 'throttled', name)) or 0)
      + (tonumber(redis.pcall('HDEL', prefix .. 'timeshare', name, name .. ':avg')) or 0)
    if n > 0 then changed = changed + 1 end
  else
    local pendingKey = laneKey(prefix, name)
    local before = redis.call('ZSCORE', Q.depths, name)
    local depth = redis.call('ZCARD', pendingKey)
    local active = redis.call('ZCARD', laneActiveKey(prefix, name))
    local n = 0
    if (tonumber(before) or 0) ~= depth then
      if depth > 0 then redis.call('ZADD', Q.depths, depth, name)
      else redis.call('ZREM', Q.depths, name) end
      n = n + 1
    end
    -- a lane's in-flight count is its active set's size: a field of its own in
    -- the inflight hash (which counts tenants) was left by an older version
    n = n + redis.call('HDEL', Q.inflight, name)
    local onRing = redis.call('SISMEMBER', Q.onring, name) == 1
    if onRing ~= serviceable(Q, name, pendingKey) then
      refreshRing(Q, name, pendingKey)
      n = n + 1
    end
    if n > 0 then changed = changed + 1 end
  end
end
return changed

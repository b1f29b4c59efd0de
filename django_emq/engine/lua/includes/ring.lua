-- @include "serviceable"
-- @include "wake"

-- joinRing(Q, lane, pendingKey): put the lane at the tail of the ring if it is
-- serviceable and not already there, and wake one parked worker. O(1): the
-- on-ring set answers membership, the ring list is never scanned.
-- Q needs .ring, .onring, .paused, .ceilings, .inflight, .wake.
local function joinRing(Q, lane, pendingKey)
  if redis.call('SISMEMBER', Q.onring, lane) == 1 then return false end
  if not serviceable(Q, lane, pendingKey) then return false end
  redis.call('SADD', Q.onring, lane)
  redis.call('RPUSH', Q.ring, lane)
  wake(Q, 1)
  return true
end

-- refreshRing(Q, lane, pendingKey): make the lane's ring membership match its
-- serviceability, in either direction. Leaving the ring from an arbitrary
-- position costs an LREM over the ring, so only lane-control operations
-- (pause, ceiling, drain, move) call this; the hot paths never do.
local function refreshRing(Q, lane, pendingKey)
  if serviceable(Q, lane, pendingKey) then
    return joinRing(Q, lane, pendingKey)
  end
  if redis.call('SREM', Q.onring, lane) == 1 then
    redis.call('LREM', Q.ring, 1, lane)
  end
  return false
end

-- @include "item_keys"
-- @include "inflight"
-- @include "pending"
-- @include "ring"

-- returnToLane(Q, prefix, id, lane, jk): an active job goes back to the head
-- of its own lane at its mint place (its seq score), its lease dropped. The
-- attempts counter is kept, so the next claim's token is higher.
-- Q needs .ring, .onring, .active, .paused, .ceilings, .inflight, .depths,
-- .stats, .wake.
local function returnToLane(Q, prefix, id, lane, jk)
  local pendingKey = laneKey(prefix, lane)
  leaveActive(Q, prefix, id, lane)
  redis.call('HSET', jk, 'state', 'pending')
  addPending(Q, lane, pendingKey, id, redis.call('HGET', jk, 'seq'))
  joinRing(Q, lane, pendingKey)
end

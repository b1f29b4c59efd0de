-- @include "item_keys"
-- @include "inflight"
-- @include "pending"
-- @include "ring"

-- returnToLane(Q, prefix, id, lane, jk, seq): an active job goes back to the
-- head of its own lane at its mint place (seq, read from its row before the
-- script's first write; a seq that is no number, edited by hand, puts it at
-- the lane's head), its lease dropped. The attempts counter is kept, so the
-- next claim's token is higher.
-- Q needs .ring, .onring, .active, .paused, .ceilings, .inflight, .depths,
-- .stats, .wake.
local function returnToLane(Q, prefix, id, lane, jk, seq)
  local pendingKey = laneKey(prefix, lane)
  leaveActive(Q, prefix, id, lane)
  redis.call('HSET', jk, 'state', 'pending')
  addPending(Q, lane, pendingKey, id, tonumber(seq) or 0)
  joinRing(Q, lane, pendingKey)
end

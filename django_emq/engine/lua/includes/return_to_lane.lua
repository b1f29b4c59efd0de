-- @include "add_pending"
-- @include "join_ring"
-- @include "lane_key"
-- @include "leave_active"


-- returnToLane(Q, prefix, id, lane, jk, seq, fields): an active job goes back
-- to the head of its own lane at its mint place (seq, read from its row before
-- the script's first write; a seq that is no number, edited by hand, puts it
-- at the lane's head), its lease dropped; `fields` (a flat list, may be empty)
-- are written to its row with its state. The attempts counter is kept, so the
-- next claim's token is higher.
-- Q needs .ring, .onring, .active, .paused, .ceilings, .inflight, .depths,
-- .stats, .wake.
local function returnToLane(Q, prefix, id, lane, jk, seq, fields)
  local pendingKey = laneKey(prefix, lane)
  leaveActive(Q, prefix, id, lane)
  fields[#fields + 1] = 'state'
  fields[#fields + 1] = 'pending'
  redis.call('HSET', jk, unpack(fields))
  addPending(Q, lane, pendingKey, id, tonumber(seq) or 0)
  joinRing(Q, lane, pendingKey)
end

-- @include "join_ring"
-- @include "lane_leaves"
-- @include "serviceable"

-- refreshRing(Q, lane, pendingKey): make the lane's ring membership match its
-- serviceability, in either direction. Leaving the ring from an arbitrary
-- position costs an LREM over the ring, so only lane-control operations
-- (pause, ceiling, drain, move) call this; the hot paths never do.
local function refreshRing(Q, lane, pendingKey)
  if serviceable(Q, lane, pendingKey) then
    return joinRing(Q, lane, pendingKey)
  end
  laneLeaves(Q, lane)
  return false
end

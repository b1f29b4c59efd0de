-- @include "lane_enters"
-- @include "serviceable"
-- @include "wake"

-- joinRing(Q, lane, pendingKey): put the lane at the tail of the ring if it is
-- serviceable and not already there, and wake one parked worker. O(1): the
-- on-ring set answers membership, the ring list is never scanned. A tenanted
-- lane joins its tenant's ring (includes/tenants.lua; the script's read phase
-- called checkTenantOf for the lane).
-- Q needs .ring, .onring, .paused, .ceilings, .inflight, .wake.
local function joinRing(Q, lane, pendingKey)
  if redis.call('SISMEMBER', Q.onring, lane) == 1 then return false end
  if not serviceable(Q, lane, pendingKey) then return false end
  laneEnters(Q, lane)
  wake(Q, 1)
  return true
end

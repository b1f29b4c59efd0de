-- @include "lane_enters"
-- @include "wake"

-- enterRing(Q, lane): the lane joins its ring's tail (willJoin said so) and one
-- parked worker is woken. Q needs .ring, .onring, .ceilings, .inflight, .wake.
local function enterRing(Q, lane)
  laneEnters(Q, lane)
  wake(Q, 1)
end

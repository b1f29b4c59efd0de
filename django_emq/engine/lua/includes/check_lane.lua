-- @include "expect_type"
-- @include "lane_active_key"
-- @include "lane_dead_key"
-- @include "lane_key"

-- checkLane: documented in includes/check.lua.
local function checkLane(prefix, lane)
  expectType(laneKey(prefix, lane), 'zset')
  expectType(laneActiveKey(prefix, lane), 'zset')
  expectType(laneDeadKey(prefix, lane), 'zset')
end

-- @include "lane_active_key"
-- @include "lane_key"
-- @include "ts_key"

-- tsForgetIdle(prefix, lane, leaving): once `leaving` of the lane's in-flight
-- jobs are settled, a lane with no other job in flight and none pending
-- forgets its time-share fields. Call it after tsSettle, before the jobs
-- leave the lane's active set. A pending or active set of the wrong type
-- reads as busy.
local function tsForgetIdle(prefix, lane, leaving)
  local active = redis.pcall('ZCARD', laneActiveKey(prefix, lane))
  if type(active) ~= 'number' or active > leaving then return end
  local depth = redis.pcall('ZCARD', laneKey(prefix, lane))
  if type(depth) ~= 'number' or depth > 0 then return end
  redis.call('HDEL', tsKey(prefix), lane, lane .. ':avg')
end

-- @include "lane_key"
-- @include "ts_key"

-- tsForgetIdle(prefix, lane, inflightKey, leaving): once `leaving` of the
-- lane's in-flight jobs are settled, a lane with no other job in flight and
-- none pending forgets its time-share fields. Call it after tsSettle, before
-- the in-flight count drops. A pending set of the wrong type reads as busy.
local function tsForgetIdle(prefix, lane, inflightKey, leaving)
  if (tonumber(redis.call('HGET', inflightKey, lane)) or 0) > leaving then return end
  local depth = redis.pcall('ZCARD', laneKey(prefix, lane))
  if type(depth) ~= 'number' or depth > 0 then return end
  redis.call('HDEL', tsKey(prefix), lane, lane .. ':avg')
end

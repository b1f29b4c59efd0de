-- @include "add_count"

-- dropInflight(Q, lane, n, laneActive): the lane's in-flight count drops by
-- n, after its jobs left laneActive (its active set); the field is removed at
-- zero. Q needs .inflight.
local function dropInflight(Q, lane, n, laneActive)
  local left = addCount(Q.inflight, lane, -n, function() return redis.call('ZCARD', laneActive) end)
  if left <= 0 then redis.call('HDEL', Q.inflight, lane) end
end

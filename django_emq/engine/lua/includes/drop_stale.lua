-- @include "lane_dead_key"

-- dropStale(Q, prefix, lane, stale): the writes deadBatch left to its caller.
local function dropStale(Q, prefix, lane, stale)
  for _, entry in ipairs(stale) do
    redis.call('ZREM', laneDeadKey(prefix, lane), entry[1])
    if entry[2] then redis.call('ZREM', Q.dead, entry[1]) end
  end
end

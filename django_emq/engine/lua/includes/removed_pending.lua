-- @include "add_count"

-- removedPending: documented in includes/pending.lua.
local function removedPending(Q, lane, n)
  if n <= 0 then return end
  if tonumber(redis.call('ZINCRBY', Q.depths, -n, lane)) <= 0 then
    redis.call('ZREM', Q.depths, lane)
  end
  addCount(Q.stats, 'pending', -n, 0)
end

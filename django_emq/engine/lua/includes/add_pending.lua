-- @include "add_count"

-- addPending(Q, lane, pendingKey, id, score) / removedPending(Q, lane, n):
-- keep the depth index and the queue's pending total in step with the lanes.
-- Q needs .depths, .stats.
local function addPending(Q, lane, pendingKey, id, score)
  redis.call('ZADD', pendingKey, score, id)
  redis.call('ZINCRBY', Q.depths, 1, lane)
  addCount(Q.stats, 'pending', 1, 0)
end

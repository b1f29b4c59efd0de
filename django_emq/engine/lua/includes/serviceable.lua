-- @include "lane_active_key"

-- serviceable(Q, lane, pendingKey): true when the lane belongs on the ring:
-- it has pending jobs, is not paused, is below its concurrency ceiling (its
-- in-flight count is the size of its active set, derived:
-- <prefix>g:<lane>:active), and is not throttled by its rate limit (derived:
-- <prefix>throttled, a zset of lanes by when their next start is allowed;
-- see includes/rate.lua). A ceiling that is no number (edited by hand) reads
-- as none, an active set of the wrong type as empty, a throttled set of the
-- wrong type as empty (this is called after writes: it must not fail).
-- Q needs .paused, .ceilings.
local function serviceable(Q, lane, pendingKey)
  if redis.call('ZCARD', pendingKey) == 0 then return false end
  if redis.call('SISMEMBER', Q.paused, lane) == 1 then return false end
  -- the prefix is what precedes 'g:<lane>:pending' (#lane + 10 characters)
  local prefix = string.sub(pendingKey, 1, -(#lane + 11))
  local ceiling = tonumber(redis.call('HGET', Q.ceilings, lane))
  if ceiling then
    local inflight = tonumber(redis.pcall('ZCARD', laneActiveKey(prefix, lane))) or 0
    if inflight >= ceiling then return false end
  end
  local throttled = prefix .. 'throttled'
  local due = redis.pcall('ZSCORE', throttled, lane)
  if due and type(due) ~= 'table' then return false end
  return true
end

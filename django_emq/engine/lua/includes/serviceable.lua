-- serviceable(Q, lane, pendingKey): true when the lane belongs on the ring:
-- it has pending jobs, is not paused, is below its concurrency ceiling, and
-- is not throttled by its rate limit (derived: <prefix>throttled, a zset of
-- lanes by when their next start is allowed; see includes/rate.lua).
-- Q needs .paused, .ceilings, .inflight.
local function serviceable(Q, lane, pendingKey)
  if redis.call('ZCARD', pendingKey) == 0 then return false end
  if redis.call('SISMEMBER', Q.paused, lane) == 1 then return false end
  local ceiling = redis.call('HGET', Q.ceilings, lane)
  if ceiling then
    local inflight = tonumber(redis.call('HGET', Q.inflight, lane) or '0')
    if inflight >= tonumber(ceiling) then return false end
  end
  -- the prefix is what precedes 'g:<lane>:pending' (#lane + 10 characters)
  local throttled = string.sub(pendingKey, 1, -(#lane + 11)) .. 'throttled'
  if redis.call('ZSCORE', throttled, lane) then return false end
  return true
end

-- serviceable(Q, lane, pendingKey): true when the lane belongs on the ring:
-- it has pending jobs, is not paused, is below its concurrency ceiling, and
-- is not throttled by its rate limit (derived: <prefix>throttled, a zset of
-- lanes by when their next start is allowed; see includes/rate.lua).
-- A ceiling or in-flight count that is no number (edited by hand) reads as
-- none and 0, a throttled set of the wrong type as empty (this is called
-- after writes: it must not fail). Q needs .paused, .ceilings, .inflight.
local function serviceable(Q, lane, pendingKey)
  if redis.call('ZCARD', pendingKey) == 0 then return false end
  if redis.call('SISMEMBER', Q.paused, lane) == 1 then return false end
  local ceiling = tonumber(redis.call('HGET', Q.ceilings, lane))
  if ceiling then
    local inflight = tonumber(redis.call('HGET', Q.inflight, lane)) or 0
    if inflight >= ceiling then return false end
  end
  -- the prefix is what precedes 'g:<lane>:pending' (#lane + 10 characters)
  local throttled = string.sub(pendingKey, 1, -(#lane + 11)) .. 'throttled'
  local due = redis.pcall('ZSCORE', throttled, lane)
  if due and type(due) ~= 'table' then return false end
  return true
end

-- serviceable(Q, lane, pendingKey): true when the lane belongs on the ring:
-- it has pending jobs, is not paused, and is below its concurrency ceiling.
-- A ceiling or in-flight count that is no number (edited by hand) reads as
-- none and 0. Q needs .paused, .ceilings, .inflight.
local function serviceable(Q, lane, pendingKey)
  if redis.call('ZCARD', pendingKey) == 0 then return false end
  if redis.call('SISMEMBER', Q.paused, lane) == 1 then return false end
  local ceiling = tonumber(redis.call('HGET', Q.ceilings, lane))
  if ceiling then
    local inflight = tonumber(redis.call('HGET', Q.inflight, lane)) or 0
    if inflight >= ceiling then return false end
  end
  return true
end

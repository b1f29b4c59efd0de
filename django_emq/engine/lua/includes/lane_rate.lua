-- laneRate(prefix, lane, default): count, per_ms of the lane's limit (its own,
-- else the queue's '<count>:<per_ms>' default, '' for none), or nil.
local function laneRate(prefix, lane, default)
  local spec = redis.call('HGET', prefix .. 'rates', lane) or default
  local count, per = string.match(spec, '^(%d+):(%d+)$')
  if not count then return nil end
  return tonumber(count), tonumber(per)
end

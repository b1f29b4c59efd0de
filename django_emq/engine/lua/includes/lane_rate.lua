-- laneRate(prefix, lane, default, own): count, per_ms of the lane's limit (its
-- own when `own`, i.e. the policy index says it has one, else the queue's
-- '<count>:<per_ms>' default, '' for none), or nil. A rates hash of the wrong
-- type: nil, nil, {key, error} (nothing written).
local function laneRate(prefix, lane, default, own)
  local spec = default
  if own then
    local key = prefix .. 'rates'
    local got = redis.pcall('HGET', key, lane)
    if type(got) == 'table' then return nil, nil, {key, got.err} end
    spec = got or default
  end
  local count, per = string.match(spec, '^(%d+):(%d+)$')
  if not count then return nil end
  return tonumber(count), tonumber(per)
end

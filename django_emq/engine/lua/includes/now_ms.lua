-- nowMs(): the server clock in milliseconds. Leases and schedules use this,
-- never a worker's clock.
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

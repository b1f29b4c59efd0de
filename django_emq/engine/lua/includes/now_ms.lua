-- nowMs(): the server clock in milliseconds, read once per script call (a
-- script runs atomically: one instant). Leases and schedules use this, never
-- a worker's clock.
local NOW_MS = nil

local function nowMs()
  if not NOW_MS then
    local t = redis.call('TIME')
    NOW_MS = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return NOW_MS
end

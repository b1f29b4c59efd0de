-- @include "guard"

-- lastTick(prefix, schedule): the schedule's last enqueued tick (ms), 0 for
-- none. A read that checks the hash's type.
local function lastTick(prefix, schedule)
  local key = prefix .. 'ticks'
  return tonumber(guard(key, 'HGET', key, schedule)) or 0
end

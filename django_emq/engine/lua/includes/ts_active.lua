-- @include "expect_type"
-- @include "in_use"
-- @include "ts_key"

-- tsActive(prefix): whether the queue has time-share state (then ending
-- attempts settle their charges). Reads only: checks the timeshare and
-- weights hashes' types.
local function tsActive(prefix)
  local key = tsKey(prefix)
  if not inUse(key) then return false end
  expectType(key, 'hash')  -- (no command when inUse read the hash itself)
  expectType(prefix .. 'weights', 'hash')
  return true
end

-- @include "expect_type"
-- @include "in_use"

-- rated(prefix, default): whether any lane of the queue may be rate-limited
-- (the queue has a default, or some lane its own). Checks the types of the
-- queue-wide rate keys (reads only).
local function rated(prefix, default)
  local own = inUse(prefix .. 'rates')
  if not own and default == '' then return false end
  expectType(prefix .. 'throttled', 'zset')
  return true
end

-- @include "in_use"

-- rated(prefix, default): whether any lane of the queue may be rate-limited
-- (the queue has a default, or some lane its own). Reads nothing when the
-- caller read the policy index (includes/check.lua); the throttled set's type
-- is checked by its first touch, dueLanes' guarded read.
local function rated(prefix, default)
  return inUse(prefix .. 'rates') or default ~= ''
end

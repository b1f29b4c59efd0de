-- @include "history"

-- waitBucket: documented in includes/history.lua.
local function waitBucket(wait)
  if wait < 1 then return 0 end
  local b = math.floor(2 * math.log(wait) / math.log(2))
  if b > MAX_BUCKET then b = MAX_BUCKET end
  return b
end

-- @include "check"

-- indexRecorded: documented in includes/check.lua.
local function indexRecorded(prefix)
  if UNRECORDED then
    redis.call('HSET', prefix .. 'policies', '*', POLICY_FLAGS_READ or '')
    UNRECORDED = false
  end
end

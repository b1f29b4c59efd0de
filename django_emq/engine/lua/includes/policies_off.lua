-- @include "check"

-- policiesOff: documented in includes/check.lua.
local function policiesOff(prefix)
  if POLICIES_OFF == nil then
    local keys = {}
    for i, name in ipairs(POLICY_HASHES) do keys[i] = prefix .. name end
    -- a user whose ACL lacks EXISTS (docs/valkey.md) gets an error reply: then
    -- each policy is asked on its own (inUse), as if some were set
    POLICIES_OFF = redis.pcall('EXISTS', unpack(keys)) == 0
    if POLICIES_OFF then
      for _, key in ipairs(keys) do IN_USE[key] = false end
    end
  end
  return POLICIES_OFF
end

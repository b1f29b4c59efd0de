-- tsKey: documented in includes/timeshare.lua.
local function tsKey(prefix)
  return prefix .. 'timeshare'
end

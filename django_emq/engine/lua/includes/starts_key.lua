-- startsKey: documented in includes/rate.lua.
local function startsKey(prefix, lane)
  return prefix .. 'g:' .. lane .. ':starts'
end

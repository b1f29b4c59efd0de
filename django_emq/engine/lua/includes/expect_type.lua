-- @include "check"
-- @include "corrupt"

-- expectType: documented in includes/check.lua.
local function expectType(key, want)
  if TYPE_CHECKED[key] then return end
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= want and kind ~= 'none' then
    corrupt(key, 'is a ' .. kind .. ', not a ' .. want)
  end
  TYPE_CHECKED[key] = true
end

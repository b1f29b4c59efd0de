-- @include "check"

-- wrongKind(key, want): for a check that must not abort (a claim's turn, after
-- earlier turns wrote): nil when key holds a `want` or nothing (one TYPE, once
-- per script call), else {key, error} as a failed command's pcall gives them
-- (fail() turns it into the corrupt error), for the caller to end on.
local function wrongKind(key, want)
  if TYPE_CHECKED[key] then return nil end
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= want and kind ~= 'none' then
    return {key, 'WRONGTYPE Operation against a key holding the wrong kind of value'}
  end
  TYPE_CHECKED[key] = true
  return nil
end

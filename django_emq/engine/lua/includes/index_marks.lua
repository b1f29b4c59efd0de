-- @include "check"

-- indexMarks: documented in includes/check.lua. A hash of the wrong type (the
-- doctor deletes it) holds nothing.
local function indexMarks(prefix, name)
  local letters = {}
  for _, entry in ipairs(POLICY_HASHES) do
    local key = prefix .. entry[1]
    local held
    if name == '*' then
      held = redis.call('EXISTS', key) == 1
    elseif entry[3] then
      held = redis.pcall('HEXISTS', key, name) == 1
    end
    if held then letters[#letters + 1] = entry[2] end
  end
  return table.concat(letters)
end

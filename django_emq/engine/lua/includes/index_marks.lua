-- @include "check"

-- indexMarks: documented in includes/check.lua. A hash of the wrong type (the
-- doctor deletes it) holds nothing. Under a user whose ACL refuses EXISTS,
-- TYPE answers whether a key is there (every script's checks need it).
local function indexMarks(prefix, name)
  local letters = {}
  for _, entry in ipairs(POLICY_HASHES) do
    local key = prefix .. entry[1]
    local held
    if name == '*' then
      held = redis.pcall('EXISTS', key)
      if type(held) == 'number' then
        held = held == 1
      else
        held = redis.call('TYPE', key).ok ~= 'none'
      end
    elseif entry[3] then
      held = redis.pcall('HEXISTS', key, name) == 1
    end
    if held then letters[#letters + 1] = entry[2] end
  end
  return table.concat(letters)
end

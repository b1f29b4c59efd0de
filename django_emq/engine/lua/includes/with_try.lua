-- @include "end_try"

-- withTry(fields, tries, now, outcome): fields (a flat HSET list) with
-- 'tries' and its ended value added when there is an entry to end.
local function withTry(fields, tries, now, outcome)
  local ended = endTry(tries, now, outcome)
  if ended then
    fields[#fields + 1] = 'tries'
    fields[#fields + 1] = ended
  end
  return fields
end

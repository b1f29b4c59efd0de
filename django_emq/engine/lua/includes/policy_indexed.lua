-- @include "check"
-- @include "guard"

-- policyIndexed: documented in includes/check.lua.
local function policyIndexed(prefix)
  if INDEXED == nil then
    local index = prefix .. 'policies'
    local flags = guard(index, 'HGET', index, '*')
    TYPE_CHECKED[index] = true
    if flags and string.find(flags, POLICY_ALIEN) then
      -- a character that is no letter (a hand edit): unknown, so every
      -- policy is asked of its keys, as without the index, until a repair
      INDEXED, flags = false, nil
    elseif flags then
      INDEXED = true
    else
      local keys, laneKeys = {}, {}
      for i, entry in ipairs(POLICY_HASHES) do
        keys[i] = prefix .. entry[1]
        if entry[3] then laneKeys[#laneKeys + 1] = keys[i] end
      end
      -- (a user whose ACL lacks EXISTS reads the queue as unindexed: correct, slower)
      local held = redis.pcall('EXISTS', unpack(keys))
      if held == 0 then
        INDEXED, flags = true, ''
      elseif type(held) == 'number' and redis.call('EXISTS', unpack(laneKeys)) == 0 then
        -- only keys that name no lane hold something: their letters are all
        -- the index holds, so it is built here, and recorded with the call
        local letters = {}
        for i, entry in ipairs(POLICY_HASHES) do
          if not entry[3] and redis.call('EXISTS', keys[i]) == 1 then
            letters[#letters + 1] = entry[2]
          end
        end
        INDEXED, flags = true, table.concat(letters)
      else
        INDEXED = false
      end
      UNRECORDED = INDEXED
    end
    POLICY_FLAGS_READ = flags
  end
  return INDEXED
end

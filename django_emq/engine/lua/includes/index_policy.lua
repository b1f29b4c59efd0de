-- @include "check"
-- @include "index_marks"

-- indexPolicy: documented in includes/check.lua. `added`: true when the write
-- added `name`'s field, false when it removed it, nil when unknown (read).
-- A lane's field holding a character that is no letter (a hand edit) is
-- rebuilt from the hashes.
local function indexPolicy(prefix, hash, name, added)
  local index = prefix .. 'policies'
  if INDEXED == nil then
    -- asked after the write (it freed something): in force when '*' is there
    local flags = redis.pcall('HGET', index, '*')
    INDEXED = type(flags) == 'string' and not string.find(flags, POLICY_ALIEN)
    if INDEXED then POLICY_FLAGS_READ = flags end
  end
  local key = prefix .. hash
  local letter = POLICY_LETTER[hash]
  -- the field (name's, or '*') with `letter` set to `on`; written when it
  -- changed ('*' is kept, '' for no letter: the index stays in force)
  local function follow(field, had, on)
    if type(had) ~= 'string' then had = '' end
    local known = had  -- (a character that is no letter: what the hashes say)
    if field ~= '*' and string.find(had, POLICY_ALIEN) then known = indexMarks(prefix, field) end
    local letters = {}
    for _, entry in ipairs(POLICY_HASHES) do
      local l = entry[2]
      if (l == letter and on) or (l ~= letter and string.find(known, l, 1, true)) then
        letters[#letters + 1] = l
      end
    end
    local now = table.concat(letters)
    if now ~= had or (field == '*' and UNRECORDED) then
      if now == '' and field ~= '*' then
        redis.pcall('HDEL', index, field)
      else
        redis.pcall('HSET', index, field, now)
      end
    end
    return now
  end
  if name then
    local held = added
    if held == nil then held = redis.pcall('HEXISTS', key, name) == 1 end
    LANE_MARKS[name] = follow(name, redis.pcall('HGET', index, name), held)
  end
  -- a lane's field is kept whatever '*' says (a repair that builds the index
  -- lane by lane, '*' last, misses no write made meanwhile); '*' only where
  -- the index is in force
  if not INDEXED then return end
  -- (a user whose ACL lacks EXISTS keeps the letter: a lookup more, never less)
  local used = added == true or redis.pcall('EXISTS', key) ~= 0
  local flags = follow('*', POLICY_FLAGS_READ, used)
  UNRECORDED = false
  POLICY_FLAGS_READ = flags
  if POLICY_FLAGS ~= nil then POLICY_FLAGS = flags end
  IN_USE[key] = used
end

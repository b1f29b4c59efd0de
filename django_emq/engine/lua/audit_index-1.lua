--[[
  audit_index: the doctor's check of the policy index (includes/check.lua)
  for a batch of names (reads only). Each name's field must hold the letters
  of the per-lane policy hashes that hold a field for it (none: no field);
  '*' must hold the letter of every policy hash that holds a field, and no
  character that is no letter (a letter of an empty hash is no damage: it
  costs a lookup, never a wrong answer).

  KEYS[1]  policies  hash   the policy index
  derived: <prefix><hash> for each policy hash (POLICY_HASHES, check.lua);
           one of the wrong type holds nothing here (the doctor reports it)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2..] names    lanes or tenant entries ('@<tenant>') the index or a
                     per-lane policy hash names, or '*'

  Returns a flat array, three entries per wrong field: name, what it holds
  ('' for none), what it must hold. An index of the wrong type fails with
  the corrupt-key error.
]]
-- @include "guard"
-- @include "index_marks"

local out = {}
for i = 2, #ARGV do
  local name = ARGV[i]
  local held = guard(KEYS[1], 'HGET', KEYS[1], name) or ''
  local want = indexMarks(ARGV[1], name)
  local wrong = held ~= want
  if name == '*' then
    -- (a character that is no letter makes the hot paths ask every key)
    wrong = string.find(held, POLICY_ALIEN) ~= nil
    for letter in string.gmatch(want, '.') do
      if not string.find(held, letter, 1, true) then wrong = true end
    end
  end
  if wrong then
    out[#out + 1] = name
    out[#out + 1] = held
    out[#out + 1] = want
  end
end
return out

--[[
  mend_index: the doctor's repair of the policy index (includes/check.lua)
  for a batch of names, one atomic step: each name's field is set to what
  the policy hashes say (removed when they name nothing of it); '*' to the
  letters of the policy hashes that hold a field ('' for none: '*' is kept,
  as it puts the index in force; mend it last). A queue without an index
  and without a policy key gets none (its first call records '*').

  KEYS[1]  policies  hash   the policy index
  derived: <prefix><hash> for each policy hash (POLICY_HASHES, check.lua)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2..] names    lanes, tenant entries ('@<tenant>'), or '*'

  Returns how many fields changed. An index of the wrong type fails with the
  corrupt-key error (the doctor deletes it first).
]]
-- @include "guard"
-- @include "index_marks"

local changed = 0
for i = 2, #ARGV do
  local name = ARGV[i]
  local held = guard(KEYS[1], 'HGET', KEYS[1], name) or ''
  local want = indexMarks(ARGV[1], name)
  -- a '*' that is not there is written unless it would be the index's only
  -- field and say nothing: a queue that holds nothing gets no key
  local absent = name == '*' and redis.call('HEXISTS', KEYS[1], '*') == 0
  if absent and want == '' and redis.call('HLEN', KEYS[1]) == 0 then absent = false end
  if held ~= want or absent then
    if want == '' and name ~= '*' then
      redis.call('HDEL', KEYS[1], name)
    else
      redis.call('HSET', KEYS[1], name, want)
    end
    changed = changed + 1
  end
end
return changed

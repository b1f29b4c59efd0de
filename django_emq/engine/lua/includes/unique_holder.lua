-- @include "guard"
-- @include "job_key"

-- uniqueHolder(prefix, lane, key): the id and row key of the unfinished job
-- holding the unique key on the lane, or false. A holder that has finished
-- (its row gone, done or dead) holds nothing.
local function uniqueHolder(prefix, lane, key)
  local hash = prefix .. 'unique'
  local holder = guard(hash, 'HGET', hash, lane .. ':' .. key)
  if not holder then return false end
  local jk = jobKey(prefix, holder)
  local state = guard(jk, 'HGET', jk, 'state')
  if state == 'pending' or state == 'scheduled' or state == 'active' then return holder, jk end
  return false
end

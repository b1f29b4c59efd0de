-- fence(jk, token): check that the job exists, is active, and that token is
-- its current attempt. Returns the job's lane, or a negative code:
-- -1 no such job, -2 stale token (the lease moved on to a newer attempt).
local function fence(jk, token)
  local row = redis.call('HMGET', jk, 'state', 'attempts', 'group')
  if not row[1] then return -1 end
  if row[1] ~= 'active' or row[2] ~= token then return -2 end
  return row[3]
end

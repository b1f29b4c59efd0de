-- @include "guard"
-- @include "tries_of"


-- fence(jk, token, uniq): check that the job exists, is active, and that token is
-- its current attempt. Returns the job's lane, its `tries` (includes/tries.lua:
-- the caller ends the running attempt; a first attempt's, which the row does
-- not hold, is its `claimed`, triesOf), whether the attempt is the job's
-- first (nothing of it written yet), and, when `uniq` is true, the unique key
-- the job holds (its row's `uniq`, or nil): read with the rest, so that a
-- queue with unique keys pays no second read to free them; or a negative code:
-- -1 no such job, -2 stale token (the lease moved on to a newer attempt).
-- A read, so it runs before any write; a row that is not a hash aborts the
-- script (check.lua).
local function fence(jk, token, uniq)
  local row
  if uniq then
    row = guard(jk, 'HMGET', jk, 'state', 'attempts', 'group', 'tries', 'claimed', 'workers',
      'uniq')
  else
    row = guard(jk, 'HMGET', jk, 'state', 'attempts', 'group', 'tries', 'claimed', 'workers')
  end
  if not row[1] then return -1 end
  if row[1] ~= 'active' or row[2] ~= token then return -2 end
  if not row[3] then return -1 end
  return row[3], triesOf(row[4], row[5], row[6]), not row[4] and not row[6], row[7] or nil
end

-- @include "guard"
-- @include "tries_of"


-- fence(jk, token, uniq, ending): check that the job exists, is active, and that token is
-- its current attempt. Returns the job's lane, its `tries` (includes/tries.lua:
-- the caller ends the running attempt; a first attempt's, which the row does
-- not hold, is its `claimed`, triesOf), whether the attempt is the job's
-- first (nothing of it written yet), and, when `uniq` is true, the unique key
-- the job holds (its row's `uniq`, or nil): read with the rest, so that a
-- queue with unique keys pays no second read to free them; or a negative code:
-- -1 no such job, -2 stale token (the lease moved on to a newer attempt).
-- `ending` (a completion, which ends a first attempt at its `finished` and
-- needs no entry for it): token 1 is a first attempt (attempts only grow, and
-- only a claim of a job never claimed writes 1), so its `tries` is not read
-- (nil; a row holds none for a first attempt: includes/take_turn.lua); a later
-- attempt's is read by a second HMGET.
-- A read, so it runs before any write; a row that is not a hash aborts the
-- script (check.lua).
local function fence(jk, token, uniq, ending)
  local row
  if ending then
    if uniq then
      row = guard(jk, 'HMGET', jk, 'state', 'attempts', 'group', 'uniq')
    else
      row = guard(jk, 'HMGET', jk, 'state', 'attempts', 'group')
    end
    if not row[1] then return -1 end
    if row[1] ~= 'active' or row[2] ~= token then return -2 end
    if not row[3] then return -1 end
    if token == '1' then return row[3], nil, true, row[4] or nil end
    local past = redis.call('HMGET', jk, 'tries', 'claimed', 'workers')
    return row[3], triesOf(past[1], past[2], past[3]), not past[1] and not past[3], row[4] or nil
  end
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

-- @include "count_event"
-- @include "history"

-- finishedJobs(prefix, ids, now, field): the jobs enter the finished window
-- (the oldest leave it) and this minute's counter `field` ('done', 'dead',
-- 'cancel') grows by their number. finishedJob: the same for one job.
local function finishedJobs(prefix, ids, now, field)
  if #ids == 0 then return end
  local key = prefix .. 'finished'
  local members = {}
  for i, id in ipairs(ids) do
    members[2 * i - 1] = now
    members[2 * i] = id
  end
  redis.pcall('ZADD', key, unpack(members))
  -- trims nothing while the window is not full: one command either way
  redis.pcall('ZREMRANGEBYRANK', key, 0, -FINISHED_WINDOW - 1)
  countEvent(prefix, now, field, #ids)
end

-- tickJob(prefix, schedule): the id of the job of the schedule's last tick.
local function tickJob(prefix, schedule)
  return redis.call('HGET', prefix .. 'ticks', schedule .. ':job') or ''
end

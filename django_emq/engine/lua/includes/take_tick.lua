-- takeTick(prefix, schedule, tick, id): the tick is enqueued (as job id).
local function takeTick(prefix, schedule, tick, id)
  redis.call('HSET', prefix .. 'ticks', schedule, tick, schedule .. ':job', id)
end

--[[
  reap: return jobs whose lease expired (by the server clock) to the head of
  their own lanes. Their attempts counters are kept, so a worker still
  holding an old token is refused when it tries to complete.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  active    zset   claimed job ids by lease deadline (ms)
  KEYS[4]  paused    set    paused lanes
  KEYS[5]  ceilings  hash   lane -> concurrency ceiling
  KEYS[6]  inflight  hash   lane -> jobs in flight
  KEYS[7]  depths    zset   lane -> pending depth
  KEYS[8]  stats     hash   queue counters
  KEYS[9]  wake      list   wake tokens for parked workers
  derived: <prefix>g:<lane>:pending (zset), <prefix>job:<id> (hash)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  limit     at most this many jobs per call

  Returns the ids of the jobs returned to their lanes.
]]
-- @include "now_ms"
-- @include "return_to_lane"

local Q = {ring = KEYS[1], onring = KEYS[2], active = KEYS[3], paused = KEYS[4],
  ceilings = KEYS[5], inflight = KEYS[6], depths = KEYS[7], stats = KEYS[8],
  wake = KEYS[9]}
local prefix = ARGV[1]
local expired = redis.call('ZRANGEBYSCORE', Q.active, '-inf', nowMs(), 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(expired) do
  local jk = jobKey(prefix, id)
  local lane = redis.call('HGET', jk, 'group')
  if lane then
    returnToLane(Q, prefix, id, lane, jk)
    redis.call('HINCRBY', jk, 'expiries', 1)
  else
    -- The row is gone (deleted by hand): nothing to return; forget the lease.
    redis.call('ZREM', Q.active, id)
  end
end
if #expired > 0 then redis.call('HINCRBY', Q.stats, 'reaped', #expired) end
return expired

--[[
  complete: record a claimed job's success, fenced by its token. The lane's
  in-flight count drops, so a lane held at its ceiling may rejoin the ring.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  active    zset   claimed job ids by lease deadline (ms)
  KEYS[4]  paused    set    paused lanes
  KEYS[5]  ceilings  hash   lane -> concurrency ceiling
  KEYS[6]  inflight  hash   lane -> jobs in flight
  KEYS[7]  stats     hash   queue counters
  KEYS[8]  wake      list   wake tokens for parked workers
  KEYS[9]  job       hash   the job row
  derived: <prefix>g:<lane>:pending (zset) and <prefix>g:<lane>:active (zset)
           of the job's lane

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  id        the job id
  ARGV[3]  token     the attempt number the claim returned
  ARGV[4]  result    JSON result to keep
  ARGV[5]  ttl_ms    how long the finished row is kept; 0 deletes it now

  Returns 1, or -1 (no such job) / -2 (stale token); nothing changes then.
]]
-- @include "now_ms"
-- @include "item_keys"
-- @include "fence"
-- @include "inflight"
-- @include "ring"

local Q = {ring = KEYS[1], onring = KEYS[2], active = KEYS[3], paused = KEYS[4],
  ceilings = KEYS[5], inflight = KEYS[6], stats = KEYS[7], wake = KEYS[8]}
local jk, prefix, id = KEYS[9], ARGV[1], ARGV[2]
local lane = fence(jk, ARGV[3])
if type(lane) == 'number' then return lane end

leaveActive(Q, prefix, id, lane)
redis.call('HINCRBY', Q.stats, 'completed', 1)
local ttl = tonumber(ARGV[5])
if ttl > 0 then
  redis.call('HSET', jk, 'state', 'done', 'finished', nowMs(), 'result', ARGV[4])
  redis.call('PEXPIRE', jk, ttl)
else
  redis.call('DEL', jk)
end
joinRing(Q, lane, laneKey(prefix, lane))
return 1

--[[
  retry_dead: send dead jobs back to their lanes at their mint place, as if
  new: state pending, failures and lease expiries reset to 0 (the attempts
  counter, the fencing token, keeps counting; the errors list is kept), and
  a stop asked of an earlier attempt forgotten (`cancel`: else the new run
  would see it at once and stop again). A lane that becomes serviceable
  joins the ring. Works on the given ids, or
  on up to `limit` of one lane's dead jobs per call (the client loops).

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  dead      zset   dead job ids by time of death (ms)
  KEYS[4]  paused    set    paused lanes
  KEYS[5]  ceilings  hash   lane -> concurrency ceiling
  KEYS[6]  inflight  hash   lane -> jobs in flight
  KEYS[7]  depths    zset   lane -> pending depth
  KEYS[8]  stats     hash   queue counters
  KEYS[9]  wake      list   wake tokens for parked workers
  derived: <prefix>g:<lane>:pending and <prefix>g:<lane>:dead (zsets),
           <prefix>job:<id> (hash)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  lane      only this lane's dead jobs; '' for any lane (ids only)
  ARGV[3]  limit     with no ids: at most this many of the lane's dead jobs
  ARGV[4..] ids      the job ids; none means "the lane's dead jobs"

  Returns {retried, remaining}: remaining is the lane's dead jobs left
  (0 when no lane is given). Ids that are not dead jobs (of the lane) are
  skipped. Every key is checked before the first write (check.lua).
]]
-- @include "add_count"
-- @include "add_pending"
-- @include "check_q"
-- @include "dead_batch"
-- @include "drop_stale"
-- @include "join_ring"
-- @include "lane_dead_key"
-- @include "lane_key"

local Q = {ring = KEYS[1], onring = KEYS[2], dead = KEYS[3], paused = KEYS[4],
  ceilings = KEYS[5], inflight = KEYS[6], depths = KEYS[7], stats = KEYS[8],
  wake = KEYS[9]}
local prefix, lane = ARGV[1], ARGV[2]
checkQ(Q)
local batch, stale = deadBatch(Q, prefix, lane, tonumber(ARGV[3]), {unpack(ARGV, 4)})
dropStale(Q, prefix, lane, stale)
for _, job in ipairs(batch) do
  local id, jk, group, seq = job[1], job[2], job[3], job[4]
  local pendingKey = laneKey(prefix, group)
  redis.call('ZREM', Q.dead, id)
  redis.call('ZREM', laneDeadKey(prefix, group), id)
  redis.call('HSET', jk, 'state', 'pending', 'fails', 0, 'expiries', 0)
  redis.call('HDEL', jk, 'finished', 'cancel')
  addPending(Q, group, pendingKey, id, seq)
  joinRing(Q, group, pendingKey)
end
if #batch > 0 then addCount(Q.stats, 'revived', #batch, #batch) end
local remaining = 0
if lane ~= '' then remaining = redis.call('ZCARD', laneDeadKey(prefix, lane)) end
return {#batch, remaining}

--[[
  retry: record a claimed job's failure, fenced by its token. The job goes
  back to its lane (delay 0), to the schedule (delay > 0), or to the dead set
  when its failures reach its max attempts or the caller asks for it. The
  error is kept on the row either way.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  active    zset   claimed job ids by lease deadline (ms)
  KEYS[4]  schedule  zset   deferred job ids by due time (ms)
  KEYS[5]  dead      zset   dead job ids by time of death (ms)
  KEYS[6]  paused    set    paused lanes
  KEYS[7]  ceilings  hash   lane -> concurrency ceiling
  KEYS[8]  inflight  hash   lane -> jobs in flight
  KEYS[9]  depths    zset   lane -> pending depth
  KEYS[10] stats     hash   queue counters
  KEYS[11] wake      list   wake tokens for parked workers
  KEYS[12] job       hash   the job row
  derived: <prefix>g:<lane>:pending, <prefix>g:<lane>:active and
           <prefix>g:<lane>:dead (zsets) of the job's lane, <prefix>unique
           (hash, see includes/policies.lua: a dead job frees its unique key)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  id        the job id
  ARGV[3]  token     the attempt number the claim returned
  ARGV[4]  error     the error text (message and traceback) to keep
  ARGV[5]  delay_ms  back-off before the job is due again
  ARGV[6]  mode      'retry' (dead only when out of attempts) or 'dead' (dead now)

  The error is kept as `error` (the latest) and appended to `errors`, a JSON
  array of every failure's text.

  Returns {1, state} with state 'pending', 'scheduled' or 'dead',
  or -1 (no such job) / -2 (stale token); nothing changes then.
]]
-- @include "now_ms"
-- @include "item_keys"
-- @include "fence"
-- @include "inflight"
-- @include "pending"
-- @include "ring"
-- @include "policies"

local Q = {ring = KEYS[1], onring = KEYS[2], active = KEYS[3], schedule = KEYS[4],
  dead = KEYS[5], paused = KEYS[6], ceilings = KEYS[7], inflight = KEYS[8],
  depths = KEYS[9], stats = KEYS[10], wake = KEYS[11]}
local jk, prefix, id = KEYS[12], ARGV[1], ARGV[2]
local lane = fence(jk, ARGV[3])
if type(lane) == 'number' then return lane end

local now = nowMs()
leaveActive(Q, prefix, id, lane)
local fails = redis.call('HINCRBY', jk, 'fails', 1)
local max = tonumber(redis.call('HGET', jk, 'max') or '1')
local pendingKey = laneKey(prefix, lane)
-- A list that does not decode (a row edited by hand) starts over: the script
-- must not fail halfway, after the job has left the active set.
local ok, errors = pcall(cjson.decode, redis.call('HGET', jk, 'errors') or '[]')
if not ok or type(errors) ~= 'table' then errors = {} end
errors[#errors + 1] = ARGV[4]
redis.call('HSET', jk, 'errors', cjson.encode(errors))
local state
if ARGV[6] == 'dead' or fails >= max then
  state = 'dead'
  releaseUnique(prefix, jk, id)
  redis.call('HSET', jk, 'state', state, 'error', ARGV[4], 'finished', now)
  redis.call('ZADD', Q.dead, now, id)
  redis.call('ZADD', laneDeadKey(prefix, lane), now, id)
  redis.call('HINCRBY', Q.stats, 'dead', 1)
else
  local delay = tonumber(ARGV[5])
  redis.call('HINCRBY', Q.stats, 'retried', 1)
  if delay > 0 then
    state = 'scheduled'
    redis.call('HSET', jk, 'state', state, 'error', ARGV[4], 'due', now + delay)
    redis.call('ZADD', Q.schedule, now + delay, id)
  else
    state = 'pending'
    redis.call('HSET', jk, 'state', state, 'error', ARGV[4])
    addPending(Q, lane, pendingKey, id, redis.call('HGET', jk, 'seq'))
  end
end
joinRing(Q, lane, pendingKey)
return {1, state}

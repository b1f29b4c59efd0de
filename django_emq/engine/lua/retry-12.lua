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
  KEYS[8]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[9]  depths    zset   lane -> pending depth
  KEYS[10] stats     hash   queue counters
  KEYS[11] wake      list   wake tokens for parked workers
  KEYS[12] job       hash   the job row
  derived: <prefix>g:<lane>:pending, <prefix>g:<lane>:active and
           <prefix>g:<lane>:dead (zsets) of the job's lane, <prefix>unique
           (hash, see includes/policies.lua: a dead job frees its unique key),
           <prefix>timeshare and <prefix>weights (hashes, see
           includes/timeshare.lua: the attempt's run time is charged to its lane)

  history: the keys of includes/history.lua (the finished window and this minute's `dead` or `retry`),
           written with pcall: a damaged history key never fails the script

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  id        the job id
  ARGV[3]  token     the attempt number the claim returned
  ARGV[4]  error     the error text (message and traceback) to keep
  ARGV[5]  delay_ms  back-off before the job is due again
  ARGV[6]  mode      'retry' (dead only when out of attempts) or 'dead' (dead now)
  ARGV[7]  keep      how many of the latest errors the row keeps

  The error is kept as `error` (the latest) and appended to `errors`, a JSON
  array of the latest `keep` failures' texts; `errors_total` counts them all.
  The attempt ends 'f<n>' in `tries` (n: this failure's errors_total, see
  includes/tries.lua). Every key is checked before the first write (check.lua).

  Returns {1, state} with state 'pending', 'scheduled' or 'dead',
  or -1 (no such job) / -2 (stale token); nothing changes then.
]]
-- @include "add_count"
-- @include "add_pending"
-- @include "any_unique"
-- @include "check_lane"
-- @include "check_q"
-- @include "check_tenant_of"
-- @include "count_event"
-- @include "fence"
-- @include "finished_job"
-- @include "join_ring"
-- @include "lane_dead_key"
-- @include "lane_key"
-- @include "leave_active"
-- @include "now_ms"
-- @include "release_unique"
-- @include "ts_active"
-- @include "ts_settle_all"
-- @include "with_error"
-- @include "with_try"

local Q = {ring = KEYS[1], onring = KEYS[2], active = KEYS[3], schedule = KEYS[4],
  dead = KEYS[5], paused = KEYS[6], ceilings = KEYS[7], inflight = KEYS[8],
  depths = KEYS[9], stats = KEYS[10], wake = KEYS[11]}
local jk, prefix, id = KEYS[12], ARGV[1], ARGV[2]
local lane, tries = fence(jk, ARGV[3])
if type(lane) == 'number' then return lane end
-- reads and checks
checkQ(Q)
checkLane(prefix, lane)
checkTenantOf(prefix, lane)  -- [tenants]
local uniques = anyUnique(prefix)
local ts = tsActive(prefix)  -- @timeshare
local row = redis.call('HMGET', jk, 'fails', 'max', 'errors', 'errors_total', 'seq')
local fails = (tonumber(row[1]) or 0) + 1
local max = tonumber(row[2]) or 1
local errors, total = withError(row[3], row[4], ARGV[4], tonumber(ARGV[7]))
local pendingKey = laneKey(prefix, lane)
local now = nowMs()

-- writes
if ts then tsSettleAll(prefix, lane, {id}, now) end  -- @timeshare
leaveActive(Q, prefix, id, lane)
redis.call('HSET', jk, unpack(withTry({'fails', fails, 'errors', errors,
  'errors_total', total, 'error', ARGV[4]}, tries, now, 'f' .. total)))
local state
if ARGV[6] == 'dead' or fails >= max then
  state = 'dead'
  if uniques then releaseUnique(prefix, jk, id) end
  redis.call('HSET', jk, 'state', state, 'finished', now)
  redis.call('ZADD', Q.dead, now, id)
  redis.call('ZADD', laneDeadKey(prefix, lane), now, id)
  addCount(Q.stats, 'dead', 1, 1)
  finishedJob(prefix, id, now, 'dead')
else
  local delay = tonumber(ARGV[5])
  addCount(Q.stats, 'retried', 1, 1)
  countEvent(prefix, now, 'retry', 1)
  if delay > 0 then
    state = 'scheduled'
    redis.call('HSET', jk, 'state', state, 'due', now + delay)
    redis.call('ZADD', Q.schedule, now + delay, id)
  else
    state = 'pending'
    redis.call('HSET', jk, 'state', state)
    addPending(Q, lane, pendingKey, id, tonumber(row[5]) or 0)
  end
end
joinRing(Q, lane, pendingKey)
return {1, state}

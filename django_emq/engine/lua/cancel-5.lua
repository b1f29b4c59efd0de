--[[
  cancel: cancel a job that has not started, or ask a running one to stop.
  A pending job leaves its lane (a lane left empty stays on the ring until the
  next claim that lands on it drops it: no scan of the ring; two wake tokens
  are left, so a worker that parks after that empty turn is woken again), a
  scheduled one leaves the schedule; either is then `cancelled`: finished,
  with a JobCancelled error, kept like a result for ttl_ms. A running (active)
  job is only flagged (`cancel` = the time asked): the task reads the flag
  (django_emq.cancel_requested) and stops at a safe point of its own.
  Every key is checked before the first write (check.lua).

  KEYS[1]  schedule  zset   deferred job ids by due time (ms)
  KEYS[2]  depths    zset   lane -> pending depth
  KEYS[3]  stats     hash   queue counters
  KEYS[4]  job       hash   the job row
  KEYS[5]  wake      list   wake tokens for parked workers
  derived: <prefix>g:<lane>:pending (zset) of the job's lane, <prefix>unique
           (hash, see includes/policies.lua: a cancelled job frees its unique
           key, so the key can be enqueued again at once)
  history: the keys of includes/history.lua (the finished window and this
           minute's `cancel`), written with pcall

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  id        the job id
  ARGV[3]  ttl_ms    how long the cancelled row is kept; 0 deletes it now
  ARGV[4]  error     the error text to keep (JSON, as a failure's)
  ARGV[5]  keep      how many of the latest failures' texts the row keeps

  Returns 'cancelled' or 'requested' (asked again: 'requested' again),
  -1 (no such job) or -3 (finished already: done, dead or cancelled).
]]
-- @include "add_count"
-- @include "any_unique"
-- @include "check_q"
-- @include "expect_type"
-- @include "finished_job"
-- @include "guard"
-- @include "lane_key"
-- @include "now_ms"
-- @include "release_unique"
-- @include "removed_pending"
-- @include "wake"
-- @include "with_error"

local Q = {schedule = KEYS[1], depths = KEYS[2], stats = KEYS[3], wake = KEYS[5]}
local jk, prefix, id = KEYS[4], ARGV[1], ARGV[2]
-- reads and checks
local row = guard(jk, 'HMGET', jk, 'state', 'group', 'cancel', 'errors', 'errors_total')
local state, lane = row[1], row[2]
if not state then return -1 end
local now = nowMs()
if state == 'active' then
  if not row[3] then redis.call('HSET', jk, 'cancel', now) end
  return 'requested'
end
if state ~= 'pending' and state ~= 'scheduled' then return -3 end
checkQ(Q)
local pendingKey = lane and laneKey(prefix, lane)
if pendingKey then expectType(pendingKey, 'zset') end
local uniques = anyUnique(prefix)
local errors, total = withError(row[4], row[5], ARGV[4], tonumber(ARGV[5]))

-- writes
if state == 'pending' and pendingKey then
  if redis.call('ZREM', pendingKey, id) == 1 then
    removedPending(Q, lane, 1)
    if redis.call('ZCARD', pendingKey) == 0 then wake(Q, 2) end
  end
else
  redis.call('ZREM', Q.schedule, id)
end
if uniques then releaseUnique(prefix, jk, id) end
redis.call('HSET', jk, 'state', 'cancelled', 'error', ARGV[4], 'errors', errors,
  'errors_total', total, 'finished', now, 'cancel', now)
redis.call('HDEL', jk, 'due')
addCount(Q.stats, 'cancelled', 1, 1)
finishedJob(prefix, id, now, 'cancel')
local ttl = tonumber(ARGV[3])
if ttl > 0 then redis.call('PEXPIRE', jk, ttl) else redis.call('DEL', jk) end
return 'cancelled'

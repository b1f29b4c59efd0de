-- @include "item_keys"
-- @include "check"

-- Time-fair share (a queue with FAIRNESS "time"): deficit round robin over
-- worker time. A lane that lands at the ring's head gets one quantum (x its
-- weight) added to its credit; a lane with credit is served, each job charged
-- the lane's average run time, and keeps the head while its credit lasts (a
-- claim cut short leaves the rest of the turn for the next: no new quantum
-- then); a lane still in debt after its quantum rotates on unserved. When a
-- job's attempt ends (done, failed, retried, released, reaped) its lane pays
-- what it really used instead: the time from its claim to now, both on the
-- server clock.
-- derived: <prefix>timeshare (hash): '<lane>' -> the lane's credit in ms
--          (negative: its debt), '<lane>:avg' -> the moving average run time
--          of its jobs in ms, 'quantum' -> the queue's quantum in ms (the
--          largest lane average lately, at least TS_MIN_QUANTUM), 'head' ->
--          the lane whose turn a claim cut short (it goes on without a new
--          quantum while that lane is still at the head);
--          <prefix>weights (hash, read); on a claimed job's row, 'charge'
--          (the ms its claim charged) until the attempt is settled.
-- Bounds: -TS_DEBT x quantum x weight <= credit <= TS_MOST x quantum x
-- weight (a long job costs at most TS_DEBT quanta of debt; a turn starts with
-- at most one quantum carried over); a lane left idle (nothing pending,
-- nothing in flight) forgets its credit, debt and average, so an idle lane
-- hoards nothing and the hash holds only lanes with work; one claim skips at
-- most TS_SKIPS lanes in debt, then serves the lane it lands on (its quantum
-- added) whatever its credit: O(1) in lanes.

local TS_MIN_QUANTUM = 10
local TS_DEBT = 8
local TS_MOST = 2
local TS_SKIPS = 16
-- the quantum forgets 1/TS_DECAY of itself per settled job; a lane's average
-- moves 1/TS_ALPHA of the way to each job's run time
local TS_DECAY = 128
local TS_ALPHA = 8

local function tsKey(prefix)
  return prefix .. 'timeshare'
end

-- tsBound(credit, q, w): credit held within its bounds, a whole number of ms.
local function tsBound(credit, q, w)
  local most, least = TS_MOST * q * w, -TS_DEBT * q * w
  if credit > most then credit = most end
  if credit < least then credit = least end
  return math.floor(credit + 0.5)
end

-- timeShare(Q, prefix, fairness, weighted): the claim's time-share state when
-- the queue is time-fair (fairness 'time'), else nil (and no command run).
-- Reads only: checks the ring's and the timeshare hash's types first.
-- Q needs .ring, .weights.
local function timeShare(Q, prefix, fairness, weighted)
  if fairness ~= 'time' then return nil end
  local key = tsKey(prefix)
  checkQ(Q, {'ring'})
  local got = guard(key, 'HMGET', key, 'quantum', 'head')
  local q = tonumber(got[1]) or 0
  if q < TS_MIN_QUANTUM then q = TS_MIN_QUANTUM end
  return {Q = Q, key = key, q = q, weighted = weighted, skips = 0, head = got[2], saved = got[2]}
end

-- tsLand(ts): the lane at the ring's head to serve and how many jobs its
-- credit covers (at least 1); nil when the ring is empty. The lane whose turn
-- was cut short goes on with its credit; any other gets its quantum. Lanes in
-- debt even then rotate on (their credit written), at most TS_SKIPS per claim.
local function tsLand(ts)
  local Q = ts.Q
  while true do
    local lane = redis.call('LINDEX', Q.ring, 0)
    if not lane then return nil end
    local got = redis.call('HMGET', ts.key, lane, lane .. ':avg')
    local credit = tonumber(got[1]) or 0
    local est = tonumber(got[2])
    if not est or est < 1 then est = math.max(1, math.ceil(ts.q)) end  -- one job a landing
    local w = 1
    if ts.weighted then w = tonumber(redis.call('HGET', Q.weights, lane)) or 1 end
    if lane ~= ts.head then credit = credit + ts.q * w end  -- a new turn
    ts.head = nil  -- only the first lane a claim sees can go on with a turn
    credit = tsBound(credit, ts.q, w)  -- a credit kept from a larger quantum shrinks
    if credit > 0 or ts.skips >= TS_SKIPS then
      ts.lane, ts.credit, ts.est, ts.w = lane, credit, est, w
      if credit <= 0 then return lane, 1 end
      return lane, math.ceil(credit / est)
    end
    redis.call('HSET', ts.key, lane, credit)
    redis.call('LMOVE', Q.ring, Q.ring, 'LEFT', 'RIGHT')
    ts.skips = ts.skips + 1
  end
end

-- tsCharge(ts, prefix, out, taken): the last `taken` jobs of the claim reply
-- `out` (11 entries each), from the lane tsLand answered, are charged its
-- estimate each: the lane's credit drops, and each row keeps its charge.
local function tsCharge(ts, prefix, out, taken)
  for i = #out - 11 * taken + 1, #out, 11 do
    redis.call('HSET', jobKey(prefix, out[i]), 'charge', ts.est)
  end
  ts.credit = ts.credit - taken * ts.est
  redis.call('HSET', ts.key, ts.lane, tsBound(ts.credit, ts.q, ts.w))
end

-- tsTurn(ts, lane): the claim ends with `lane`'s turn cut short (it keeps the
-- head), or with no turn going on (lane nil).
local function tsTurn(ts, lane)
  if lane == ts.saved then return end
  if lane then
    redis.call('HSET', ts.key, 'head', lane)
  else
    redis.call('HDEL', ts.key, 'head')
  end
end

-- tsActive(prefix): whether the queue has time-share state (then ending
-- attempts settle their charges). Reads only: checks the timeshare and
-- weights hashes' types.
local function tsActive(prefix)
  local key = tsKey(prefix)
  if not inUse(key) then return false end
  expectType(prefix .. 'weights', 'hash')
  return true
end

-- tsSettle(prefix, lane, jk, now): the job's attempt ended: its lane pays the
-- time since the claim instead of the charge made then, and the lane's average
-- and the queue's quantum learn from it. A row without a charge (claimed while
-- the queue was count-fair, or settled already) changes nothing. Call it
-- before the row is rewritten or deleted; tsActive checked the keys.
local function tsSettle(prefix, lane, jk, now)
  local row = redis.call('HMGET', jk, 'charge', 'claimed')
  local charge = tonumber(row[1])
  if not charge then return end
  local used = math.max(0, now - (tonumber(row[2]) or now))
  local key = tsKey(prefix)
  local got = redis.call('HMGET', key, lane, lane .. ':avg', 'quantum')
  local avg = tonumber(got[2])
  if avg and avg >= 1 then avg = avg + (used - avg) / TS_ALPHA else avg = used end
  avg = math.max(1, math.floor(avg + 0.5))
  local q = tonumber(got[3]) or 0
  q = math.max(avg, q - q / TS_DECAY, TS_MIN_QUANTUM)
  local w = tonumber(redis.call('HGET', prefix .. 'weights', lane)) or 1
  local credit = tsBound((tonumber(got[1]) or 0) + charge - used, q, w)
  redis.call('HSET', key, lane, credit, lane .. ':avg', avg, 'quantum', string.format('%.2f', q))
  redis.call('HDEL', jk, 'charge')
end

-- tsForgetIdle(prefix, lane, inflightKey, leaving): once `leaving` of the
-- lane's in-flight jobs are settled, a lane with no other job in flight and
-- none pending forgets its time-share fields. Call it after tsSettle, before
-- the in-flight count drops. A pending set of the wrong type reads as busy.
local function tsForgetIdle(prefix, lane, inflightKey, leaving)
  if (tonumber(redis.call('HGET', inflightKey, lane)) or 0) > leaving then return end
  local depth = redis.pcall('ZCARD', laneKey(prefix, lane))
  if type(depth) ~= 'number' or depth > 0 then return end
  redis.call('HDEL', tsKey(prefix), lane, lane .. ':avg')
end

-- tsSettleAll(prefix, lane, ids, now, inflightKey): tsSettle for each of the
-- lane's jobs, then tsForgetIdle.
local function tsSettleAll(prefix, lane, ids, now, inflightKey)
  for _, id in ipairs(ids) do tsSettle(prefix, lane, jobKey(prefix, id), now) end
  tsForgetIdle(prefix, lane, inflightKey, #ids)
end

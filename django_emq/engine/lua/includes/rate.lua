-- @include "check"
-- @include "serviceable"
-- @include "tenants"

-- Rate limits: at most `count` jobs of a lane started in any `per` ms (a
-- sliding log, so no burst at a window's edge), on the server clock.
-- derived: <prefix>rates (hash: lane -> '<count>:<per_ms>'), <prefix>throttled
--          (zset: lane -> when its next start is allowed, ms) and
--          <prefix>g:<lane>:starts (list: the start times, ms, of the lane's
--          latest jobs, oldest first, at most `count` of them; it expires one
--          window after its newest start).
-- A lane whose log is full leaves the ring and waits in `throttled`; promote
-- (and a claim passing by) puts it back when its slot is due.

local function startsKey(prefix, lane)
  return prefix .. 'g:' .. lane .. ':starts'
end

-- rated(prefix, default): whether any lane of the queue may be rate-limited
-- (the queue has a default, or some lane its own). Checks the types of the
-- queue-wide rate keys (reads only).
local function rated(prefix, default)
  local own = inUse(prefix .. 'rates')
  if not own and default == '' then return false end
  expectType(prefix .. 'throttled', 'zset')
  return true
end

-- laneRate(prefix, lane, default): count, per_ms of the lane's limit (its own,
-- else the queue's '<count>:<per_ms>' default, '' for none), or nil.
local function laneRate(prefix, lane, default)
  local spec = redis.call('HGET', prefix .. 'rates', lane) or default
  local count, per = string.match(spec, '^(%d+):(%d+)$')
  if not count then return nil end
  return tonumber(count), tonumber(per)
end

-- rateRoom(prefix, lane, now, count, per): how many more jobs the lane may
-- start now. Starts that left the window are dropped on the way (each entry
-- is pushed once and dropped once: O(1) per job). Returns nil and
-- {key, error} when the lane's log holds the wrong type (nothing written).
local function rateRoom(prefix, lane, now, count, per)
  local key = startsKey(prefix, lane)
  local oldest = redis.pcall('LINDEX', key, 0)
  if type(oldest) == 'table' and oldest.err then return nil, {key, oldest.err} end
  while oldest and tonumber(oldest) <= now - per do
    redis.call('LPOP', key)
    oldest = redis.call('LINDEX', key, 0)
  end
  return count - redis.call('LLEN', key)
end

-- rateTaken(prefix, lane, now, count, per, n): record n starts now; when the
-- window is full, the lane is throttled until its oldest start leaves it.
-- Returns true when the lane is throttled (the caller takes it off the ring).
local function rateTaken(prefix, lane, now, count, per, n)
  local key = startsKey(prefix, lane)
  if n > 0 then
    local stamps = {}
    for i = 1, n do stamps[i] = now end
    redis.call('RPUSH', key, unpack(stamps))
    redis.call('LTRIM', key, -count, -1)
    redis.call('PEXPIRE', key, per)
  end
  if redis.call('LLEN', key) < count then return false end
  local due = tonumber(redis.call('LINDEX', key, 0)) + per
  redis.call('ZADD', prefix .. 'throttled', due, lane)
  return true
end

-- dueLanes(prefix, now, limit): the throttled lanes whose slot is due (at
-- most `limit`), each lane's pending set checked to be a sorted set. Reads
-- only: unthrottle() writes.
local function dueLanes(prefix, now, limit)
  local due = guard(prefix .. 'throttled', 'ZRANGEBYSCORE', prefix .. 'throttled', '-inf', now,
    'LIMIT', 0, limit)
  for _, lane in ipairs(due) do
    expectType(laneKey(prefix, lane), 'zset')
    checkTenantOf(prefix, lane)  -- [tenants] a tenanted lane rejoins its tenant's ring
  end
  return due
end

-- unthrottle(Q, prefix, lanes): the lanes leave `throttled` and rejoin the
-- ring when serviceable (a tenanted lane its tenant's). Returns how many
-- rejoined. Q needs .ring, .onring, .paused, .ceilings, .inflight.
local function unthrottle(Q, prefix, lanes)
  local joined = 0
  for _, lane in ipairs(lanes) do
    redis.call('ZREM', prefix .. 'throttled', lane)
    if redis.call('SISMEMBER', Q.onring, lane) == 0
        and serviceable(Q, lane, laneKey(prefix, lane)) then
      laneEnters(Q, lane)
      joined = joined + 1
    end
  end
  return joined
end

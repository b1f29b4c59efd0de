-- @include "serviceable"

-- Rate limits: at most `count` jobs of a lane started in any `per` ms (a
-- sliding log, so no burst at a window's edge), on the server clock.
-- derived: <prefix>rates (hash: lane -> '<count>:<per_ms>'), <prefix>throttled
--          (zset: lane -> when its next start is allowed, ms) and
--          <prefix>g:<lane>:starts (list: the start times, ms, of the lane's
--          latest jobs, oldest first, at most `count` of them).
-- A lane whose log is full leaves the ring and waits in `throttled`; promote
-- (and a claim passing by) puts it back when its slot is due.

local function startsKey(prefix, lane)
  return prefix .. 'g:' .. lane .. ':starts'
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
-- is pushed once and dropped once: O(1) per job).
local function rateRoom(prefix, lane, now, count, per)
  local key = startsKey(prefix, lane)
  local oldest = redis.call('LINDEX', key, 0)
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

-- unthrottleDue(Q, prefix, now, limit): lanes whose slot is due leave
-- `throttled` and rejoin the ring when serviceable (at most `limit` of them).
-- Returns how many lanes were due. Q needs .ring, .onring, .paused,
-- .ceilings, .inflight.
local function unthrottleDue(Q, prefix, now, limit)
  local due = redis.call('ZRANGEBYSCORE', prefix .. 'throttled', '-inf', now, 'LIMIT', 0, limit)
  for _, lane in ipairs(due) do
    redis.call('ZREM', prefix .. 'throttled', lane)
    local pendingKey = prefix .. 'g:' .. lane .. ':pending'
    if redis.call('SISMEMBER', Q.onring, lane) == 0 and serviceable(Q, lane, pendingKey) then
      redis.call('SADD', Q.onring, lane)
      redis.call('RPUSH', Q.ring, lane)
    end
  end
  return #due
end

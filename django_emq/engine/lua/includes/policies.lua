-- @include "item_keys"
-- @include "check"

-- Lane policies checked on enqueue and released where a job finishes.
-- derived: <prefix>maxdepth (hash: lane -> most pending jobs the lane may
--          hold), <prefix>unique (hash: '<lane>:<unique key>' -> the id
--          of the pending, scheduled or active job holding that key) and
--          <prefix>ticks (hash: schedule name -> its last enqueued tick, ms;
--          '<name>:job' -> that tick's job id).
-- The reads guard their keys (check.lua): a key of the wrong type aborts the
-- script before its first write.

-- laneFull(prefix, lane, pendingKey, default): the lane's max depth when its
-- pending set is at it (an enqueue would exceed it), else false. `default`
-- is the queue's max depth ('' for none), used when the lane sets none.
local function laneFull(prefix, lane, pendingKey, default)
  local key = prefix .. 'maxdepth'
  local max = tonumber(guard(key, 'HGET', key, lane) or default)
  if max and guard(pendingKey, 'ZCARD', pendingKey) >= max then return max end
  return false
end

-- uniqueHolder(prefix, lane, key): the id and row key of the unfinished job
-- holding the unique key on the lane, or false. A holder that has finished
-- (its row gone, done or dead) holds nothing.
local function uniqueHolder(prefix, lane, key)
  local hash = prefix .. 'unique'
  local holder = guard(hash, 'HGET', hash, lane .. ':' .. key)
  if not holder then return false end
  local jk = jobKey(prefix, holder)
  local state = guard(jk, 'HGET', jk, 'state')
  if state == 'pending' or state == 'scheduled' or state == 'active' then return holder, jk end
  return false
end

-- holdUnique(prefix, lane, key, id, jk): the job holds the lane's unique key.
-- Callers have checked the unique hash's type (uniqueHolder, or checkUnique).
local function holdUnique(prefix, lane, key, id, jk)
  redis.call('HSET', prefix .. 'unique', lane .. ':' .. key, id)
  redis.call('HSET', jk, 'uniq', key)
end

-- anyUnique(prefix): whether any job holds a unique key (most queues: none,
-- and then nothing finishing looks one up). A read that checks the hash's type.
local function anyUnique(prefix)
  return inUse(prefix .. 'unique')
end

-- releaseUnique(prefix, jk, id): a job that finishes (done, dead, drained,
-- moved away) frees the unique key it holds, if any. Call it while the row
-- still names its lane; the unique hash's type was checked (anyUnique). A
-- holder entry left by a row that could not be read is harmless: a holder
-- whose row is gone or finished holds nothing (uniqueHolder).
local function releaseUnique(prefix, jk, id)
  -- a row of the wrong type (drain deletes it all the same) holds nothing
  local row = redis.pcall('HMGET', jk, 'uniq', 'group')
  if row.err or not row[1] then return end
  local field = (row[2] or '') .. ':' .. row[1]
  if redis.call('HGET', prefix .. 'unique', field) == id then
    redis.call('HDEL', prefix .. 'unique', field)
  end
  redis.call('HDEL', jk, 'uniq')
end

-- lastTick(prefix, schedule): the schedule's last enqueued tick (ms), 0 for
-- none. A read that checks the hash's type.
local function lastTick(prefix, schedule)
  local key = prefix .. 'ticks'
  return tonumber(guard(key, 'HGET', key, schedule)) or 0
end

-- tickJob(prefix, schedule): the id of the job of the schedule's last tick.
local function tickJob(prefix, schedule)
  return redis.call('HGET', prefix .. 'ticks', schedule .. ':job') or ''
end

-- takeTick(prefix, schedule, tick, id): the tick is enqueued (as job id).
local function takeTick(prefix, schedule, tick, id)
  redis.call('HSET', prefix .. 'ticks', schedule, tick, schedule .. ':job', id)
end

-- @include "item_keys"

-- Lane policies checked on enqueue and released where a job finishes.
-- derived: <prefix>maxdepth (hash: lane -> most pending jobs the lane may
--          hold) and <prefix>unique (hash: '<lane>:<unique key>' -> the id
--          of the pending, scheduled or active job holding that key).

-- laneFull(prefix, lane, pendingKey, default): the lane's max depth when its
-- pending set is at it (an enqueue would exceed it), else false. `default`
-- is the queue's max depth ('' for none), used when the lane sets none.
local function laneFull(prefix, lane, pendingKey, default)
  local max = tonumber(redis.call('HGET', prefix .. 'maxdepth', lane) or default)
  if max and redis.call('ZCARD', pendingKey) >= max then return max end
  return false
end

-- uniqueHolder(prefix, lane, key): the id of the unfinished job holding the
-- unique key on the lane, or false. A holder that has finished (its row gone
-- or done or dead) holds nothing.
local function uniqueHolder(prefix, lane, key)
  local holder = redis.call('HGET', prefix .. 'unique', lane .. ':' .. key)
  if not holder then return false end
  local state = redis.call('HGET', jobKey(prefix, holder), 'state')
  if state == 'pending' or state == 'scheduled' or state == 'active' then return holder end
  return false
end

-- holdUnique(prefix, lane, key, id, jk): the job holds the lane's unique key.
local function holdUnique(prefix, lane, key, id, jk)
  redis.call('HSET', prefix .. 'unique', lane .. ':' .. key, id)
  redis.call('HSET', jk, 'uniq', key)
end

-- anyUnique(prefix): whether any job holds a unique key (most queues: none,
-- and then nothing finishing looks one up).
local function anyUnique(prefix)
  return redis.call('HLEN', prefix .. 'unique') > 0
end

-- releaseUnique(prefix, jk, id): a job that finishes (done, dead, drained,
-- moved away) frees the unique key it holds, if any.
local function releaseUnique(prefix, jk, id)
  local row = redis.call('HMGET', jk, 'uniq', 'group')
  if not row[1] then return end
  local field = (row[2] or '') .. ':' .. row[1]
  if redis.call('HGET', prefix .. 'unique', field) == id then
    redis.call('HDEL', prefix .. 'unique', field)
  end
  redis.call('HDEL', jk, 'uniq')
end

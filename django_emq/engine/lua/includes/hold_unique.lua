-- holdUnique(prefix, lane, key, id, jk): the job holds the lane's unique key.
-- Callers have checked the unique hash's type (uniqueHolder, or checkUnique).
local function holdUnique(prefix, lane, key, id, jk)
  redis.call('HSET', prefix .. 'unique', lane .. ':' .. key, id)
  redis.call('HSET', jk, 'uniq', key)
end

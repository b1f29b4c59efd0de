-- @include "index_policy"

-- holdUnique(prefix, lane, key, id, jk): the job holds the lane's unique key
-- (the policy index says the unique hash is in use: includes/check.lua).
-- Callers have checked the unique hash's type (uniqueHolder, or checkUnique).
local function holdUnique(prefix, lane, key, id, jk)
  redis.call('HSET', prefix .. 'unique', lane .. ':' .. key, id)
  redis.call('HSET', jk, 'uniq', key)
  indexPolicy(prefix, 'unique', nil, true)
end

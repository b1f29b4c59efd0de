-- @include "index_policy"

-- releaseUniqueOf(prefix, jk, id, uniq, lane): the job `id` of that lane frees
-- its unique key `uniq` (its row's `uniq`, read by the caller: releaseUnique,
-- or the completion's fence): the unique hash's entry goes when it still
-- names this job (the policy index follows when that empties the hash:
-- includes/check.lua), and the row's `uniq` goes.
local function releaseUniqueOf(prefix, jk, id, uniq, lane)
  local field = (lane or '') .. ':' .. uniq
  if redis.call('HGET', prefix .. 'unique', field) == id then
    redis.call('HDEL', prefix .. 'unique', field)
    indexPolicy(prefix, 'unique', nil, false)
  end
  redis.call('HDEL', jk, 'uniq')
end

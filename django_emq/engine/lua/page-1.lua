--[[
  page: the next members of a sorted set after a bound, for walks that must
  meet every member present throughout (engine/bulk.py). Members are ordered
  by (score, member bytes), as the set orders them; the bound need not be a
  member any more (a job claimed, finished or moved meanwhile), so members
  taken out before the bound never shift the page past any member. Reads
  only; about 2 log2 of the members sharing the bound's score steps (the
  commands the documented ACL grants: ZRANGE and ZRANGEBYSCORE).

  KEYS[1]  set     the sorted set walked

  ARGV[1]  count   most members returned (a positive integer)
  ARGV[2]  score   the bound's score as the set printed it, or '' to start
                   from the first member
  ARGV[3]  member  the bound's member (ignored when ARGV[2] is '')

  Returns member, score, member, score, ... (at most ARGV[1] pairs), the
  first ones after (ARGV[2], ARGV[3]); empty when none is.
]]
-- @include "bytes_after"

local key, count = KEYS[1], tonumber(ARGV[1])
local score, member = ARGV[2], ARGV[3]
if score == '' then
  return redis.call('ZRANGE', key, 0, count - 1, 'WITHSCORES')
end
-- the members of the bound's score, by offset; the first after the bound's
-- member is found by galloping, then halving (offsets below low are not after it)
local function tie(offset)
  return redis.call('ZRANGEBYSCORE', key, score, score, 'LIMIT', offset, 1)[1]
end
local low, step, high = 0, 1, nil
while high == nil do
  local at = tie(low + step - 1)
  if at == nil or bytesAfter(at, member) then
    high = low + step - 1
  else
    low, step = low + step, step * 2
  end
end
while low < high do
  local mid = math.floor((low + high) / 2)
  local at = tie(mid)
  if at == nil or bytesAfter(at, member) then high = mid else low = mid + 1 end
end
return redis.call('ZRANGEBYSCORE', key, score, '+inf', 'WITHSCORES', 'LIMIT', low, count)

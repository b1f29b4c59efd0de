-- member(key, id): whether id is in the sorted set key; a key of the wrong
-- type (reported on its own by the doctor) reads as "not a member".
local function member(key, id)
  local score = redis.pcall('ZSCORE', key, id)
  if type(score) == 'table' then return false end
  return score ~= false
end

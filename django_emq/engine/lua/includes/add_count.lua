-- addCount(key, field, n, fallback): HINCRBY key field n, returning the new
-- value. A field that holds no integer (edited by hand) is set to fallback
-- instead of failing the script halfway: a counter is mended, never a job lost.
-- fallback is a number, or a function computing it (called only then).
-- Callers have checked that key is a hash (check.lua).
local function addCount(key, field, n, fallback)
  local value = redis.pcall('HINCRBY', key, field, n)
  if type(value) == 'table' then
    value = fallback
    if type(value) == 'function' then value = value() end
    redis.call('HSET', key, field, value)
  end
  return value
end

-- @include "history"

-- counted(key, field, n, ttl): add n to hash field `field`; the key's TTL is
-- (re)set the first time this script call touches it.
local function counted(key, field, n, ttl)
  redis.pcall('HINCRBY', key, field, n)
  if not expiring[key] then
    expiring[key] = true
    redis.pcall('PEXPIRE', key, ttl)
  end
end

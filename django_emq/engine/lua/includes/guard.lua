-- @include "fail"

-- guard: documented in includes/check.lua.
local function guard(key, ...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then fail(key, reply.err) end
  return reply
end

--[[
  audit_ring: the doctor's check of the ring against the on-ring set and of
  the pending total against the depth index (reads only). A ring (or a depth
  index) longer than `limit` is only counted, so the call stays O(limit).

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  depths    zset   lane -> pending depth
  KEYS[4]  stats     hash   queue counters
  derived: <prefix>tenants (hash), <prefix>t:<tenant>:ring (lists; see
           includes/tenants.lua): the on-ring set also holds the lanes on
           their tenants' rings, which count as on the ring there

  ARGV[1]  limit     read the ring and the index whole only up to this size

  Returns {ring length, on-ring size, duplicates, not in the on-ring set,
  in the on-ring set but not on the ring, sum of the depth index (-1 when
  too long), pending total, tenanted lanes on the top ring}; the lists are
  flat arrays of lanes. The on-ring size counts only what belongs on the top
  ring (the lanes on their tenants' rings are left out).
]]
local limit = tonumber(ARGV[1])
local function read(...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then return nil end
  return reply
end
local length = read('LLEN', KEYS[1]) or -1
local size = read('SCARD', KEYS[2]) or -1
local duplicates, unknown, absent, misplaced = {}, {}, {}, {}
local tenants = string.sub(KEYS[2], 1, -7) .. 'tenants'
local inner = {} -- tenant -> set of the lanes on its ring (read once each)
local function onTenantRing(lane)
  local tenant = read('HGET', tenants, lane)
  if not tenant then return false end
  if not inner[tenant] then
    inner[tenant] = {}
    local key = string.sub(KEYS[2], 1, -7) .. 't:' .. tenant .. ':ring'
    for _, member in ipairs(read('LRANGE', key, 0, limit) or {}) do inner[tenant][member] = true end
  end
  return inner[tenant][lane] == true
end
if length >= 0 and size >= 0 and length <= limit and size <= limit then
  local seen = {}
  for _, lane in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
    if seen[lane] then duplicates[#duplicates + 1] = lane end
    seen[lane] = true
    if redis.call('SISMEMBER', KEYS[2], lane) == 0 then unknown[#unknown + 1] = lane end
    if read('HEXISTS', tenants, lane) == 1 then misplaced[#misplaced + 1] = lane end
  end
  for _, lane in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    if not seen[lane] then
      if onTenantRing(lane) then size = size - 1 else absent[#absent + 1] = lane end
    end
  end
end
if length > limit or size > limit then
  if (read('HLEN', tenants) or 0) > 0 then size = -1 end -- its tenants' rings are not read
end
local sum = -1
local lanes = read('ZCARD', KEYS[3])
if lanes and lanes <= limit then
  sum = 0
  local scores = redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES')
  for i = 2, #scores, 2 do sum = sum + tonumber(scores[i]) end
end
local total = read('HGET', KEYS[4], 'pending') or '0'
return {length, size, duplicates, unknown, absent, sum, total, misplaced}

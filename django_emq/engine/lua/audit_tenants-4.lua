--[[
  audit_tenants: the doctor's check of one tenant (reads only): its ring holds
  only lanes recorded under it, each once and each in the on-ring set; its
  entry '@<tenant>' is on the top ring exactly when it can be served (a lane
  on its ring, headroom under its ceiling); its in-flight count is the sum of
  its lanes' (includes/tenants.lua).

  KEYS[1]  onring    set    lanes and tenant entries on a ring
  KEYS[2]  ceilings  hash   lane or '@<tenant>' -> concurrency ceiling
  KEYS[3]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[4]  tenants   hash   lane -> its tenant
  derived: <prefix>t:<tenant>:ring (list), <prefix>g:<lane>:active (zset: a
           lane's jobs in flight)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  tenant    the tenant id (validated by the caller)
  ARGV[3..] lanes    every lane the doctor found recorded under the tenant

  Keys of the wrong type are skipped (the doctor reports them with the keys).
  Returns a flat array of (tenant, what, detail) triples.
]]
local prefix, tenant = ARGV[1], ARGV[2]
local entry = '@' .. tenant
local out = {}
local function read(...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then return nil end
  return reply
end
local function report(what, detail)
  out[#out + 1] = tenant; out[#out + 1] = what; out[#out + 1] = detail
end
local members = read('LRANGE', prefix .. 't:' .. tenant .. ':ring', 0, -1) or {}
local seen = {}
for _, lane in ipairs(members) do
  if seen[lane] then report('tenant-ring', lane .. ' twice on its ring') end
  seen[lane] = true
  if read('SISMEMBER', KEYS[1], lane) ~= 1 then report('tenant-ring', lane .. ' not in the on-ring set') end
  if read('HGET', KEYS[4], lane) ~= tenant then report('tenant-ring', lane .. ' is not its lane') end
end
local sum = 0
for i = 3, #ARGV do
  if read('HGET', KEYS[4], ARGV[i]) == tenant then
    sum = sum + (read('ZCARD', prefix .. 'g:' .. ARGV[i] .. ':active') or 0)
  end
end
local counted = read('HGET', KEYS[3], entry)
if (tonumber(counted) or 0) ~= sum or (counted and sum == 0) then
  report('tenant-inflight', 'the count says ' .. tostring(counted) .. ', its lanes hold ' .. sum)
end
local ceiling = tonumber(read('HGET', KEYS[2], entry))
local open = #members > 0 and not (ceiling and (tonumber(counted) or 0) >= ceiling)
local onRing = read('SISMEMBER', KEYS[1], entry) == 1
if open and not onRing then report('tenant-entry', 'can be served but is not on the ring') end
if onRing and not open then report('tenant-entry', 'on the ring but cannot be served') end
return out

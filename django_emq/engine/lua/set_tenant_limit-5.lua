--[[
  set_tenant_limit: set or remove a tenant's concurrency ceiling: at most that
  many jobs of its lanes in flight together. A tenant at or over its new
  ceiling leaves the top ring (its in-flight jobs run on); one given headroom
  rejoins it. Lane control: may LREM the top ring.

  KEYS[1]  ring      list   serviceable lanes and tenant entries, in rotation order
  KEYS[2]  onring    set    lanes and tenant entries on a ring
  KEYS[3]  ceilings  hash   lane or '@<tenant>' -> concurrency ceiling
  KEYS[4]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[5]  wake      list   wake tokens for parked workers
  derived: <prefix>t:<tenant>:ring (list, includes/tenants.lua),
           <prefix>policies (hash, the policy index: includes/check.lua)

  ARGV[1]  tenant    the tenant id (validated by the caller)
  ARGV[2]  ceiling   a positive integer, or '' to remove the ceiling

  Every key is checked before the first write. Returns 1.
]]
-- @include "check_q"
-- @include "expect_type"
-- @include "index_policy"
-- @include "policy_indexed"
-- @include "prefix_of_q"
-- @include "tenant_refresh"
-- @include "tenant_ring_key"
-- @include "wake"

local Q = {ring = KEYS[1], onring = KEYS[2], ceilings = KEYS[3], inflight = KEYS[4],
  wake = KEYS[5]}
local tenant = ARGV[1]
local prefix = prefixOfQ(Q)
checkQ(Q)
expectType(tenantRingKey(prefix, tenant), 'list')
policyIndexed(prefix)  -- the index follows (includes/check.lua)
if ARGV[2] == '' then
  redis.call('HDEL', Q.ceilings, '@' .. tenant)
else
  redis.call('HSET', Q.ceilings, '@' .. tenant, ARGV[2])
end
indexPolicy(prefix, 'ceilings', '@' .. tenant, ARGV[2] ~= '')
if tenantRefresh(Q, prefix, tenant) then wake(Q, 1) end
return 1

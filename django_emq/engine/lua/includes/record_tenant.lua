-- @include "index_policy"
-- @include "lane_active_key"
-- @include "tenant_of"
-- @include "tenants"

-- recordTenant(Q, prefix, lane, tenant): an enqueue names the lane's tenant
-- ('' keeps the recorded one). The record changes only while the lane is idle
-- (on no ring, nothing in flight): a busy lane keeps its tenant until it has
-- drained, so no ring is ever scanned (an active set of the wrong type reads
-- as busy); the policy index follows (includes/check.lua). Q needs .onring.
local function recordTenant(Q, prefix, lane, tenant)
  if tenant == '' then return end
  local recorded = tenantOf(prefix, lane)
  if recorded == tenant then return end
  if redis.call('SISMEMBER', Q.onring, lane) == 1 then return end
  local active = redis.pcall('ZCARD', laneActiveKey(prefix, lane))
  if type(active) ~= 'number' or active > 0 then return end
  redis.call('HSET', prefix .. 'tenants', lane, tenant)
  indexPolicy(prefix, 'tenants', lane, true)
  tenantsSeen = true
  tenantMemo[lane] = tenant
end

-- @include "check_tenant_ring"
-- @include "guard"
-- @include "lane_active_key"
-- @include "prefix_of_q"
-- @include "tenant_of"

-- willJoin(Q, lane, pendingKey, depth, inflightDrop): for the hot paths, which
-- read first and write last: whether the lane must join the ring once the
-- script's writes are done. Reads only, each the first touch of its key
-- (guarded: a key of the wrong type aborts the script before any write).
-- depth is the lane's depth after the writes (nil: read it); inflightDrop how
-- many of its in-flight jobs the writes finish. The caller then checks
-- .ring and .wake and calls enterRing. The lane's tenant is looked up (and
-- its ring's type checked when the lane joins it).
-- Q needs .onring (the queue's prefix is read from it), .paused, .ceilings;
-- derived: <prefix>throttled, the rate-limited lanes; a capped lane's in-flight
-- count is the size of its active set (derived: <prefix>g:<lane>:active).
local function willJoin(Q, lane, pendingKey, depth, inflightDrop)
  local prefix = prefixOfQ(Q)
  local tenant = tenantOf(prefix, lane)  -- [tenants]
  if guard(Q.onring, 'SISMEMBER', Q.onring, lane) == 1 then return false end
  if depth == nil then depth = guard(pendingKey, 'ZCARD', pendingKey) end
  if depth <= 0 then return false end
  if guard(Q.paused, 'SISMEMBER', Q.paused, lane) == 1 then return false end
  local ceiling = tonumber(guard(Q.ceilings, 'HGET', Q.ceilings, lane))
  if ceiling then
    local laneActive = laneActiveKey(prefix, lane)
    local inflight = guard(laneActive, 'ZCARD', laneActive)
    if inflight - inflightDrop >= ceiling then return false end
  end
  -- a rate-limited lane waiting for its next slot (includes/rate.lua)
  local throttled = prefix .. 'throttled'
  if guard(throttled, 'ZSCORE', throttled, lane) then return false end
  if tenant then checkTenantRing(prefix, tenant) end  -- [tenants] it joins that ring
  return true
end

-- @include "check"
-- @include "serviceable"
-- @include "wake"
-- @include "tenants"

-- joinRing(Q, lane, pendingKey): put the lane at the tail of the ring if it is
-- serviceable and not already there, and wake one parked worker. O(1): the
-- on-ring set answers membership, the ring list is never scanned. A tenanted
-- lane joins its tenant's ring (includes/tenants.lua; the script's read phase
-- called checkTenantOf for the lane).
-- Q needs .ring, .onring, .paused, .ceilings, .inflight, .wake.
local function joinRing(Q, lane, pendingKey)
  if redis.call('SISMEMBER', Q.onring, lane) == 1 then return false end
  if not serviceable(Q, lane, pendingKey) then return false end
  laneEnters(Q, lane)
  wake(Q, 1)
  return true
end

-- willJoin(Q, lane, pendingKey, depth, inflightDrop): for the hot paths, which
-- read first and write last: whether the lane must join the ring once the
-- script's writes are done. Reads only, each the first touch of its key
-- (guarded: a key of the wrong type aborts the script before any write).
-- depth is the lane's depth after the writes (nil: read it); inflightDrop how
-- many of its in-flight jobs the writes finish. The caller then checks
-- .ring and .wake and calls enterRing. The lane's tenant is looked up (and
-- its ring's type checked when the lane joins it).
-- Q needs .onring, .paused, .ceilings, .inflight; pendingKey locates the
-- queue's throttled set (derived: <prefix>throttled).
local function willJoin(Q, lane, pendingKey, depth, inflightDrop)
  local tenant = tenantOf(prefixOfQ(Q), lane)  -- [tenants]
  if guard(Q.onring, 'SISMEMBER', Q.onring, lane) == 1 then return false end
  if depth == nil then depth = guard(pendingKey, 'ZCARD', pendingKey) end
  if depth <= 0 then return false end
  if guard(Q.paused, 'SISMEMBER', Q.paused, lane) == 1 then return false end
  local ceiling = tonumber(guard(Q.ceilings, 'HGET', Q.ceilings, lane))
  if ceiling then
    local inflight = tonumber(guard(Q.inflight, 'HGET', Q.inflight, lane)) or 0
    if inflight - inflightDrop >= ceiling then return false end
  end
  -- a rate-limited lane waiting for its next slot (includes/rate.lua)
  local throttled = string.sub(pendingKey, 1, -(#lane + 11)) .. 'throttled'
  if guard(throttled, 'ZSCORE', throttled, lane) then return false end
  if tenant then checkTenantRing(prefixOfQ(Q), tenant) end  -- [tenants] it joins that ring
  return true
end

-- enterRing(Q, lane): the lane joins its ring's tail (willJoin said so) and one
-- parked worker is woken. Q needs .ring, .onring, .ceilings, .inflight, .wake.
local function enterRing(Q, lane)
  laneEnters(Q, lane)
  wake(Q, 1)
end

-- refreshRing(Q, lane, pendingKey): make the lane's ring membership match its
-- serviceability, in either direction. Leaving the ring from an arbitrary
-- position costs an LREM over the ring, so only lane-control operations
-- (pause, ceiling, drain, move) call this; the hot paths never do.
local function refreshRing(Q, lane, pendingKey)
  if serviceable(Q, lane, pendingKey) then
    return joinRing(Q, lane, pendingKey)
  end
  laneLeaves(Q, lane)
  return false
end

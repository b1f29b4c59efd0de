-- @include "check"
-- @include "counter"
-- @include "wake"

-- Tenant lanes: two levels of rotation (docs/tenants.md). A lane may belong to
-- a tenant (a tenant id is validated like a lane id). The top ring holds the
-- untenanted lanes and one entry '@<tenant>' per tenant that can be served;
-- each tenant has its own ring of its serviceable lanes. A claim that lands
-- on a tenant's entry serves the lane at the head of the tenant's ring. '@'
-- is never part of a lane id, so no lookup tells a lane from an entry.
--
-- derived: <prefix>tenants          hash: lane -> its tenant (recorded by enqueue)
--          <prefix>t:<tenant>:ring  list: the tenant's serviceable lanes, in
--                                   rotation order
--          <prefix>tturns           hash: tenant -> '<lane> <credit>': the rest
--                                   of the weighted turn of the lane at the head
--                                   of the tenant's ring, when a claim cut it short
-- The entry '@<tenant>' also stands for the tenant in the lanes' own keys:
-- ring and onring (the entry, while the tenant can be served: a lane on its
-- ring and headroom under its ceiling), weights (its weight: jobs per turn of
-- the top ring), ceilings (its ceiling: its lanes' jobs in flight together)
-- and inflight (its lanes' jobs in flight together). onring holds every lane
-- on a ring, the top one or its tenant's.
--
-- A script calls checkTenantOf (or anyTenants) in its read phase for every
-- lane it may put on or take off a ring: the writes below assume the types.

local tenantsSeen = nil -- whether the queue has tenanted lanes (read once a script)
local tenantMemo = {}    -- lane -> its tenant, or false (read once a script)
local ringChecked = {}   -- tenant -> true once its ring's type is checked
local cappedMemo = {}    -- tenant -> whether it has a ceiling (read once a script)

local function isEntry(name)
  return string.byte(name, 1) == 64 -- '@'
end

local function tenantRingKey(prefix, tenant)
  return prefix .. 't:' .. tenant .. ':ring'
end

-- prefixOfQ(Q): the queue's key prefix, from Q.onring ('<prefix>onring').
local function prefixOfQ(Q)
  return string.sub(Q.onring, 1, -7)
end

-- anyTenants(prefix): whether any lane of the queue has a tenant. The first
-- call reads the tenants hash (guarded): make it in the read phase.
local function anyTenants(prefix)
  if tenantsSeen == nil then
    tenantsSeen = inUse(prefix .. 'tenants')
  end
  return tenantsSeen
end

-- tenantOf(prefix, lane): the lane's tenant, or nil.
local function tenantOf(prefix, lane)
  if not anyTenants(prefix) then return nil end
  local known = tenantMemo[lane]
  if known == nil then
    known = redis.call('HGET', prefix .. 'tenants', lane) or false
    tenantMemo[lane] = known
  end
  return known or nil
end

-- checkTenantRing(prefix, tenant): read phase: the tenant's ring is a list
-- (or absent); checked once a script.
local function checkTenantRing(prefix, tenant)
  if ringChecked[tenant] then return end
  expectType(tenantRingKey(prefix, tenant), 'list')
  ringChecked[tenant] = true
end

-- tenantCapped(Q, tenant): whether the tenant has a ceiling (guarded: the
-- first call checks the ceilings hash's type).
local function tenantCapped(Q, tenant)
  local known = cappedMemo[tenant]
  if known == nil then
    known = guard(Q.ceilings, 'HEXISTS', Q.ceilings, '@' .. tenant) == 1
    cappedMemo[tenant] = known
  end
  return known
end

-- checkTenantOf(prefix, lane, tenant): read phase: the lane's recorded tenant
-- (returned, or nil) and `tenant` (one an enqueue may record; nil or '' for
-- none) have rings of the right type.
local function checkTenantOf(prefix, lane, tenant)
  local recorded = tenantOf(prefix, lane)
  if recorded then checkTenantRing(prefix, recorded) end
  if tenant and tenant ~= '' and tenant ~= recorded then
    expectType(prefix .. 'tenants', 'hash')
    checkTenantRing(prefix, tenant)
  end
  return recorded
end

-- recordTenant(Q, prefix, lane, tenant): an enqueue names the lane's tenant
-- ('' keeps the recorded one). The record changes only while the lane is idle
-- (on no ring, nothing in flight): a busy lane keeps its tenant until it has
-- drained, so no ring is ever scanned. Q needs .onring, .inflight.
local function recordTenant(Q, prefix, lane, tenant)
  if tenant == '' then return end
  local recorded = tenantOf(prefix, lane)
  if recorded == tenant then return end
  if redis.call('SISMEMBER', Q.onring, lane) == 1 then return end
  if (tonumber(redis.call('HGET', Q.inflight, lane)) or 0) > 0 then return end
  redis.call('HSET', prefix .. 'tenants', lane, tenant)
  tenantsSeen = true
  tenantMemo[lane] = tenant
end

-- tenantOpen(Q, prefix, tenant): whether the tenant's entry belongs on the top
-- ring: a lane on its ring, and headroom under its ceiling.
-- Q needs .ceilings, .inflight.
local function tenantOpen(Q, prefix, tenant)
  if redis.call('LLEN', tenantRingKey(prefix, tenant)) == 0 then return false end
  local entry = '@' .. tenant
  local ceiling = tonumber(redis.call('HGET', Q.ceilings, entry))
  if ceiling then
    return (tonumber(redis.call('HGET', Q.inflight, entry)) or 0) < ceiling
  end
  return true
end

-- tenantJoin(Q, prefix, tenant): the tenant's entry joins the top ring's tail
-- when it belongs there and is not there yet; returns true when it joined.
-- Q needs .ring, .onring, .ceilings, .inflight.
local function tenantJoin(Q, prefix, tenant)
  local entry = '@' .. tenant
  if redis.call('SISMEMBER', Q.onring, entry) == 1 then return false end
  if not tenantOpen(Q, prefix, tenant) then return false end
  redis.call('SADD', Q.onring, entry)
  redis.call('RPUSH', Q.ring, entry)
  return true
end

-- tenantRefresh(Q, prefix, tenant): the entry's place on the top ring matches
-- tenantOpen, either way (leaving costs an LREM over the top ring: lane
-- control only). Q needs .ring, .onring, .ceilings, .inflight.
local function tenantRefresh(Q, prefix, tenant)
  if tenantOpen(Q, prefix, tenant) then return tenantJoin(Q, prefix, tenant) end
  local entry = '@' .. tenant
  if redis.call('SREM', Q.onring, entry) == 1 then redis.call('LREM', Q.ring, 1, entry) end
  return false
end

-- laneEnters(Q, lane): the lane (serviceable, on no ring) joins the tail of
-- its ring: its tenant's (whose entry then joins the top ring if it can), or
-- the top ring. Q needs .ring, .onring, .ceilings, .inflight.
local function laneEnters(Q, lane)
  local prefix = prefixOfQ(Q)
  redis.call('SADD', Q.onring, lane)
  local tenant = tenantOf(prefix, lane)
  if not tenant then
    redis.call('RPUSH', Q.ring, lane)
    return
  end
  redis.call('RPUSH', tenantRingKey(prefix, tenant), lane)
  tenantJoin(Q, prefix, tenant)
end

-- laneLeaves(Q, lane): the lane leaves its ring from wherever it is (an LREM:
-- lane control only); a tenant whose ring it empties leaves the top ring.
-- Q needs .ring, .onring.
local function laneLeaves(Q, lane)
  if redis.call('SREM', Q.onring, lane) == 0 then return end
  local prefix = prefixOfQ(Q)
  local tenant = tenantOf(prefix, lane)
  if not tenant then
    redis.call('LREM', Q.ring, 1, lane)
    return
  end
  local ring = tenantRingKey(prefix, tenant)
  redis.call('LREM', ring, 1, lane)
  if redis.call('LLEN', ring) == 0 and redis.call('SREM', Q.onring, '@' .. tenant) == 1 then
    redis.call('LREM', Q.ring, 1, '@' .. tenant)
  end
end

-- tenantFreed(Q, prefix, lane, n): n of the lane's jobs left the active set;
-- its tenant's in-flight count drops with the lane's, and a tenant that was
-- at its ceiling may rejoin the top ring (a worker is woken then).
-- Q needs .inflight, .ceilings; .ring, .onring, .wake to rejoin (the read
-- phase called tenantCapped, and checkTenantRing when it answered true).
local function tenantFreed(Q, prefix, lane, n)
  local tenant = tenantOf(prefix, lane)
  if not tenant then return end
  local entry = '@' .. tenant
  if addCount(Q.inflight, entry, -n, 0) <= 0 then redis.call('HDEL', Q.inflight, entry) end
  if Q.ring and tenantCapped(Q, tenant) and tenantJoin(Q, prefix, tenant) then
    wake(Q, 1)
  end
end

-- tenantPick(Q, prefix, entry, credit, weighted, capped): a claim landed on a
-- tenant's entry with `credit` jobs of the top ring's turn: the tenant's lane
-- to serve and how many of its jobs (bounded by the tenant's headroom and the
-- lane's own turn). Returns lane, credit, ctx; lane is the entry itself with
-- credit 0 when the tenant cannot be served (at its ceiling, or its ring
-- empty: the entry then leaves), or nil and {key, error} when the tenant's
-- ring or tturns holds the wrong type (nothing written but the rings'
-- rotation). Unweighted, the tenant's ring
-- rotates one step (LMOVE) and its lane is then at the tail, as on the top
-- ring; weighted, its head lane keeps serving while its turn has credit
-- (tturns keeps a turn cut short). Q needs .ceilings, .inflight, .weights.
local function tenantPick(Q, prefix, entry, credit, weighted, capped)
  local tenant = string.sub(entry, 2)
  local ctx = {tenant = tenant, entry = entry, top = credit, ring = tenantRingKey(prefix, tenant)}
  if capped then
    ctx.ceiling = tonumber(redis.call('HGET', Q.ceilings, entry))
    if ctx.ceiling then
      local room = ctx.ceiling - (tonumber(redis.call('HGET', Q.inflight, entry)) or 0)
      if room <= 0 then return entry, 0, ctx end
      if room < credit then credit = room end
    end
  end
  local lane
  if weighted then
    lane = redis.pcall('LINDEX', ctx.ring, 0)
  else
    lane = redis.pcall('LMOVE', ctx.ring, ctx.ring, 'LEFT', 'RIGHT')
  end
  if type(lane) == 'table' and lane.err then return nil, nil, {ctx.ring, lane.err} end
  if not lane then
    ctx.empty = true
    return entry, 0, ctx
  end
  ctx.lane = lane
  local inner = 1
  if weighted then
    inner = tonumber(redis.call('HGET', Q.weights, lane)) or 1
    local saved = redis.pcall('HGET', prefix .. 'tturns', tenant)
    if type(saved) == 'table' and saved.err then return nil, nil, {prefix .. 'tturns', saved.err} end
    if saved then
      ctx.saved = true
      local savedLane, savedCredit = string.match(saved, '^(%S+) (%d+)$')
      savedCredit = tonumber(savedCredit)
      if savedLane == lane and savedCredit and savedCredit > 0 and savedCredit < inner then
        inner = savedCredit
      end
    end
  end
  ctx.inner = inner
  if inner < credit then credit = inner end
  return lane, credit, ctx
end

-- tenantDone(Q, prefix, ctx, taken, leaves, weighted, more): after the turn of
-- the tenant's lane (taken jobs; `leaves`: the lane is no longer serviceable),
-- the tenant's ring and in-flight count follow. Returns what the top ring's
-- turn goes on with: whether the entry leaves the top ring, the credit left
-- of the tenant's turn, the entry, and whether the same claim serves the
-- tenant again at once (weighted, credit left, `more`: the claim may go on).
-- Q needs .onring, .inflight.
local function tenantDone(Q, prefix, ctx, taken, leaves, weighted, more)
  local lane = ctx.lane
  if taken > 0 then addCount(Q.inflight, ctx.entry, taken, taken) end
  local empty = ctx.empty or false
  if lane and leaves then
    if weighted then redis.call('LPOP', ctx.ring) else redis.call('RPOP', ctx.ring) end
    redis.call('SREM', Q.onring, lane)
    if ctx.saved then redis.call('HDEL', prefix .. 'tturns', ctx.tenant) end
    empty = redis.call('LLEN', ctx.ring) == 0
  elseif lane and weighted then
    if ctx.inner - taken > 0 then
      redis.call('HSET', prefix .. 'tturns', ctx.tenant, lane .. ' ' .. (ctx.inner - taken))
    else
      redis.call('LMOVE', ctx.ring, ctx.ring, 'LEFT', 'RIGHT')
      if ctx.saved then redis.call('HDEL', prefix .. 'tturns', ctx.tenant) end
    end
  end
  local full = false
  if ctx.ceiling then
    full = (tonumber(redis.call('HGET', Q.inflight, ctx.entry)) or 0) >= ctx.ceiling
  end
  local out = empty or full
  local left = ctx.top - taken
  return out, left, ctx.entry, weighted and more and not out and left > 0 and taken > 0
end

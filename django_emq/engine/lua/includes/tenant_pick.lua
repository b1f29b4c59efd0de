-- @include "tenant_ring_key"

-- tenantPick(Q, prefix, entry, credit, weighted, capped): a claim landed on a
-- tenant's entry with `credit` jobs of the top ring's turn: the tenant's lane
-- to serve and how many of its jobs (bounded by the tenant's headroom and the
-- lane's own turn). Returns lane, credit, ctx; lane is the entry itself with
-- credit 0 when the tenant cannot be served (at its ceiling, or its ring
-- empty: the entry then leaves), or nil and {key, error} when the tenant's
-- ring or tturns (or the ceilings or weights hash) holds the wrong type (nothing written but the rings'
-- rotation). Unweighted, the tenant's ring
-- rotates one step (LMOVE) and its lane is then at the tail, as on the top
-- ring; weighted, its head lane keeps serving while its turn has credit
-- (tturns keeps a turn cut short). Q needs .ceilings, .inflight, .weights.
local function tenantPick(Q, prefix, entry, credit, weighted, capped)
  local tenant = string.sub(entry, 2)
  local ctx = {tenant = tenant, entry = entry, top = credit, ring = tenantRingKey(prefix, tenant)}
  if capped then
    local ceiling = redis.pcall('HGET', Q.ceilings, entry)
    if type(ceiling) == 'table' then return nil, nil, {Q.ceilings, ceiling.err} end
    ctx.ceiling = tonumber(ceiling)
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
    local weight = redis.pcall('HGET', Q.weights, lane)
    if type(weight) == 'table' then return nil, nil, {Q.weights, weight.err} end
    inner = tonumber(weight) or 1
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

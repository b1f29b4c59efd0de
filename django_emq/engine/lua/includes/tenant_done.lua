-- @include "add_count"

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

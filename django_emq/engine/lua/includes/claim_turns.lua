-- @include "add_count"
-- @include "any_tenants"
-- @include "check_q"
-- @include "due_lanes"
-- @include "expect_type"
-- @include "guard"
-- @include "in_use"
-- @include "index_policy"
-- @include "is_entry"
-- @include "lane_active_key"
-- @include "lane_key"
-- @include "lane_marks"
-- @include "lane_rate"
-- @include "marked"
-- @include "now_ms"
-- @include "rate_room"
-- @include "rate_taken"
-- @include "rated"
-- @include "take_turn"
-- @include "tenant_done"
-- @include "tenant_pick"
-- @include "time_share"
-- @include "ts_charge"
-- @include "ts_land"
-- @include "ts_turn"
-- @include "unthrottle"
-- @include "wrong_kind"


-- claimTurns(Q, prefix, leaseMs, turns, worker, limit, keep, rate, fairness): take up to
-- `turns` turns of the ring, at most `limit` jobs in all. Returns the flat
-- claim reply (see claim-10.lua) and, when a lane's own key held the wrong
-- type (or a key a turn met on a policy's behalf: a policy hash a lane's
-- lookup read, the tenants' in-flight counts, the throttled set), {key,
-- error} of that key (nil otherwise); the caller decides whether that fails
-- the call (see claim-10.lua).
--
-- A turn rotates the ring one step (LMOVE) and serves the lane it lands on; a
-- lane left empty or at its ceiling leaves from the tail (RPOP). With weights
-- a lane of weight w is served w jobs per turn, however many claims that
-- takes: a lane whose turn has credit left when the claim ends goes back to
-- the head (LMOVE from the tail) and keeps it (the hash Q.turn holds the lane
-- and credit of a turn cut short). A turn saved for a lane that is no longer
-- at the head is ignored. (A lane without a weight of its own costs a
-- weighted queue what it costs any other: one LMOVE.)
--
-- A job whose lease has expired before (its worker died or froze running it:
-- maybe because of it) ends the claim: nothing is claimed after it, so if it
-- kills this worker too it takes no prefetched job with it (its lane keeps
-- the rest of its turn).
--
-- Keys are checked before the first write (check.lua). A lane's own keys
-- (its pending set, its active set, its jobs' rows) are only known once the
-- ring lands on it: a turn reads them first and puts back what it popped when
-- one holds the wrong type, and the claim ends there.
-- `keep`: how many of the latest claimers' ids a row keeps in `workers`.
-- Each turn's pops, reads and writes: includes/take_turn.lua.
--
-- Rate limits (includes/rate.lua; `rate` is the queue's default per lane,
-- '<count>:<per_ms>' or ''): due throttled lanes rejoin the ring first; a
-- rate-limited lane's turn serves no more than its window allows, and a lane
-- whose window is full leaves the ring for `throttled`, as an empty one does.
-- Time-fair share (includes/timeshare.lua; `fairness` 'time', else ''): the
-- lane at the head is picked by its credit of worker time instead (lanes in
-- debt rotate on unserved), served as many jobs as its credit covers, and
-- charged for them; the `turn` hash is not used then. (Tenants are refused on
-- a time-fair queue by Queue.enqueue: a tenant's entry met here is served,
-- charged as one entry, and never refunded, see docs/time-fair.md.)
-- Tenants (includes/tenants.lua): a turn that lands on a tenant's entry
-- serves the lane its own ring turns to, and the tenant's ring follows; the
-- top ring then treats the entry as it treats a lane. An entry tells itself
-- apart by its mark: a queue without tenants pays nothing for them.
-- A lane served through its tenant's entry whose field of the policy index
-- names no tenant (given one by a process that keeps no index) gets its
-- letter here (indexPolicy), so its completions count the tenant's jobs down:
-- where '*' names no tenant, or ceilings are in use (the lane's field is read
-- then; without a ceiling the count limits no one, and emq_doctor recounts it).
-- A lane's in-flight count is the size of its active set (a capped lane's
-- is read with ZCARD; the queue's inflight hash counts tenants' jobs only).
-- A lane's own settings (weight, ceiling, rate) are looked up only when its
-- field of the policy index names them (includes/check.lua: one read of the
-- lane's field, and none when no lane has any): a lane without a policy pays
-- nothing for other lanes'. A policy hash of the wrong type, met by such a
-- lookup, ends the claim as a lane's own key does.
-- Q needs .ring, .onring, .active, .paused, .ceilings, .weights, .inflight
-- (tenants), .depths, .stats, .turn.
local function claimTurns(Q, prefix, leaseMs, turns, worker, limit, keep, rate, fairness)
  -- Most queues set no weights or ceilings: then no turn looks them up.
  local weighted = inUse(Q.weights)
  local capped = inUse(Q.ceilings)
  -- (one by one, not checkQ's list: no table on every call)
  expectType(Q.onring, 'set')
  expectType(Q.active, 'zset')
  expectType(Q.stats, 'hash')
  local tenants = anyTenants(prefix)
  local limited = rated(prefix, rate)
  local ts = timeShare(Q, prefix, fairness, weighted)  -- @timeshare: nil unless time-fair
  if ts and weighted then checkQ(Q, {'weights'}) end  -- @timeshare: read by tsLand
  if ts then weighted = false end
  -- whether any lane has a setting of its own a turn looks up (the index says)
  local ownRates = limited and inUse(prefix .. 'rates')
  local indexed = weighted or capped or ownRates
  -- The depth index is checked by its first touch, a turn's (takeTurn; a turn
  -- that pops nothing removes the lane from it), where nothing but the ring's
  -- rotation is written before: not where a policy may write first (a due
  -- throttled lane, a tenant's ring, time credit) or end a turn before it
  -- takes a job (a ceiling, a rate limit). Those check it first (once a call:
  -- a turn that touched it, or the check, marks it checked).
  if ts then checkQ(Q, {'depths'}) end
  local dueNow = {}
  -- throttled lanes due again (the index says whether any lane is throttled)
  if limited and inUse(prefix .. 'throttled', 'ZCARD') then
    dueNow = dueLanes(prefix, nowMs(), turns)
  end
  if #dueNow > 0 then
    -- the first write comes before any turn: check what the turns may read
    checkQ(Q, {'ring', 'paused', 'depths'})
    if tenants then checkQ(Q, {'inflight'}) end
    if weighted then checkQ(Q, {'weights'}) end
    if capped then checkQ(Q, {'ceilings'}) end
    if ownRates then expectType(prefix .. 'rates', 'hash') end
  end
  local savedLane, savedCredit = nil, 0
  -- a weighted turn cut short is saved (the index says whether one is)
  if weighted and inUse(Q.turn) then
    local saved = guard(Q.turn, 'HMGET', Q.turn, 'lane', 'credit')
    savedLane, savedCredit = saved[1], tonumber(saved[2]) or 0
  end
  local claimed = 0
  local now = nowMs()
  local deadline = now + leaseMs
  local out = {}
  -- the claim's state for each turn (includes/take_turn.lua); `leases` holds
  -- deadline, id pairs for the active set, added CHUNK pairs at a time: one
  -- ZADD for a worker's claim, and never more than unpack() can spread.
  local C = {prefix = prefix, now = now, deadline = deadline, worker = worker, keep = keep,
    depths = Q.depths, leases = {}, out = out}
  local CHUNK = 1000

  if #dueNow > 0 then unthrottle(Q, prefix, dueNow) end  -- the first write
  local turnLane, turnCredit = nil, 0 -- the last turn, when it was cut short
  local suspect, broken = false, nil
  for turn = 1, turns do
    if claimed >= limit or suspect then break end
    local lane, credit
    if ts then
      lane, credit = tsLand(ts)  -- @timeshare: credit is the jobs its time credit covers
      if not lane then break end
    else
      if turn == 1 then
        lane = guard(Q.ring, 'LMOVE', Q.ring, Q.ring, 'LEFT', 'RIGHT')
      else
        lane = redis.call('LMOVE', Q.ring, Q.ring, 'LEFT', 'RIGHT')
      end
      if not lane then break end
      credit = 1
      if weighted then
        if marked(laneMarks(prefix, lane), 'weights') then
          local weight = redis.pcall('HGET', Q.weights, lane)
          if type(weight) == 'table' then
            broken = {Q.weights, weight.err}
            break
          end
          credit = tonumber(weight) or 1
        end
        if lane == savedLane and savedCredit > 0 and savedCredit < credit then
          credit = savedCredit
        end
        savedLane = nil
      end
    end
    -- [tenants] a tenant's entry: serve the lane its ring turns to
    local tenantTurn = nil
    if isEntry(lane) then
      checkQ(Q, {'depths'})  -- its ring and count are written before a turn
      broken = wrongKind(Q.inflight, 'hash')  -- its count, read and written
      if broken then break end
      lane, credit, tenantTurn = tenantPick(Q, prefix, lane, credit, weighted, capped)
      if not lane then
        broken = tenantTurn
        break
      end
    end
    local pendingKey = laneKey(prefix, lane)
    local k = credit
    if limit - claimed < k then k = limit - claimed end
    local marks = ''
    if indexed then marks = laneMarks(prefix, lane) end
    local ceiling, inflight = nil, 0
    if capped and marked(marks, 'ceilings') then
      ceiling = redis.pcall('HGET', Q.ceilings, lane)
      if type(ceiling) == 'table' then
        broken = {Q.ceilings, ceiling.err}
        break
      end
      ceiling = tonumber(ceiling)
      if ceiling then
        -- the lane's in-flight count: its active set's size
        local laneActive = laneActiveKey(prefix, lane)
        inflight = redis.pcall('ZCARD', laneActive)
        if type(inflight) == 'table' then
          broken = {laneActive, inflight.err}
          break
        end
        if ceiling - inflight < k then k = ceiling - inflight end
      end
    end
    local count, per, bad
    if limited then count, per, bad = laneRate(prefix, lane, rate, marked(marks, 'rates')) end
    if bad then
      broken = bad
      break
    end
    -- this turn may end before it takes a job (or a rate log be trimmed):
    -- the depth index is checked first (see above)
    if ceiling or count then checkQ(Q, {'depths'}) end
    if count then
      broken = wrongKind(prefix .. 'throttled', 'zset')  -- a full window writes it
      if broken then break end
      local room, bad = rateRoom(prefix, lane, now, count, per)
      if room == nil then
        broken = bad
        break
      end
      if room < k then k = room end
    end
    local left = 0
    if k > 0 then
      local taken, flag, after = takeTurn(C, lane, pendingKey, k)
      if taken == nil then
        broken = flag
        break
      end
      if #C.leases >= 2 * CHUNK then
        redis.call('ZADD', Q.active, unpack(C.leases))
        C.leases = {}
      end
      suspect = flag
      if taken == 0 then  -- the index said too many
        local gone = redis.pcall('ZREM', Q.depths, lane)
        if type(gone) == 'table' then
          broken = {Q.depths, gone.err}
          break
        end
      end
      TYPE_CHECKED[Q.depths] = true  -- the turn touched it: no check needed
      if taken > 0 then
        if ts then tsCharge(ts, prefix, out, taken) end  -- @timeshare
        claimed = claimed + taken
        credit = credit - taken
        inflight = inflight + taken
        -- The depth index answers what is left (takeTurn took the jobs from
        -- it); an index that says nothing is left is checked against the lane
        -- itself before the lane leaves (and mended if it was wrong).
        left = after
        if left <= 0 then
          redis.call('ZREM', Q.depths, lane)
          left = redis.call('ZCARD', pendingKey)
          if left > 0 then redis.call('ZADD', Q.depths, left, lane) end
        end
      end
      k = taken
    end
    local throttled = count and rateTaken(prefix, lane, now, count, per, math.max(k, 0))
    local leaves = left <= 0 or (ceiling and inflight >= ceiling) or k <= 0 or throttled
    -- [tenants] the tenant's ring follows; from here on `lane` is the tenant's entry
    local again = false
    if tenantTurn then
      if k > 0 and POLICY_FLAGS ~= nil and (not tenants or (capped and not marked(marks, 'tenants'))) then
        -- served through its tenant's entry, counted into the tenant's jobs
        -- in flight, but the index names no tenant for it (a process that
        -- keeps no index gave it one): the index follows the tenants hash,
        -- so the lane's completions count them down (tenantOf). Asked where
        -- it costs no read: '*' names no tenant, or the lane's field was
        -- read (capped: the count limits a tenant only under a ceiling).
        indexPolicy(prefix, 'tenants', lane)
        tenantsSeen, tenantMemo[lane] = nil, nil
      end
      leaves, credit, lane, again = tenantDone(Q, prefix, tenantTurn, math.max(k, 0), leaves,
        weighted, claimed < limit and not suspect)
      turnLane = nil
    end
    if ts then
      if leaves then  -- @timeshare: the lane is at the head (tsLand)
        redis.call('LPOP', Q.ring)
        redis.call('SREM', Q.onring, lane)
      elseif credit <= 0 then
        redis.call('LMOVE', Q.ring, Q.ring, 'LEFT', 'RIGHT')
      else
        turnLane, turnCredit = lane, credit
        break
      end
    elseif leaves then
      -- The lane is at the tail now: leave with RPOP when it is no longer serviceable.
      redis.call('RPOP', Q.ring)
      redis.call('SREM', Q.onring, lane)
    elseif not weighted then
      -- its turn is done: it stays at the tail
    elseif again then
      -- [tenants] the tenant's turn goes on with its next lane, in this claim:
      -- back to the head, where the next turn lands
      redis.call('LMOVE', Q.ring, Q.ring, 'RIGHT', 'LEFT')
      savedLane, savedCredit, turnLane, turnCredit = lane, credit, lane, credit
    elseif credit > 0 then
      -- cut short (by the limit or a suspect): the lane goes back to the head
      -- and keeps the rest of its turn, for the next claim
      redis.call('LMOVE', Q.ring, Q.ring, 'RIGHT', 'LEFT')
      turnLane, turnCredit = lane, credit
      break
    end
  end
  if #C.leases > 0 then redis.call('ZADD', Q.active, unpack(C.leases)) end
  if ts and not broken then tsTurn(ts, turnLane) end  -- @timeshare: whose turn goes on
  if ts and not inUse(ts.key) then indexPolicy(prefix, 'timeshare') end  -- @timeshare
  -- a claim that ends on a broken key with nothing claimed fails: the saved
  -- turn stays as it was (nothing but the ring's rotation is written)
  if weighted and not (broken and claimed == 0) then
    if turnLane then
      -- unread (none was saved): a value of the wrong type is replaced
      local set = redis.pcall('HSET', Q.turn, 'lane', turnLane, 'credit', turnCredit)
      if type(set) == 'table' then
        redis.call('DEL', Q.turn)
        redis.call('HSET', Q.turn, 'lane', turnLane, 'credit', turnCredit)
      end
      if not inUse(Q.turn) then indexPolicy(prefix, 'turn', nil, true) end
    elseif savedCredit > 0 then
      redis.call('DEL', Q.turn)
      indexPolicy(prefix, 'turn', nil, false)
    end
  end
  if claimed > 0 then
    addCount(Q.stats, 'pending', -claimed, 0)
    -- after the jobs, what a first attempt's entry leaves out (claim-10.lua)
    out[#out + 1], out[#out + 2], out[#out + 3] = deadline, now, worker
  end
  return out, broken
end

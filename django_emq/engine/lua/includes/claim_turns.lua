-- @include "add_count"
-- @include "any_tenants"
-- @include "check_q"
-- @include "due_lanes"
-- @include "guard"
-- @include "in_use"
-- @include "is_entry"
-- @include "job_key"
-- @include "lane_active_key"
-- @include "lane_key"
-- @include "lane_rate"
-- @include "now_ms"
-- @include "rate_room"
-- @include "rate_taken"
-- @include "rated"
-- @include "tenant_done"
-- @include "tenant_pick"
-- @include "time_share"
-- @include "tries_of"
-- @include "ts_charge"
-- @include "ts_land"
-- @include "ts_turn"
-- @include "unthrottle"


-- claimTurns(Q, prefix, leaseMs, turns, worker, limit, keep, rate, fairness): take up to
-- `turns` turns of the ring, at most `limit` jobs in all. Returns the flat
-- claim reply (11 entries per job, see claim-10.lua) and, when a lane's own
-- key held the wrong type, {key, error} of that key (nil otherwise); the
-- caller decides whether that fails the call (see claim-10.lua).
--
-- Without weights a turn rotates the ring one step (LMOVE) and serves the lane
-- it lands on; a lane left empty or at its ceiling leaves from the tail (RPOP).
-- With weights a lane of weight w is served w jobs per turn, however many
-- claims that takes: the lane at the head keeps serving while its turn has
-- credit left (the hash Q.turn holds the lane and credit of a turn cut short),
-- and rotates (LMOVE) once its turn is done, or leaves from the head (LPOP).
-- A turn saved for a lane that is no longer at the head is ignored.
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
-- A lane's in-flight count is the size of its active set (a capped lane's
-- is read with ZCARD; the queue's inflight hash counts tenants' jobs only).
-- Q needs .ring, .onring, .active, .paused, .ceilings, .weights, .inflight
-- (tenants), .depths, .stats, .turn.
local function claimTurns(Q, prefix, leaseMs, turns, worker, limit, keep, rate, fairness)
  -- Most queues set no weights or ceilings: then no turn looks them up.
  local weighted = inUse(Q.weights)
  local capped = inUse(Q.ceilings)
  checkQ(Q, {'onring', 'active', 'depths', 'stats'})
  if anyTenants(prefix) then checkQ(Q, {'inflight'}) end  -- [tenants] their counts
  local limited = rated(prefix, rate)
  local ts = timeShare(Q, prefix, fairness, weighted)  -- @timeshare: nil unless time-fair
  if ts then weighted = false end
  local dueNow = {}
  if limited then
    checkQ(Q, {'ring', 'paused'})
    dueNow = dueLanes(prefix, nowMs(), turns)
  end
  local savedLane, savedCredit = nil, 0
  if weighted then
    local saved = guard(Q.turn, 'HMGET', Q.turn, 'lane', 'credit')
    savedLane, savedCredit = saved[1], tonumber(saved[2]) or 0
  end
  local claimed = 0
  local now = nowMs()
  local deadline = now + leaseMs
  local out = {}
  -- deadline, id pairs for the active set, added CHUNK pairs at a time: one ZADD
  -- for a worker's claim, and never more than unpack() can spread.
  local leases, CHUNK = {}, 1000
  local function addLeases()
    if #leases > 0 then
      redis.call('ZADD', Q.active, unpack(leases))
      leases = {}
    end
  end

  -- recent(list, id): the comma-separated worker ids with id added, the last
  -- `keep` kept (the job's attempts counter says how many claims there were).
  local function recent(list, id)
    if not list or list == '' then return id end
    local ids = {}
    for w in string.gmatch(list, '[^,]+') do ids[#ids + 1] = w end
    ids[#ids + 1] = id
    local from = math.max(1, #ids - keep + 1)
    return table.concat(ids, ',', from)
  end

  -- takeTurn(lane, pendingKey, k): pop up to k of the lane's jobs, read their
  -- rows, then write. Returns (taken, suspect), or nil and the corrupt key's
  -- error when a key of the lane holds the wrong type (nothing of the turn is
  -- written then: what was popped is put back at its place).
  local function takeTurn(lane, pendingKey, k)
    local popped = redis.pcall('ZPOPMIN', pendingKey, k)
    if popped.err then return nil, {pendingKey, popped.err} end
    local laneActive = laneActiveKey(prefix, lane)
    local rows, keys, suspect, n = {}, {}, false, 0
    for i = 1, #popped, 2 do
      local jk = jobKey(prefix, popped[i])
      -- One read and one write of the row per job (the hot path's cost): the
      -- read takes what the reply returns, and the row's lane and place.
      local row = redis.pcall('HMGET', jk, 'task', 'args', 'kwargs', 'enq', 'attempts',
        'expiries', 'group', 'seq')
      if row.err then
        for j = 1, #popped, 2 do redis.call('ZADD', pendingKey, popped[j + 1], popped[j]) end
        return nil, {jk, row.err}
      end
      n = n + 1
      rows[n], keys[n] = row, jk
      -- A job whose lease expired before ends the claim: the rest of the turn
      -- goes back, in its mint places.
      if (tonumber(row[6]) or 0) > 0 then
        suspect = true
        for j = i + 2, #popped, 2 do redis.call('ZADD', pendingKey, popped[j + 1], popped[j]) end
        break
      end
    end
    if n == 0 then return 0, false end
    local mine = {}
    for j = 1, n do
      mine[2 * j - 1] = now
      mine[2 * j] = popped[2 * j - 1]
    end
    local added = redis.pcall('ZADD', laneActive, unpack(mine))
    if type(added) == 'table' and added.err then
      for j = 1, #popped, 2 do redis.call('ZADD', pendingKey, popped[j + 1], popped[j]) end
      return nil, {laneActive, added.err}
    end
    for j = 1, n do
      local id, row, jk = popped[2 * j - 1], rows[j], keys[j]
      local token = (tonumber(row[5]) or 0) + 1
      local fields = {'attempts', token, 'state', 'active', 'claimed', now, 'worker', worker}
      local workers, started = worker, now
      -- a first start's wait is recorded by the caller (record_history-2.lua)
      if token ~= 1 then
        -- a job claimed before: its attempt history is written out (a first
        -- attempt's is the row's worker and claimed, see tries.lua)
        local past = redis.call('HMGET', jk, 'workers', 'worker', 'tries', 'started', 'claimed')
        workers, started = recent(past[1] or past[2], worker), past[4] or past[5] or now
        fields[9], fields[10] = 'workers', workers
        fields[11], fields[12] = 'started', started
        fields[13], fields[14] = 'tries', recent(triesOf(past[3], past[5], past[1]), now)
      end
      -- group and seq are written when the row lost them (edited by hand): it
      -- still settles and returns to its lane, at the place it was popped from.
      if row[7] ~= lane or row[8] ~= popped[2 * j] then
        fields[#fields + 1], fields[#fields + 2] = 'group', lane
        fields[#fields + 1], fields[#fields + 2] = 'seq', popped[2 * j]
      end
      redis.call('HSET', jk, unpack(fields))
      leases[#leases + 1] = deadline
      leases[#leases + 1] = id
      if #leases >= 2 * CHUNK then addLeases() end
      local o = #out
      out[o + 1] = id; out[o + 2] = lane; out[o + 3] = token; out[o + 4] = row[1]
      out[o + 5] = row[2]; out[o + 6] = row[3]; out[o + 7] = row[4]; out[o + 8] = deadline
      out[o + 9] = workers; out[o + 10] = started; out[o + 11] = tonumber(row[6]) or 0
    end
    return n, suspect
  end

  if #dueNow > 0 then unthrottle(Q, prefix, dueNow) end  -- the first write
  local turnLane, turnCredit = nil, 0 -- the last turn, when it was cut short
  local suspect, broken = false, nil
  for turn = 1, turns do
    if claimed >= limit or suspect then break end
    local lane, credit
    if ts then
      lane, credit = tsLand(ts)  -- @timeshare: credit is the jobs its time credit covers
      if not lane then break end
    elseif weighted then
      lane = guard(Q.ring, 'LINDEX', Q.ring, 0)
      if not lane then break end
      credit = tonumber(redis.call('HGET', Q.weights, lane)) or 1
      if lane == savedLane and savedCredit > 0 and savedCredit < credit then
        credit = savedCredit
      end
      savedLane = nil
    else
      if turn == 1 then
        lane = guard(Q.ring, 'LMOVE', Q.ring, Q.ring, 'LEFT', 'RIGHT')
      else
        lane = redis.call('LMOVE', Q.ring, Q.ring, 'LEFT', 'RIGHT')
      end
      if not lane then break end
      credit = 1
    end
    -- [tenants] a tenant's entry: serve the lane its ring turns to
    local tenantTurn = nil
    if isEntry(lane) then
      lane, credit, tenantTurn = tenantPick(Q, prefix, lane, credit, weighted, capped)
      if not lane then
        broken = tenantTurn
        break
      end
    end
    local pendingKey = laneKey(prefix, lane)
    local k = credit
    if limit - claimed < k then k = limit - claimed end
    local ceiling, inflight = nil, 0
    if capped then
      ceiling = tonumber(redis.call('HGET', Q.ceilings, lane))
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
    local count, per
    if limited then count, per = laneRate(prefix, lane, rate) end
    if count then
      local room, bad = rateRoom(prefix, lane, now, count, per)
      if room == nil then
        broken = bad
        break
      end
      if room < k then k = room end
    end
    local left = 0
    if k > 0 then
      local taken, flag = takeTurn(lane, pendingKey, k)
      if taken == nil then
        broken = flag
        break
      end
      suspect = flag
      if taken == 0 then redis.call('ZREM', Q.depths, lane) end  -- the index said too many
      if taken > 0 then
        if ts then tsCharge(ts, prefix, out, taken) end  -- @timeshare
        claimed = claimed + taken
        credit = credit - taken
        inflight = inflight + taken
        -- The depth index answers what is left; an index that says nothing is
        -- left is checked against the lane itself before the lane leaves (and
        -- mended if it was wrong).
        left = tonumber(redis.call('ZINCRBY', Q.depths, -taken, lane))
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
      leaves, credit, lane, again = tenantDone(Q, prefix, tenantTurn, math.max(k, 0), leaves,
        weighted, claimed < limit and not suspect)
      turnLane = nil
    end
    if not weighted and not ts then
      -- The lane is at the tail now: leave with RPOP when it is no longer serviceable.
      if leaves then
        redis.call('RPOP', Q.ring)
        redis.call('SREM', Q.onring, lane)
      end
    elseif leaves then
      redis.call('LPOP', Q.ring)
      redis.call('SREM', Q.onring, lane)
    elseif again then
      -- [tenants] the tenant's turn goes on with its next lane, in this claim
      savedLane, savedCredit, turnLane, turnCredit = lane, credit, lane, credit
    elseif credit > 0 then
      -- cut short (by the limit or a suspect): the lane keeps the head and the
      -- rest of its turn, for the next claim
      turnLane, turnCredit = lane, credit
      break
    else
      redis.call('LMOVE', Q.ring, Q.ring, 'LEFT', 'RIGHT')
    end
  end
  addLeases()
  if ts and not broken then tsTurn(ts, turnLane) end  -- @timeshare: whose turn goes on
  if weighted then
    if turnLane then
      redis.call('HSET', Q.turn, 'lane', turnLane, 'credit', turnCredit)
    elseif savedCredit > 0 then
      redis.call('DEL', Q.turn)
    end
  end
  if claimed > 0 then
    addCount(Q.stats, 'pending', -claimed, 0)
  end
  return out, broken
end

-- @include "now_ms"
-- @include "item_keys"

-- claimTurns(Q, prefix, leaseMs, turns, worker, limit): take up to `turns`
-- turns of the ring, at most `limit` jobs in all; returns the flat reply of
-- the claim script (11 entries per job, see claim-10.lua).
--
-- Without weights a turn rotates the ring one step (LMOVE) and serves the lane
-- it lands on; a lane left empty or at its ceiling leaves from the tail (RPOP).
-- With weights a lane of weight w is served w jobs per turn, however many
-- claims that takes: the lane at the head keeps serving while its turn has
-- credit left (the hash Q.turn holds the lane and credit of a turn cut short),
-- and rotates (LMOVE) once its turn is done, or leaves from the head (LPOP).
-- A turn saved for a lane that is no longer at the head is ignored.
--
-- A job whose lease has expired before (its worker died or froze running it)
-- ends the claim: nothing is claimed after it, so if it kills this worker too
-- it takes no prefetched job with it (its lane keeps the rest of its turn).
-- Q needs .ring, .onring, .active, .ceilings, .weights, .inflight, .depths,
-- .stats, .turn.
local function claimTurns(Q, prefix, leaseMs, turns, worker, limit)
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
  -- Most queues set no weights or ceilings: then no turn looks them up.
  local weighted = redis.call('HLEN', Q.weights) > 0
  local capped = redis.call('HLEN', Q.ceilings) > 0
  local savedLane, savedCredit = nil, 0
  if weighted then
    local saved = redis.call('HMGET', Q.turn, 'lane', 'credit')
    savedLane, savedCredit = saved[1], tonumber(saved[2]) or 0
  end
  local turnLane, turnCredit = nil, 0 -- the last turn, when it was cut short

  local suspect = false
  for _ = 1, turns do
    if claimed >= limit or suspect then break end
    local lane, credit
    if weighted then
      lane = redis.call('LINDEX', Q.ring, 0)
      if not lane then break end
      credit = tonumber(redis.call('HGET', Q.weights, lane) or '1')
      if lane == savedLane and savedCredit > 0 and savedCredit < credit then
        credit = savedCredit
      end
      savedLane = nil
    else
      lane = redis.call('LMOVE', Q.ring, Q.ring, 'LEFT', 'RIGHT')
      if not lane then break end
      credit = 1
    end
    local pendingKey = laneKey(prefix, lane)
    local k = credit
    if limit - claimed < k then k = limit - claimed end
    local ceiling, inflight = nil, 0
    if capped then
      ceiling = redis.call('HGET', Q.ceilings, lane)
      if ceiling then
        ceiling = tonumber(ceiling)
        inflight = tonumber(redis.call('HGET', Q.inflight, lane) or '0')
        if ceiling - inflight < k then k = ceiling - inflight end
      end
    end
    local left = 0
    if k > 0 then
      local popped = redis.call('ZPOPMIN', pendingKey, k)
      local mine = {}
      if #popped == 0 then redis.call('ZREM', Q.depths, lane) end  -- the index said too many
      for i = 1, #popped, 2 do
        local id = popped[i]
        local jk = jobKey(prefix, id)
        -- One read and one write of the row per job (the hot path's cost).
        local row = redis.call('HMGET', jk, 'task', 'args', 'kwargs', 'enq', 'workers', 'started',
          'attempts', 'expiries')
        local expiries = tonumber(row[8]) or 0
        if expiries > 0 then suspect = true end
        local token = (tonumber(row[7]) or 0) + 1
        local workers = worker
        if row[5] and row[5] ~= '' then workers = row[5] .. ',' .. worker end
        if not row[6] then row[6] = now end
        -- group and seq are rewritten from where the job was popped: a row that
        -- lost them (edited by hand) still settles and returns to its lane.
        redis.call('HSET', jk, 'attempts', token, 'state', 'active', 'claimed', now,
          'worker', worker, 'workers', workers, 'started', row[6], 'group', lane,
          'seq', popped[i + 1])
        leases[#leases + 1] = deadline
        leases[#leases + 1] = id
        if #leases >= 2 * CHUNK then addLeases() end
        mine[#mine + 1] = now
        mine[#mine + 1] = id
        local n = #out
        out[n + 1] = id; out[n + 2] = lane; out[n + 3] = token; out[n + 4] = row[1]
        out[n + 5] = row[2]; out[n + 6] = row[3]; out[n + 7] = row[4]; out[n + 8] = deadline
        out[n + 9] = workers; out[n + 10] = row[6]; out[n + 11] = expiries
        if suspect then
          -- the rest of this (weighted) turn goes back, in its mint places
          for j = i + 2, #popped, 2 do
            redis.call('ZADD', pendingKey, popped[j + 1], popped[j])
          end
          break
        end
      end
      k = #mine / 2
      if k > 0 then
        claimed = claimed + k
        credit = credit - k
        redis.call('ZADD', laneActiveKey(prefix, lane), unpack(mine))
        redis.call('HINCRBY', Q.inflight, lane, k)
        inflight = inflight + k
        -- The depth index answers what is left; an index that says nothing is
        -- left is checked against the lane itself before the lane leaves (and
        -- mended if it was wrong).
        left = tonumber(redis.call('ZINCRBY', Q.depths, -k, lane))
        if left <= 0 then
          redis.call('ZREM', Q.depths, lane)
          left = redis.call('ZCARD', pendingKey)
          if left > 0 then redis.call('ZADD', Q.depths, left, lane) end
        end
      end
    end
    local leaves = left <= 0 or (ceiling and inflight >= ceiling) or k <= 0
    if not weighted then
      -- The lane is at the tail now: leave with RPOP when it is no longer serviceable.
      if leaves then
        redis.call('RPOP', Q.ring)
        redis.call('SREM', Q.onring, lane)
      end
    elseif leaves then
      redis.call('LPOP', Q.ring)
      redis.call('SREM', Q.onring, lane)
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
  if weighted then
    if turnLane then
      redis.call('HSET', Q.turn, 'lane', turnLane, 'credit', turnCredit)
    elseif savedCredit > 0 then
      redis.call('DEL', Q.turn)
    end
  end
  if claimed > 0 then
    redis.call('HINCRBY', Q.stats, 'pending', -claimed)
  end
  return out
end

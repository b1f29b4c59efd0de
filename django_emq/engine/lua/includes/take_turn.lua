-- @include "job_key"
-- @include "lane_active_key"
-- @include "recent"
-- @include "tries_of"


-- takeTurn(C, lane, pendingKey, k): one turn of claimTurns (claim_turns.lua):
-- pop up to k of the lane's jobs, read their rows, then write: the lane's
-- active set, each row, and the jobs' leases and reply entries appended to
-- C.leases and C.out, and the jobs taken from the lane's depth in the depth
-- index. Returns (taken, suspect, the lane's depth left in the index; 0, false
-- when nothing was popped), or nil and {key, error} when a key of the lane,
-- or the depth index, holds the wrong type (nothing of the turn is written
-- then: what was popped is put back at its place).
-- C is the claim's state, built once per call by claimTurns (a table, not a
-- closure per call): .prefix, .now, .deadline, .worker, .keep, .depths,
-- .leases, .out.
local function takeTurn(C, lane, pendingKey, k)
  local prefix, now = C.prefix, C.now
  local popped = redis.pcall('ZPOPMIN', pendingKey, k)
  if popped.err then return nil, {pendingKey, popped.err} end
  local laneActive = laneActiveKey(prefix, lane)
  -- one job (a worker's claim of one, or an unweighted turn): no tables of rows
  local rows, keys, suspect, n = nil, nil, false, 0
  local row1, key1
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
    if n == 1 then
      row1, key1 = row, jk
    else
      if n == 2 then rows, keys = {row1}, {key1} end
      rows[n], keys[n] = row, jk
    end
    -- A job whose lease expired before ends the claim: the rest of the turn
    -- goes back, in its mint places.
    if (tonumber(row[6]) or 0) > 0 then
      suspect = true
      for j = i + 2, #popped, 2 do redis.call('ZADD', pendingKey, popped[j + 1], popped[j]) end
      break
    end
  end
  if n == 0 then return 0, false end
  local added
  if n == 1 then
    added = redis.pcall('ZADD', laneActive, now, popped[1])
  else
    local mine = {}
    for j = 1, n do
      mine[2 * j - 1] = now
      mine[2 * j] = popped[2 * j - 1]
    end
    added = redis.pcall('ZADD', laneActive, unpack(mine))
  end
  if type(added) == 'table' and added.err then
    for j = 1, #popped, 2 do redis.call('ZADD', pendingKey, popped[j + 1], popped[j]) end
    return nil, {laneActive, added.err}
  end
  -- the jobs leave the depth index, guarded: where claimTurns made no type
  -- check of the index this is its first touch, and an index of the wrong
  -- type undoes the turn
  local left = redis.pcall('ZINCRBY', C.depths, -n, lane)
  if type(left) == 'table' then
    local mine = {}
    for j = 1, n do mine[j] = popped[2 * j - 1] end
    redis.call('ZREM', laneActive, unpack(mine))
    for j = 1, #popped, 2 do redis.call('ZADD', pendingKey, popped[j + 1], popped[j]) end
    return nil, {C.depths, left.err}
  end
  local worker, deadline, leases, out = C.worker, C.deadline, C.leases, C.out
  for j = 1, n do
    local id, seq = popped[2 * j - 1], popped[2 * j]
    local row, jk = row1, key1
    if j > 1 then row, jk = rows[j], keys[j] end
    local token = (tonumber(row[5]) or 0) + 1
    local workers, started = worker, now
    -- group and seq are written when the row lost them (edited by hand): it
    -- still settles and returns to its lane, at the place it was popped from.
    local placed = row[7] == lane and row[8] == seq
    if token == 1 and placed then
      -- a first attempt in its place (the hot path): four fields, no table;
      -- its wait is recorded by the caller (record_history-2.lua)
      redis.call('HSET', jk, 'attempts', token, 'state', 'active', 'claimed', now,
        'worker', worker)
    else
      local fields = {'attempts', token, 'state', 'active', 'claimed', now, 'worker', worker}
      if token ~= 1 then
        -- a job claimed before: its attempt history is written out (a first
        -- attempt's is the row's worker and claimed, see tries.lua)
        local past = redis.call('HMGET', jk, 'workers', 'worker', 'tries', 'started', 'claimed')
        workers, started = recent(past[1] or past[2], worker, C.keep), past[4] or past[5] or now
        fields[9], fields[10] = 'workers', workers
        fields[11], fields[12] = 'started', started
        fields[13], fields[14] = 'tries', recent(triesOf(past[3], past[5], past[1]), now, C.keep)
      end
      if not placed then
        fields[#fields + 1], fields[#fields + 2] = 'group', lane
        fields[#fields + 1], fields[#fields + 2] = 'seq', seq
      end
      redis.call('HSET', jk, unpack(fields))
    end
    local l = #leases
    leases[l + 1] = deadline
    leases[l + 2] = id
    local o = #out
    out[o + 1] = id; out[o + 2] = lane; out[o + 3] = token; out[o + 4] = row[1]
    out[o + 5] = row[2]; out[o + 6] = row[3]; out[o + 7] = row[4]
    -- the job's own workers, start and expiries, or 0 where they are the
    -- call's (this worker, now, none: a first attempt), sent once after the jobs
    local expiries = tonumber(row[6]) or 0
    if workers == worker and started == now and expiries == 0 then
      out[o + 8] = 0
    else
      out[o + 8] = {workers, started, expiries}
    end
  end
  return n, suspect, tonumber(left)
end

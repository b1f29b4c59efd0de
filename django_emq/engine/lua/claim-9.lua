--[[
  claim: rotate the ring one step per turn and serve the lane it lands on.
  A lane of weight w is served K = min(w, depth, ceiling headroom) jobs in its
  turn. A lane left empty or at its ceiling leaves the ring: after the
  rotation it sits at the tail, so leaving is an RPOP, never a scan.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  active    zset   claimed job ids by lease deadline (ms)
  KEYS[4]  paused    set    paused lanes
  KEYS[5]  ceilings  hash   lane -> concurrency ceiling
  KEYS[6]  weights   hash   lane -> weight
  KEYS[7]  inflight  hash   lane -> jobs in flight
  KEYS[8]  depths    zset   lane -> pending depth
  KEYS[9]  stats     hash   queue counters
  derived: <prefix>g:<lane>:pending and <prefix>g:<lane>:active (zsets; the
           latter holds the lane's claimed ids by claim time), <prefix>job:<id> (hash)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  lease_ms  lease length; the deadline is server time + lease_ms
  ARGV[3]  turns     how many turns of the ring this call may take (>= 1)
  ARGV[4]  worker    the claiming worker's id (recorded on the job)
  ARGV[5]  limit     at most this many jobs in all (a weighted turn is cut short)
  ARGV[6]  keep      how many of the latest claimers' ids a row keeps in `workers`
  ARGV[7]  rate      the queue's default rate limit per lane, '<count>:<per_ms>',
                     or '' for none
  derived: <prefix>rates, <prefix>throttled, <prefix>g:<lane>:starts (see
           includes/rate.lua): a rate-limited lane serves no more than its
           window allows, and leaves the ring for `throttled` when it is full;
           due throttled lanes rejoin the ring first.

  A job whose lease has expired before (its worker died or froze running it:
  maybe because of it) ends the claim: nothing is claimed after it, not even
  the rest of a weighted turn, so if it kills this worker too, it takes no
  prefetched job with it.

  Keys are checked before the first write (check.lua). A lane's own keys
  (its pending set, its active set, its jobs' rows) are only known once the
  ring lands on it: a turn reads them first and puts back what it popped when
  one holds the wrong type. The claim then ends there: with jobs claimed in
  earlier turns it returns them (the broken lane stays on the ring for the
  next claim to report); with none it fails with the corrupt-key error, and
  nothing is written but the ring's rotation.

  Returns a flat array, 11 entries per claimed job:
    id, lane, token, task, args, kwargs, enqueued_ms, deadline_ms,
    workers (comma-separated ids of the latest `keep` claimers, this one last),
    started_ms,
    expiries (how many times its lease expired before)
  (empty when the ring is empty).
]]
-- @include "now_ms"
-- @include "item_keys"
-- @include "check"
-- @include "counter"
-- @include "rate"

local Q = {ring = KEYS[1], onring = KEYS[2], active = KEYS[3], paused = KEYS[4],
  ceilings = KEYS[5], weights = KEYS[6], inflight = KEYS[7], depths = KEYS[8],
  stats = KEYS[9]}
local prefix, worker = ARGV[1], ARGV[4]
local turns = tonumber(ARGV[3])
local limit = tonumber(ARGV[5])
local keep = tonumber(ARGV[6])
-- Most queues set no weights or ceilings: then no turn looks them up.
local weighted = guard(Q.weights, 'HLEN', Q.weights) > 0
local capped = guard(Q.ceilings, 'HLEN', Q.ceilings) > 0
checkQ(Q, {'onring', 'active', 'inflight', 'depths', 'stats'})
local rateDefault = ARGV[7]
local limited = rated(prefix, rateDefault)
local dueNow = {}
if limited then
  checkQ(Q, {'ring', 'paused'})
  dueNow = dueLanes(prefix, nowMs(), turns)
end
local claimed = 0
local now = nowMs()
local deadline = now + tonumber(ARGV[2])
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
  local rows, suspect, n = {}, false, 0
  for i = 1, #popped, 2 do
    local jk = jobKey(prefix, popped[i])
    -- One read and one write of the row per job (the hot path's cost).
    local row = redis.pcall('HMGET', jk, 'task', 'args', 'kwargs', 'enq', 'workers',
      'started', 'attempts', 'expiries')
    if row.err then
      for j = 1, #popped, 2 do redis.call('ZADD', pendingKey, popped[j + 1], popped[j]) end
      return nil, {jk, row.err}
    end
    n = n + 1
    rows[n] = row
    -- A job whose lease expired before ends the claim: the rest of the turn
    -- goes back, in its mint places.
    if (tonumber(row[8]) or 0) > 0 then
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
    local id, row = popped[2 * j - 1], rows[j]
    local token = (tonumber(row[7]) or 0) + 1
    local workers = recent(row[5], worker)
    if not row[6] then row[6] = now end
    -- group and seq are rewritten from where the job was popped: a row that
    -- lost them (edited by hand) still settles and returns to its lane.
    redis.call('HSET', jobKey(prefix, id), 'attempts', token, 'state', 'active',
      'claimed', now, 'worker', worker, 'workers', workers, 'started', row[6],
      'group', lane, 'seq', popped[2 * j])
    leases[#leases + 1] = deadline
    leases[#leases + 1] = id
    if #leases >= 2 * CHUNK then addLeases() end
    local o = #out
    out[o + 1] = id; out[o + 2] = lane; out[o + 3] = token; out[o + 4] = row[1]
    out[o + 5] = row[2]; out[o + 6] = row[3]; out[o + 7] = row[4]; out[o + 8] = deadline
    out[o + 9] = workers; out[o + 10] = row[6]; out[o + 11] = tonumber(row[8]) or 0
  end
  addCount(Q.inflight, lane, n, function() return redis.call('ZCARD', laneActive) end)
  return n, suspect
end

if #dueNow > 0 then unthrottle(Q, prefix, dueNow) end  -- the first write
local suspect, broken = false, nil
for turn = 1, turns do
  if claimed >= limit or suspect then break end
  local lane
  if turn == 1 then
    lane = guard(Q.ring, 'LMOVE', Q.ring, Q.ring, 'LEFT', 'RIGHT')
  else
    lane = redis.call('LMOVE', Q.ring, Q.ring, 'LEFT', 'RIGHT')
  end
  if not lane then break end
  local pendingKey = laneKey(prefix, lane)
  local k = 1
  if weighted then k = tonumber(redis.call('HGET', Q.weights, lane)) or 1 end
  if limit - claimed < k then k = limit - claimed end
  local ceiling, inflight = nil, 0
  if capped then
    ceiling = tonumber(redis.call('HGET', Q.ceilings, lane))
    if ceiling then
      inflight = tonumber(redis.call('HGET', Q.inflight, lane)) or 0
      if ceiling - inflight < k then k = ceiling - inflight end
    end
  end
  local count, per
  if limited then count, per = laneRate(prefix, lane, rateDefault) end
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
      claimed = claimed + taken
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
  -- The lane is at the tail now: leave with RPOP when it is no longer serviceable.
  if left <= 0 or (ceiling and inflight >= ceiling) or k <= 0 or throttled then
    redis.call('RPOP', Q.ring)
    redis.call('SREM', Q.onring, lane)
  end
end
if broken and claimed == 0 then fail(broken[1], broken[2]) end
addLeases()
if claimed > 0 then
  addCount(Q.stats, 'pending', -claimed, 0)
end
return out

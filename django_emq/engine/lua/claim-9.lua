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
  ARGV[6]  rate      the queue's default rate limit per lane, '<count>:<per_ms>',
                     or '' for none
  derived: <prefix>rates, <prefix>throttled, <prefix>g:<lane>:starts (see
           includes/rate.lua): a rate-limited lane serves no more than its
           window allows, and leaves the ring for `throttled` when it is full;
           due throttled lanes rejoin the ring first.

  A job whose lease has expired before (its worker died or froze running it:
  maybe because of it) ends the claim: nothing is claimed after it, not even
  the rest of a weighted turn, so if it kills this worker too, it takes no
  prefetched job with it.

  Returns a flat array, 11 entries per claimed job:
    id, lane, token, task, args, kwargs, enqueued_ms, deadline_ms,
    workers (comma-separated ids of every claimer, this one last), started_ms,
    expiries (how many times its lease expired before)
  (empty when the ring is empty).
]]
-- @include "now_ms"
-- @include "item_keys"
-- @include "rate"

local Q = {ring = KEYS[1], onring = KEYS[2], active = KEYS[3], paused = KEYS[4],
  ceilings = KEYS[5], weights = KEYS[6], inflight = KEYS[7], depths = KEYS[8],
  stats = KEYS[9]}
local prefix, worker = ARGV[1], ARGV[4]
local turns = tonumber(ARGV[3])
local limit = tonumber(ARGV[5])
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
-- Most queues set no weights or ceilings: then no turn looks them up.
local weighted = redis.call('HLEN', Q.weights) > 0
local capped = redis.call('HLEN', Q.ceilings) > 0
local rated = ARGV[6] ~= '' or redis.call('HLEN', prefix .. 'rates') > 0
if rated then unthrottleDue(Q, prefix, now, turns) end

local suspect = false
for _ = 1, turns do
  if claimed >= limit or suspect then break end
  local lane = redis.call('LMOVE', Q.ring, Q.ring, 'LEFT', 'RIGHT')
  if not lane then break end
  local pendingKey = laneKey(prefix, lane)
  local k = 1
  if weighted then k = tonumber(redis.call('HGET', Q.weights, lane) or '1') end
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
  local count, per
  if rated then count, per = laneRate(prefix, lane, ARGV[6]) end
  if count then k = math.min(k, rateRoom(prefix, lane, now, count, per)) end
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
  local throttled = count and rateTaken(prefix, lane, now, count, per, math.max(k, 0))
  -- The lane is at the tail now: leave with RPOP when it is no longer serviceable.
  if left <= 0 or (ceiling and inflight >= ceiling) or k <= 0 or throttled then
    redis.call('RPOP', Q.ring)
    redis.call('SREM', Q.onring, lane)
  end
end
addLeases()
if claimed > 0 then
  redis.call('HINCRBY', Q.stats, 'pending', -claimed)
end
return out

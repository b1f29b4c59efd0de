-- @include "any_unique"
-- @include "check_q"
-- @include "check_tenant_ring"
-- @include "enter_ring"
-- @include "expect_type"
-- @include "fail"
-- @include "fence"
-- @include "in_use"
-- @include "job_key"
-- @include "lane_active_key"
-- @include "lane_key"
-- @include "lane_marks"
-- @include "marked"
-- @include "now_ms"
-- @include "put_back_active"
-- @include "release_unique_of"
-- @include "take_back_count"
-- @include "tenant_capped"
-- @include "tenant_freed"
-- @include "tenant_of"
-- @include "ts_active"
-- @include "ts_settle_all"
-- @include "will_join"
-- @include "with_try"


-- completeJobs(Q, prefix, ttl, argv, first): record the success of the jobs
-- named in argv[first..] (one triple each: id, token, result JSON), each
-- fenced by its own token. A refused job (no such job, stale token) changes
-- nothing and the others are still recorded; a job named twice is recorded
-- once, its second entry refused. Each lane's jobs leave its active set (its
-- in-flight count) in one ZREM, so a lane held at its ceiling may rejoin the
-- ring.
--
-- Read and check first, write last: every row is fenced and the keys the
-- writes touch are checked (check.lua) before the first write, so a key of the
-- wrong type fails the whole call with nothing written. The stats hash, the
-- lanes' active sets and the queue's are not type-checked: they take the
-- first writes, each guarded, and a key of the wrong type among them fails
-- the call after the writes before it are taken back (the completed count,
-- and the active sets by putBackActive): still nothing written.
--
-- A finished job frees the unique key it holds (includes/policies.lua), and
-- settles the time its claim charged its lane (includes/timeshare.lua); its
-- running attempt ends 'd' (includes/tries.lua; a first attempt's row holds
-- no `tries`, and its end is its `finished`: nothing more is written).
--
-- Returns one code per job: 1 recorded, -1 no such job, -2 stale token.
-- Q needs .ring, .onring, .active, .paused, .ceilings, .inflight (tenants'
-- counts), .stats, .wake.
local function completeJobs(Q, prefix, ttl, argv, first)
  -- codes: one per job; done: the argv index of each recorded job, ids: its
  -- id; keys, tries, held: its row's key, running attempt (nil for a first
  -- attempt) and unique key, by argv index (tries and held are made when
  -- first needed: most calls have neither); byLane: each lane's ids, lanes:
  -- the lanes in order of first mention
  local codes, done, ids, byLane, lanes, seen, keys = {}, {}, {}, {}, {}, {}, {}
  local tries, held = nil, nil
  -- a finished job frees its unique key: read with its fence (a read that
  -- checks the unique hash's type; none when the queue has no unique keys)
  local uniques = anyUnique(prefix)

  -- reads: fence every job (a job named twice is refused the second time)
  local n, d = 0, 0
  for i = first, #argv, 3 do
    local id = argv[i]
    local jk = jobKey(prefix, id)
    local lane, try, fresh, uniq = fence(jk, argv[i + 1], uniques, true)
    if seen[id] and type(lane) == 'string' then lane = -2 end
    n = n + 1
    if type(lane) == 'number' then
      codes[n] = lane
    else
      seen[id] = true
      codes[n] = 1
      d = d + 1
      done[d], ids[d] = i, id
      keys[i] = jk
      if uniq then
        held = held or {}
        held[i] = {uniq, lane}
      end
      if not fresh then  -- a first attempt ends at `finished`
        tries = tries or {}
        tries[i] = try
      end
      local mine = byLane[lane]
      if mine then
        mine[#mine + 1] = id
      else
        byLane[lane] = {id}
        lanes[#lanes + 1] = lane
      end
    end
  end
  if d == 0 then return codes end

  -- checks: the keys the writes touch, and which lanes rejoin the ring (the
  -- stats hash is checked by its first write, below)
  -- Only a lane held at its ceiling can be off the ring and rejoin it when
  -- its jobs finish (an empty or paused lane stays so; a throttled one waits
  -- for its slot): a lane whose field of the policy index names no ceiling
  -- (includes/check.lua), and every lane of a queue without ceilings, is not
  -- looked up.
  local capped = inUse(Q.ceilings)
  local joins, anyJoins = capped and {}, false
  if held then expectType(prefix .. 'unique', 'hash') end  -- freed below
  for l = 1, #lanes do
    local lane = lanes[l]
    if capped and marked(laneMarks(prefix, lane), 'ceilings') then
      joins[lane] = willJoin(Q, lane, laneKey(prefix, lane), nil, #byLane[lane])
      anyJoins = anyJoins or joins[lane]
    end
    -- [tenants] a tenant freed from its ceiling may rejoin the top ring (only
    -- a lane whose field of the policy index names a tenant is looked up)
    local tenant = tenantOf(prefix, lane)
    if tenant then checkQ(Q, {'inflight'}) end  -- its tenant's count drops
    if tenant and tenantCapped(Q, tenant) then
      checkTenantRing(prefix, tenant)
      anyJoins = true
    end
  end
  if anyJoins then checkQ(Q, {'ring', 'wake'}) end
  local ts = tsActive(prefix)  -- @timeshare

  -- writes: first the completed count, guarded: the stats hash's first touch
  -- checks its type (one command, no TYPE of its own: a stats key of the
  -- wrong type fails the call with nothing written; a field holding no
  -- integer is mended, as addCount does); then the active sets, each guarded
  -- (see above), a failure among them taking the count back (a count that
  -- was 0 goes with its field: a queue that never completed a job has none).
  -- (a failure taking the count back restores the field: includes/take_back_count.lua)
  local count = d
  local counted, mended = redis.pcall('HINCRBY', Q.stats, 'completed', count), nil
  if type(counted) == 'table' then
    if string.find(counted.err, 'WRONGTYPE', 1, true) then fail(Q.stats, counted.err) end
    mended = redis.call('HGET', Q.stats, 'completed')
    redis.call('HSET', Q.stats, 'completed', count)
    counted = count
  end
  TYPE_CHECKED[Q.stats] = true  -- a claim in the same call need not check it
  for l = 1, #lanes do
    local lane = lanes[l]
    local laneActive = laneActiveKey(prefix, lane)
    local removed = redis.pcall('ZREM', laneActive, unpack(byLane[lane]))
    if type(removed) == 'table' then
      putBackActive(prefix, lanes, byLane, l - 1)
      takeBackCount(Q.stats, 'completed', count, counted, mended)
      fail(laneActive, removed.err)
    end
  end
  local removed = redis.pcall('ZREM', Q.active, unpack(ids))
  if type(removed) == 'table' then
    putBackActive(prefix, lanes, byLane, #lanes)
    takeBackCount(Q.stats, 'completed', count, counted, mended)
    fail(Q.active, removed.err)
  end
  TYPE_CHECKED[Q.active] = true  -- a claim in the same call need not check it
  local now = nowMs()
  if ts then  -- @timeshare: before the rows are rewritten or deleted
    for _, lane in ipairs(lanes) do tsSettleAll(prefix, lane, byLane[lane], now, true) end
  end
  for j = 1, d do
    local i = done[j]
    local jk = keys[i]
    local uniq, try = held and held[i], tries and tries[i]
    if uniq then releaseUniqueOf(prefix, jk, ids[j], uniq[1], uniq[2]) end
    if ttl > 0 and try == nil then
      -- a first attempt (the hot path): its end is its `finished`, no table
      redis.call('HSET', jk, 'state', 'done', 'finished', now, 'result', argv[i + 2])
      redis.call('PEXPIRE', jk, ttl)
    elseif ttl > 0 then
      redis.call('HSET', jk, unpack(withTry({'state', 'done', 'finished', now,
        'result', argv[i + 2]}, try, now, 'd')))
      redis.call('PEXPIRE', jk, ttl)
    else
      redis.call('DEL', jk)
    end
  end
  for l = 1, #lanes do
    local lane = lanes[l]
    tenantFreed(Q, prefix, lane, #byLane[lane])  -- [tenants]
    if joins and joins[lane] then enterRing(Q, lane) end
  end
  return codes
end

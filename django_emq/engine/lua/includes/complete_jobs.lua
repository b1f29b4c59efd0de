-- @include "add_count"
-- @include "any_unique"
-- @include "check_q"
-- @include "check_tenant_ring"
-- @include "drop_inflight"
-- @include "enter_ring"
-- @include "expect_type"
-- @include "fence"
-- @include "in_use"
-- @include "job_key"
-- @include "lane_active_key"
-- @include "lane_key"
-- @include "now_ms"
-- @include "release_unique"
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
-- once, its second entry refused. Each lane's in-flight count drops once for
-- all its jobs, so a lane held at its ceiling may rejoin the ring.
--
-- Read and check first, write last: every row is fenced and every key the
-- writes touch is checked (check.lua) before the first write, so a key of the
-- wrong type fails the whole call with nothing written.
--
-- A finished job frees the unique key it holds (includes/policies.lua), and
-- settles the time its claim charged its lane (includes/timeshare.lua); its
-- running attempt ends 'd' (includes/tries.lua).
--
-- Returns one code per job: 1 recorded, -1 no such job, -2 stale token.
-- Q needs .ring, .onring, .active, .paused, .ceilings, .inflight, .stats, .wake.
local function completeJobs(Q, prefix, ttl, argv, first)
  local codes, done, byLane, lanes, seen, tries = {}, {}, {}, {}, {}, {}

  -- reads: fence every job (a job named twice is refused the second time)
  for i = first, #argv, 3 do
    local id = argv[i]
    local lane, try = fence(jobKey(prefix, id), argv[i + 1])
    if type(lane) == 'string' and seen[id] then lane = -2 end
    if type(lane) == 'number' then
      codes[#codes + 1] = lane
    else
      seen[id] = true
      codes[#codes + 1] = 1
      done[#done + 1] = i
      tries[i] = try
      local ids = byLane[lane]
      if not ids then
        ids = {}
        byLane[lane] = ids
        lanes[#lanes + 1] = lane
      end
      ids[#ids + 1] = id
    end
  end
  if #done == 0 then return codes end

  -- checks: the keys the writes touch, and which lanes rejoin the ring
  checkQ(Q, {'active', 'inflight', 'stats'})
  -- Only a lane held at its ceiling can be off the ring and rejoin it when
  -- its jobs finish (an empty or paused lane stays so; a throttled one waits
  -- for its slot): without ceilings, no lane is looked up.
  local capped = inUse(Q.ceilings)
  local joins, anyJoins = {}, false
  for _, lane in ipairs(lanes) do
    expectType(laneActiveKey(prefix, lane), 'zset')
    if capped then
      joins[lane] = willJoin(Q, lane, laneKey(prefix, lane), nil, #byLane[lane])
      anyJoins = anyJoins or joins[lane]
    end
    -- [tenants] a tenant freed from its ceiling may rejoin the top ring
    local tenant = tenantOf(prefix, lane)
    if tenant and tenantCapped(Q, tenant) then
      checkTenantRing(prefix, tenant)
      anyJoins = true
    end
  end
  if anyJoins then checkQ(Q, {'ring', 'wake'}) end
  local uniques = anyUnique(prefix)
  local ts = tsActive(prefix)  -- @timeshare

  -- writes
  local now = nowMs()
  if ts then  -- @timeshare: before the rows are rewritten or deleted
    for _, lane in ipairs(lanes) do tsSettleAll(prefix, lane, byLane[lane], now, Q.inflight) end
  end
  local ids = {}
  for _, i in ipairs(done) do
    local id = argv[i]
    local jk = jobKey(prefix, id)
    ids[#ids + 1] = id
    if uniques then releaseUnique(prefix, jk, id) end
    if ttl > 0 then
      redis.call('HSET', jk, unpack(withTry({'state', 'done', 'finished', now,
        'result', argv[i + 2]}, tries[i], now, 'd')))
      redis.call('PEXPIRE', jk, ttl)
    else
      redis.call('DEL', jk)
    end
  end
  redis.call('ZREM', Q.active, unpack(ids))
  addCount(Q.stats, 'completed', #ids, #ids)
  for _, lane in ipairs(lanes) do
    local laneActive = laneActiveKey(prefix, lane)
    redis.call('ZREM', laneActive, unpack(byLane[lane]))
    dropInflight(Q, lane, #byLane[lane], laneActive)
    tenantFreed(Q, prefix, lane, #byLane[lane])  -- [tenants]
    if joins[lane] then enterRing(Q, lane) end
  end
  return codes
end

--[[
  mend_jobs: the doctor's repair of jobs, one small atomic step per call.
  Each job is put where its row's state says, and only there; a job found in
  a set where its row says it does not belong leaves that set. A claimed job
  that has no lease (not in the active set) goes back to the head of its
  lane, as an expired lease would. The counters follow every move.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  active    zset   claimed job ids by lease deadline (ms)
  KEYS[4]  schedule  zset   deferred job ids by due time (ms)
  KEYS[5]  dead      zset   dead job ids by time of death (ms)
  KEYS[6]  paused    set    paused lanes
  KEYS[7]  ceilings  hash   lane -> concurrency ceiling
  KEYS[8]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[9]  depths    zset   lane -> pending depth
  KEYS[10] stats     hash   queue counters
  KEYS[11] wake      list   wake tokens for parked workers
  derived: <prefix>job:<id> (hash), <prefix>g:<lane>:pending, :active and
           :dead (zsets)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2..] triples  id, set, lane: the job, and the set it was found in
           ('pending', 'lane_active', 'lane_dead' of that lane, 'active',
           'schedule', 'dead'; '' when it was found by its row)

  Every key is checked first (check.lua), and each job's lane sets before it
  is mended: the doctor deletes a key of the wrong type and runs the step
  again (each step is safe to repeat). Returns how many jobs changed.
]]
-- @include "add_pending"
-- @include "check_lane"
-- @include "check_q"
-- @include "check_tenant_of"
-- @include "job_key"
-- @include "join_ring"
-- @include "lane_active_key"
-- @include "lane_dead_key"
-- @include "lane_key"
-- @include "now_ms"
-- @include "places"
-- @include "removed_pending"

local Q = {ring = KEYS[1], onring = KEYS[2], active = KEYS[3], schedule = KEYS[4],
  dead = KEYS[5], paused = KEYS[6], ceilings = KEYS[7], inflight = KEYS[8],
  depths = KEYS[9], stats = KEYS[10], wake = KEYS[11]}
local prefix = ARGV[1]
checkQ(Q)
local now = nowMs()
local changed = 0

-- leave(id, set, lane): the job leaves one set, the counters following.
local function leave(id, set, lane)
  if set == 'pending' then
    if redis.call('ZREM', laneKey(prefix, lane), id) == 1 then removedPending(Q, lane, 1) end
  elseif set == 'lane_active' then
    redis.call('ZREM', laneActiveKey(prefix, lane), id)
  elseif set == 'lane_dead' then
    redis.call('ZREM', laneDeadKey(prefix, lane), id)
  else
    redis.call('ZREM', Q[set], id)
  end
end

local SET_OF_PLACE = {pending = 'pending', active = 'active', laneActive = 'lane_active',
  schedule = 'schedule', dead = 'dead', laneDead = 'lane_dead'}

for i = 2, #ARGV, 3 do
  local id, foundIn, foundLane = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local jk = jobKey(prefix, id)
  local row = {}
  if redis.call('TYPE', jk)['ok'] == 'hash' then
    row = redis.call('HMGET', jk, 'state', 'group', 'seq', 'due', 'claimed', 'finished')
  end
  local state, lane = row[1], row[2]
  local want = PLACES_OF_STATE[state or '']
  -- a lane set of the wrong type aborts the step (the doctor deletes it and
  -- runs the step again: each step is safe to repeat)
  if lane then
    checkLane(prefix, lane)
    checkTenantOf(prefix, lane)  -- [tenants]
  end
  if foundLane ~= '' then checkLane(prefix, foundLane) end
  -- the set it was found in, when its row does not put it there
  if foundIn ~= '' then
    local belongs = want and lane and want[foundIn == 'lane_active' and 'laneActive'
      or foundIn == 'lane_dead' and 'laneDead' or foundIn]
      and (foundLane == '' or foundLane == lane)
    if not belongs then
      leave(id, foundIn, foundLane)
      changed = changed + 1
    end
  end
  if want and lane then
    local at = places(Q, prefix, id, lane)
    if state == 'active' and not at.active then
      -- claimed, but no lease will ever expire: back to the head of its lane
      state = 'pending'
      want = PLACES_OF_STATE.pending
      redis.call('HSET', jk, 'state', 'pending')
      changed = changed + 1
    end
    for place, set in pairs(SET_OF_PLACE) do
      if at[place] and not want[place] then
        leave(id, set, lane)
        changed = changed + 1
      end
    end
    local pendingKey = laneKey(prefix, lane)
    if want.pending and not at.pending then
      addPending(Q, lane, pendingKey, id, tonumber(row[3]) or 0)
      changed = changed + 1
    end
    if want.laneActive and not at.laneActive then
      redis.call('ZADD', laneActiveKey(prefix, lane), tonumber(row[5]) or now, id)
      changed = changed + 1
    end
    if want.schedule and not at.schedule then
      redis.call('ZADD', Q.schedule, tonumber(row[4]) or now, id)
      changed = changed + 1
    end
    if want.dead and not at.dead then
      redis.call('ZADD', Q.dead, tonumber(row[6]) or now, id)
      changed = changed + 1
    end
    if want.laneDead and not at.laneDead then
      local died = tonumber(redis.call('ZSCORE', Q.dead, id)) or now
      redis.call('ZADD', laneDeadKey(prefix, lane), died, id)
      changed = changed + 1
    end
    joinRing(Q, lane, pendingKey)
  end
end
return changed

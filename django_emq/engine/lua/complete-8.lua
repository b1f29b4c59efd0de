--[[
  complete: record the success of one or more claimed jobs, each fenced by its
  own token. A refused job (no such job, stale token) changes nothing and the
  others are still recorded. Each lane's in-flight count drops once for all
  its jobs, so a lane held at its ceiling may rejoin the ring.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  active    zset   claimed job ids by lease deadline (ms)
  KEYS[4]  paused    set    paused lanes
  KEYS[5]  ceilings  hash   lane -> concurrency ceiling
  KEYS[6]  inflight  hash   lane -> jobs in flight
  KEYS[7]  stats     hash   queue counters
  KEYS[8]  wake      list   wake tokens for parked workers
  derived: <prefix>job:<id> (hash) of each job, <prefix>g:<lane>:pending and
           <prefix>g:<lane>:active (zsets) of each job's lane, <prefix>unique
           (hash, see includes/policies.lua: a finished job frees its key)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  ttl_ms    how long a finished row is kept; 0 deletes it now
  ARGV[3..] one triple per job: id, token (the attempt number the claim
           returned), result (JSON to keep)

  Read and check first, write last: every row is fenced and every key the
  writes touch is checked (check.lua) before the first write, so a key of the
  wrong type fails the whole call with nothing written.

  Returns one code per job, in order: 1 recorded, -1 no such job, -2 stale
  token. A job named twice is recorded once; its second entry is refused.
]]
-- @include "now_ms"
-- @include "item_keys"
-- @include "check"
-- @include "counter"
-- @include "fence"
-- @include "ring"
-- @include "policies"

local Q = {ring = KEYS[1], onring = KEYS[2], active = KEYS[3], paused = KEYS[4],
  ceilings = KEYS[5], inflight = KEYS[6], stats = KEYS[7], wake = KEYS[8]}
local prefix = ARGV[1]
local ttl = tonumber(ARGV[2])
local codes, done, byLane, lanes, seen = {}, {}, {}, {}, {}

-- reads: fence every job (a job named twice is refused the second time)
for i = 3, #ARGV, 3 do
  local id = ARGV[i]
  local lane = fence(jobKey(prefix, id), ARGV[i + 1])
  if type(lane) == 'string' and seen[id] then lane = -2 end
  if type(lane) == 'number' then
    codes[#codes + 1] = lane
  else
    seen[id] = true
    codes[#codes + 1] = 1
    done[#done + 1] = i
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
local joins, anyJoins = {}, false
for _, lane in ipairs(lanes) do
  expectType(laneActiveKey(prefix, lane), 'zset')
  joins[lane] = willJoin(Q, lane, laneKey(prefix, lane), nil, #byLane[lane])
  anyJoins = anyJoins or joins[lane]
end
if anyJoins then checkQ(Q, {'ring', 'wake'}) end
local uniques = anyUnique(prefix)

-- writes
local now = nowMs()
local ids = {}
for _, i in ipairs(done) do
  local id = ARGV[i]
  local jk = jobKey(prefix, id)
  ids[#ids + 1] = id
  if uniques then releaseUnique(prefix, jk, id) end
  if ttl > 0 then
    redis.call('HSET', jk, 'state', 'done', 'finished', now, 'result', ARGV[i + 2])
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
  if joins[lane] then enterRing(Q, lane) end
end
return codes

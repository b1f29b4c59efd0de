--[[
  move: move a pending (or scheduled) job to another lane, keeping its mint
  place. Both lanes' ring membership follows. Lane control: may LREM the ring.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  paused    set    paused lanes
  KEYS[4]  ceilings  hash   lane -> concurrency ceiling
  KEYS[5]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[6]  depths    zset   lane -> pending depth
  KEYS[7]  stats     hash   queue counters
  KEYS[8]  wake      list   wake tokens for parked workers
  KEYS[9]  job       hash   the job row
  KEYS[10] to        zset   the destination lane (emq:{q}:g:<lane>:pending)
  derived: <prefix>g:<lane>:pending (zset) of the job's current lane,
           <prefix>unique (hash, see includes/policies.lua: a moved job frees
           its unique key on the lane it leaves and holds none on the other)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  id        the job id
  ARGV[3]  to_lane   the destination lane id

  Returns 1 when moved, 0 when the job is already in that lane,
  -1 (no such job) or -3 (the job is not pending or scheduled).
]]
-- @include "add_pending"
-- @include "any_unique"
-- @include "check_q"
-- @include "check_tenant_of"
-- @include "expect_type"
-- @include "guard"
-- @include "join_ring"
-- @include "lane_key"
-- @include "refresh_ring"
-- @include "release_unique"
-- @include "removed_pending"

local Q = {ring = KEYS[1], onring = KEYS[2], paused = KEYS[3], ceilings = KEYS[4],
  inflight = KEYS[5], depths = KEYS[6], stats = KEYS[7], wake = KEYS[8]}
local jk, toKey, prefix, id, to = KEYS[9], KEYS[10], ARGV[1], ARGV[2], ARGV[3]
local row = guard(jk, 'HMGET', jk, 'state', 'group', 'seq')
if not row[1] then return -1 end
if row[1] ~= 'pending' and row[1] ~= 'scheduled' then return -3 end
local from = row[2]
if from == to then return 0 end
checkQ(Q)
expectType(toKey, 'zset')
if from then
  expectType(laneKey(prefix, from), 'zset')
  checkTenantOf(prefix, from)  -- [tenants]
end
checkTenantOf(prefix, to)
local uniques = anyUnique(prefix)
local seq = tonumber(row[3]) or 0
if uniques then releaseUnique(prefix, jk, id) end
redis.call('HSET', jk, 'group', to)
if row[1] == 'pending' then
  local fromKey = laneKey(prefix, from)
  if redis.call('ZREM', fromKey, id) == 1 then removedPending(Q, from, 1) end
  refreshRing(Q, from, fromKey)
  addPending(Q, to, toKey, id, seq)
  joinRing(Q, to, toKey)
end
return 1

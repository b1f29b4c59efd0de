--[[
  release: hand a claimed job back, fenced by its token. It returns to the
  head of its own lane (its mint place is kept) and does not count as a
  failure. Workers use it when they stop before the job finished.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  active    zset   claimed job ids by lease deadline (ms)
  KEYS[4]  paused    set    paused lanes
  KEYS[5]  ceilings  hash   lane -> concurrency ceiling
  KEYS[6]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[7]  depths    zset   lane -> pending depth
  KEYS[8]  stats     hash   queue counters
  KEYS[9]  wake      list   wake tokens for parked workers
  KEYS[10] job       hash   the job row
  derived: <prefix>g:<lane>:pending (zset) and <prefix>g:<lane>:active (zset)
           of the job's lane; <prefix>timeshare and <prefix>weights (hashes,
           see includes/timeshare.lua: the time held is charged to the lane)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  id        the job id
  ARGV[3]  token     the attempt number the claim returned

  The attempt ends 'r' in `tries` (includes/tries.lua). Every key is checked
  before the first write (check.lua).

  Returns 1, or -1 (no such job) / -2 (stale token); nothing changes then.
]]
-- @include "add_count"
-- @include "check_lane"
-- @include "check_q"
-- @include "check_tenant_of"
-- @include "fence"
-- @include "now_ms"
-- @include "return_to_lane"
-- @include "ts_active"
-- @include "ts_settle_all"
-- @include "with_try"

local Q = {ring = KEYS[1], onring = KEYS[2], active = KEYS[3], paused = KEYS[4],
  ceilings = KEYS[5], inflight = KEYS[6], depths = KEYS[7], stats = KEYS[8],
  wake = KEYS[9]}
local jk, prefix = KEYS[10], ARGV[1]
local lane, tries = fence(jk, ARGV[3])
if type(lane) == 'number' then return lane end
checkQ(Q)
checkLane(prefix, lane)
checkTenantOf(prefix, lane)  -- [tenants]
local ts = tsActive(prefix)  -- @timeshare
local now = nowMs()
local seq = redis.call('HGET', jk, 'seq')
if ts then tsSettleAll(prefix, lane, {ARGV[2]}, now) end
returnToLane(Q, prefix, ARGV[2], lane, jk, seq, withTry({}, tries, now, 'r'))
addCount(Q.stats, 'released', 1, 1)
return 1

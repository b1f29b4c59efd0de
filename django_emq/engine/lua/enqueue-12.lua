--[[
  enqueue: write a job row and admit it to its lane (or to the schedule when
  it is deferred). Idempotent on the job id.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  schedule  zset   deferred job ids by due time (ms)
  KEYS[4]  paused    set    paused lanes
  KEYS[5]  ceilings  hash   lane -> concurrency ceiling
  KEYS[6]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[7]  depths    zset   lane -> pending depth
  KEYS[8]  stats     hash   queue counters
  KEYS[9]  seq       string mint-order counter
  KEYS[10] wake      list   wake tokens for parked workers
  KEYS[11] job       hash   the job row (emq:{q}:job:<id>)
  KEYS[12] pending   zset   the lane (emq:{q}:g:<lane>:pending)

  ARGV[1]  id            the job id
  ARGV[2]  lane          the lane id (validated by the caller)
  ARGV[3]  task          dotted task path
  ARGV[4]  args          JSON array
  ARGV[5]  kwargs        JSON object
  ARGV[6]  max_attempts  failures allowed before the job is dead
  ARGV[7]  run_after     due time in epoch ms; 0 = now
  ARGV[8]  meta          opaque JSON the caller wants kept (may be empty)
  ARGV[9]  prefix        the queue's key prefix, emq:{q}: (for the policy and
                         history keys)
  ARGV[10] max_depth     the queue's default max lane depth; '' for none
  ARGV[11] unique        the job's unique key on its lane; '' for none
  ARGV[12] schedule      the periodic schedule whose tick this job is; '' for none
  ARGV[13] tick          that tick's time (epoch ms): enqueued once, by whoever
                         claims it first (the schedule's last tick is older)
  ARGV[14] tenant        the lane's tenant (validated by the caller); '' keeps the
                         recorded one. Recorded only while the lane is idle
                         (includes/tenants.lua: recordTenant)
  derived: <prefix>maxdepth, <prefix>unique, <prefix>ticks (hashes, see
           includes/policies.lua); <prefix>m:<minute> (hash,
           includes/history.lua); <prefix>tenants, <prefix>t:<tenant>:ring
           (includes/tenants.lua); <prefix>policies (hash, the policy index,
           includes/check.lua: it follows a held unique key, a recorded tenant)

  Returns {1, state, enq} when enqueued (state 'pending' or 'scheduled'),
          {0, state, enq} when the id exists already (nothing changed),
          {0, state, enq, id} when job `id` holds the unique key (nothing
          changed), {-4, max} when the lane holds its max depth already
          (nothing changed), {-5, last, id} when the schedule's tick is
          enqueued already (its last tick, and that job's id; nothing changed); enq is the row's enqueue time (server clock,
          epoch ms), so the caller's result carries the time a read-back shows.
]]
-- @include "add_count"
-- @include "add_pending"
-- @include "check_q"
-- @include "check_tenant_ring"
-- @include "count_event"
-- @include "enter_ring"
-- @include "expect_type"
-- @include "guard"
-- @include "hold_unique"
-- @include "lane_full"
-- @include "last_tick"
-- @include "now_ms"
-- @include "policy_indexed"
-- @include "record_tenant"
-- @include "take_tick"
-- @include "tenant_of"
-- @include "tick_job"
-- @include "unique_holder"
-- @include "will_join"

local Q = {ring = KEYS[1], onring = KEYS[2], schedule = KEYS[3], paused = KEYS[4],
  ceilings = KEYS[5], inflight = KEYS[6], depths = KEYS[7], stats = KEYS[8],
  wake = KEYS[10]}
local jk, pendingKey = KEYS[11], KEYS[12]
local id, lane = ARGV[1], ARGV[2]

-- Read and check first: nothing is written until every key this call writes
-- is known to hold its type.
local existing = guard(jk, 'HGET', jk, 'state')
if existing then return {0, existing, tonumber(redis.call('HGET', jk, 'enq')) or 0} end
local prefix, unique, schedule = ARGV[9], ARGV[11], ARGV[12] or ''
if schedule ~= '' then
  local last = lastTick(prefix, schedule)
  if last >= tonumber(ARGV[13]) then return {-5, last, tickJob(prefix, schedule)} end
end
if unique ~= '' then
  policyIndexed(prefix)  -- the policy index follows a held key (includes/check.lua)
  local holder, holderKey = uniqueHolder(prefix, lane, unique)
  if holder then
    local row = redis.call('HMGET', holderKey, 'state', 'enq')
    return {0, row[1], tonumber(row[2]) or 0, holder}
  end
end
local full = laneFull(prefix, lane, pendingKey, ARGV[10])
if full then return {-4, full} end

local now = nowMs()
local due = tonumber(ARGV[7])
local state = 'pending'
if due > now then state = 'scheduled' end
local joins = false
-- [tenants] the tenant to record, and its ring
local tenant = ARGV[14] or ''
if tenant ~= '' then
  if tenant ~= tenantOf(prefix, lane) then
    expectType(prefix .. 'tenants', 'hash')
    policyIndexed(prefix)  -- the policy index follows (includes/check.lua)
    checkTenantRing(prefix, tenant)
  end
  checkQ(Q, {'onring'})
end
if state == 'scheduled' then
  checkQ(Q, {'schedule', 'stats'})
else
  checkQ(Q, {'depths', 'stats'})
  expectType(pendingKey, 'zset')
  joins = willJoin(Q, lane, pendingKey, 1, 0)
  if joins then checkQ(Q, {'ring', 'wake'}) end
  -- [tenants] a tenant's entry joining the top ring reads its in-flight count
  if joins and tenantOf(prefix, lane) then checkQ(Q, {'inflight'}) end
end
local seq = guard(KEYS[9], 'INCR', KEYS[9])  -- the first write: it fails alone

redis.call('HSET', jk, 'state', state, 'attempts', 0, 'fails', 0, 'group', lane,
  'task', ARGV[3], 'args', ARGV[4], 'kwargs', ARGV[5], 'max', ARGV[6],
  'seq', seq, 'enq', now, 'meta', ARGV[8])
addCount(Q.stats, 'enqueued', 1, 1)
if unique ~= '' then holdUnique(prefix, lane, unique, id, jk) end
if schedule ~= '' then takeTick(prefix, schedule, ARGV[13], id) end
recordTenant(Q, prefix, lane, tenant)  -- [tenants]
countEvent(prefix, now, 'enq', 1)

if state == 'scheduled' then
  redis.call('HSET', jk, 'due', due)
  redis.call('ZADD', Q.schedule, due, id)
  return {1, state, now}
end

addPending(Q, lane, pendingKey, id, seq)
if joins then enterRing(Q, lane) end
return {1, state, now}

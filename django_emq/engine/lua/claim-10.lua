--[[
  claim: take the next turn(s) of the ring (see includes/claim_turns.lua).
  A lane of weight w is served w jobs per turn, bounded by its depth and its
  ceiling headroom, whether one claim takes them all or each claim takes one.
  A lane left empty or at its ceiling leaves the ring without a scan.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  active    zset   claimed job ids by lease deadline (ms)
  KEYS[4]  paused    set    paused lanes
  KEYS[5]  ceilings  hash   lane -> concurrency ceiling
  KEYS[6]  weights   hash   lane -> weight
  KEYS[7]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[8]  depths    zset   lane -> pending depth
  KEYS[9]  stats     hash   queue counters
  KEYS[10] turn      hash   lane, credit: the rest of the head lane's
                            weighted turn, when a claim cut it short
  derived: <prefix>g:<lane>:pending and <prefix>g:<lane>:active (zsets; the
           latter holds the lane's claimed ids by claim time), <prefix>job:<id> (hash)
  A job's wait is not written here: the caller records it (record_history-2.lua).

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  derived: <prefix>policies (hash, the policy index: includes/check.lua),
           its '*' read first (includes/policies_off.lua), a lane's field per
           lane met; '*' recorded last on a new queue
  ARGV[2]  lease_ms  lease length; the deadline is server time + lease_ms
  ARGV[3]  turns     how many turns of the ring this call may take (>= 1)
  ARGV[4]  worker    the claiming worker's id (recorded on the job)
  ARGV[5]  limit     at most this many jobs in all (a weighted turn cut short
                     keeps the rest for the next claim)
  ARGV[6]  keep      how many of the latest claimers' ids a row keeps in `workers`
  ARGV[7]  rate      the queue's default rate limit per lane, '<count>:<per_ms>',
                     or '' for none
  derived: <prefix>rates, <prefix>throttled, <prefix>g:<lane>:starts (see
           includes/rate.lua)
  ARGV[8]  fairness  'time' for a time-fair queue (credit of worker time per
                     lane, includes/timeshare.lua), '' for count-fair
  derived: <prefix>timeshare (hash), a claimed row's `charge` (see
           includes/timeshare.lua)

  A lane's own key of the wrong type ends the claim: with jobs claimed in
  earlier turns it returns them (the broken lane stays on the ring for the
  next claim to report); with none it fails with the corrupt-key error, and
  nothing is written but the ring's rotation. So does a key a turn meets on a
  policy's behalf (a policy hash a lane's field of the policy index names,
  the tenants' in-flight counts, the throttled set). The depth index is checked as
  a lane's keys are, by a turn's first touch, where no policy writes before
  it (includes/claim_turns.lua): the first turn meets it, so a broken index
  fails the claim the same way.

  Returns a flat array, 8 entries per claimed job:
    id, lane, token, task, args, kwargs, enqueued_ms, own
  then, once, the call's:
    deadline_ms, claimed_ms, worker
  (empty when nothing was claimed). `own` is 0 when the job's workers are this
  worker alone, it started at claimed_ms and its lease never expired (a first
  attempt), else {workers (comma-separated ids of the latest `keep` claimers,
  this one last), started_ms, expiries (how many times its lease expired
  before)}.
]]
-- @include "claim_turns"
-- @include "fail"
-- @include "index_recorded"
-- @include "policies_off"

local Q = {ring = KEYS[1], onring = KEYS[2], active = KEYS[3], paused = KEYS[4],
  ceilings = KEYS[5], weights = KEYS[6], inflight = KEYS[7], depths = KEYS[8],
  stats = KEYS[9], turn = KEYS[10]}
policiesOff(ARGV[1])  -- one read for every lane policy (includes/policies_off.lua)
local out, broken = claimTurns(Q, ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4],
  tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7] or '', ARGV[8] or '')
if broken and #out == 0 then fail(broken[1], broken[2]) end
if #out > 0 then indexRecorded(ARGV[1]) end  -- a new queue's index, last (check.lua)
return out

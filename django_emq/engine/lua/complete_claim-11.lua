--[[
  complete_claim: complete, then claim, in one call (a worker's hot path: its
  finished jobs ride along with its next claim, one script per round trip).
  Records the jobs as complete-8.lua does (includes/complete_jobs.lua), then
  takes turns as claim-10.lua does (includes/claim_turns.lua): a lane that a
  completion brought back under its ceiling can be served by the same call.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  active    zset   claimed job ids by lease deadline (ms)
  KEYS[4]  paused    set    paused lanes
  KEYS[5]  ceilings  hash   lane -> concurrency ceiling
  KEYS[6]  weights   hash   lane -> weight
  KEYS[7]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[8]  depths    zset   lane -> pending depth
  KEYS[9]  stats     hash   queue counters
  KEYS[10] turn      hash   lane, credit: the rest of the head lane's weighted turn
  KEYS[11] wake      list   wake tokens for parked workers
  derived: as for complete-8.lua and claim-10.lua

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  derived: <prefix>policies (hash, the policy index: includes/check.lua),
           its '*' read first (includes/policies_off.lua), a lane's field per
           lane met; '*' recorded last on a new queue
  ARGV[2]  ttl_ms    how long a finished row is kept; 0 deletes it now
  ARGV[3]  lease_ms  lease length of the claimed jobs
  ARGV[4]  turns     how many turns of the ring the claim may take (>= 1)
  ARGV[5]  worker    the claiming worker's id
  ARGV[6]  limit     at most this many jobs claimed in all (0: claim nothing)
  ARGV[7]  keep      how many of the latest claimers' ids a row keeps in `workers`
  ARGV[8]  rate      the queue's default rate limit per lane ('' for none)
  ARGV[9]  fairness  'time' for a time-fair queue, '' for count-fair
  ARGV[10..] one triple per completed job: id, token, result JSON

  Returns {codes, claims}: one code per completed job as complete-8.lua
  answers them, and the claim's flat reply as claim-10.lua answers it. A key
  of the wrong type met by the completions fails the call with nothing
  written; one met by the claim (a lane's own key) only ends the claim: the
  completions stand, and the next plain claim reports the broken key. A
  queue key the claim meets (its depth index too, which a turn checks by
  touching it) fails the call, the completions standing.
]]
-- @include "claim_turns"
-- @include "complete_jobs"
-- @include "fail"
-- @include "index_recorded"
-- @include "policies_off"

local Q = {ring = KEYS[1], onring = KEYS[2], active = KEYS[3], paused = KEYS[4],
  ceilings = KEYS[5], weights = KEYS[6], inflight = KEYS[7], depths = KEYS[8],
  stats = KEYS[9], turn = KEYS[10], wake = KEYS[11]}
local prefix = ARGV[1]
policiesOff(prefix)  -- one read for every lane policy (includes/policies_off.lua)
local codes = completeJobs(Q, prefix, tonumber(ARGV[2]), ARGV, 10)
local limit = tonumber(ARGV[6])
local claims, broken = {}, nil
if limit > 0 then
  claims, broken = claimTurns(Q, prefix, tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], limit,
    tonumber(ARGV[7]), ARGV[8], ARGV[9])
end
-- the depth index is the queue's, not a lane's: it fails the call (claimTurns)
if broken and broken[1] == Q.depths then fail(broken[1], broken[2]) end
local wrote = #claims > 0
for _, code in ipairs(codes) do wrote = wrote or code == 1 end
if wrote then indexRecorded(prefix) end  -- a new queue's index, last (check.lua)
return {codes, claims}

--[[
  complete: record the success of one or more claimed jobs, each fenced by its
  own token (see includes/complete_jobs.lua). A refused job (no such job,
  stale token) changes nothing and the others are still recorded.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  active    zset   claimed job ids by lease deadline (ms)
  KEYS[4]  paused    set    paused lanes
  KEYS[5]  ceilings  hash   lane -> concurrency ceiling
  KEYS[6]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[7]  stats     hash   queue counters
  KEYS[8]  wake      list   wake tokens for parked workers
  derived: <prefix>job:<id> (hash) of each job, <prefix>g:<lane>:pending and
           <prefix>g:<lane>:active (zsets) of each job's lane, <prefix>unique
           (hash, see includes/policies.lua: a finished job frees its key),
           <prefix>timeshare and <prefix>weights (hashes, see
           includes/timeshare.lua: a job's run time is charged to its lane)
  The finished window and this minute's `done` are not written here: the
  caller records them (record_history-2.lua).

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  derived: <prefix>policies (hash, the policy index: includes/check.lua),
           its '*' read first (includes/policies_off.lua), a lane's field per
           lane met; '*' recorded last on a new queue
  ARGV[2]  ttl_ms    how long a finished row is kept; 0 deletes it now
  ARGV[3..] one triple per job: id, token (the attempt number the claim
           returned), result (JSON to keep)

  Read and check first, write last: every row is fenced and every key the
  writes touch is checked (check.lua) before the first write, so a key of the
  wrong type fails the whole call with nothing written.

  Returns one code per job, in order: 1 recorded, -1 no such job, -2 stale
  token. A job named twice is recorded once; its second entry is refused.
]]
-- @include "complete_jobs"
-- @include "index_recorded"
-- @include "policies_off"

local Q = {ring = KEYS[1], onring = KEYS[2], active = KEYS[3], paused = KEYS[4],
  ceilings = KEYS[5], inflight = KEYS[6], stats = KEYS[7], wake = KEYS[8]}
policiesOff(ARGV[1])  -- one read for every lane policy (includes/policies_off.lua)
local codes = completeJobs(Q, ARGV[1], tonumber(ARGV[2]), ARGV, 3)
for _, code in ipairs(codes) do
  if code == 1 then  -- a new queue's index, last (check.lua)
    indexRecorded(ARGV[1])
    break
  end
end
return codes

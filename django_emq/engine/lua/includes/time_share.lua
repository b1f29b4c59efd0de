-- @include "check_q"
-- @include "guard"
-- @include "timeshare"
-- @include "ts_key"

-- timeShare(Q, prefix, fairness, weighted): the claim's time-share state when
-- the queue is time-fair (fairness 'time'), else nil (and no command run).
-- Reads only: checks the ring's and the timeshare hash's types first.
-- Q needs .ring, .weights.
local function timeShare(Q, prefix, fairness, weighted)
  if fairness ~= 'time' then return nil end
  local key = tsKey(prefix)
  checkQ(Q, {'ring'})
  local got = guard(key, 'HMGET', key, 'quantum', 'head')
  local q = tonumber(got[1]) or 0
  if q < TS_MIN_QUANTUM then q = TS_MIN_QUANTUM end
  return {Q = Q, key = key, q = q, weighted = weighted, skips = 0, head = got[2], saved = got[2]}
end

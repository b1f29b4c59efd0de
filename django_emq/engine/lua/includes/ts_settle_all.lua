-- @include "job_key"
-- @include "ts_forget_idle"
-- @include "ts_settle"

-- tsSettleAll(prefix, lane, ids, now): tsSettle for each of the lane's jobs,
-- then tsForgetIdle.
local function tsSettleAll(prefix, lane, ids, now)
  for _, id in ipairs(ids) do tsSettle(prefix, lane, jobKey(prefix, id), now) end
  tsForgetIdle(prefix, lane, #ids)
end

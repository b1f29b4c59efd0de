-- @include "job_key"
-- @include "ts_forget_idle"
-- @include "ts_settle"

-- tsSettleAll(prefix, lane, ids, now, gone): tsSettle for each of the lane's
-- jobs, then tsForgetIdle (gone: the jobs left the lane's active set already).
local function tsSettleAll(prefix, lane, ids, now, gone)
  for _, id in ipairs(ids) do tsSettle(prefix, lane, jobKey(prefix, id), now) end
  tsForgetIdle(prefix, lane, gone and 0 or #ids)
end

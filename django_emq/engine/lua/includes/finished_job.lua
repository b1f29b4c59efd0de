-- @include "finished_jobs"

-- finishedJob: documented in includes/history.lua.
local function finishedJob(prefix, id, now, field)
  finishedJobs(prefix, {id}, now, field)
end

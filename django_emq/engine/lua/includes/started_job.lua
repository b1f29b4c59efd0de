-- @include "count_event"
-- @include "counted"
-- @include "history"
-- @include "wait_bucket"

-- startedJob(prefix, lane, now, enq): a job's first start, enqueue_ms `enq`:
-- its wait counts in this minute's histogram (w<b>) and in this hour's lane
-- histograms (<lane>:<b>): two writes per job, whatever the lanes. (Adding
-- them up per call first saves little: a call's jobs are of distinct lanes,
-- and would make the count depend on how the waits fall.)
local function startedJob(prefix, lane, now, enq)
  local b = waitBucket(now - (tonumber(enq) or now))
  countEvent(prefix, now, 'w' .. b, 1)
  counted(prefix .. 'lw:' .. math.floor(now / 3600000), lane .. ':' .. b, 1, LANE_WAIT_TTL_MS)
end

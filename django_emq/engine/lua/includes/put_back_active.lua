-- @include "job_key"
-- @include "lane_active_key"

-- putBackActive(prefix, lanes, byLane, upTo): the jobs of the first upTo
-- lanes go back into their lanes' active sets, each at its claim time (its
-- row's `claimed`, the set's score): a completion undoing its first writes
-- when a later one met a key of the wrong type (includes/complete_jobs.lua).
local function putBackActive(prefix, lanes, byLane, upTo)
  for n = 1, upTo do
    local members = {}
    for _, id in ipairs(byLane[lanes[n]]) do
      members[#members + 1] = tonumber(redis.call('HGET', jobKey(prefix, id), 'claimed')) or 0
      members[#members + 1] = id
    end
    redis.call('ZADD', laneActiveKey(prefix, lanes[n]), unpack(members))
  end
end

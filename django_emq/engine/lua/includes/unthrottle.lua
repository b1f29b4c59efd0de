-- @include "index_policy"
-- @include "lane_enters"
-- @include "lane_key"
-- @include "serviceable"

-- unthrottle(Q, prefix, lanes): the lanes leave `throttled` and rejoin the
-- ring when serviceable (a tenanted lane its tenant's). Returns how many
-- rejoined. Q needs .ring, .onring, .paused, .ceilings, .inflight.
local function unthrottle(Q, prefix, lanes)
  local joined = 0
  for _, lane in ipairs(lanes) do
    redis.call('ZREM', prefix .. 'throttled', lane)
    if redis.call('SISMEMBER', Q.onring, lane) == 0
        and serviceable(Q, lane, laneKey(prefix, lane)) then
      laneEnters(Q, lane)
      joined = joined + 1
    end
  end
  indexPolicy(prefix, 'throttled', nil, false)  -- the policy index follows (check.lua)
  return joined
end

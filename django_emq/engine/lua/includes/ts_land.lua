-- @include "timeshare"
-- @include "ts_bound"

-- tsLand(ts): the lane at the ring's head to serve and how many jobs its
-- credit covers (at least 1); nil when the ring is empty. The lane whose turn
-- was cut short goes on with its credit; any other gets its quantum. Lanes in
-- debt even then rotate on (their credit written), at most TS_SKIPS per claim.
local function tsLand(ts)
  local Q = ts.Q
  while true do
    local lane = redis.call('LINDEX', Q.ring, 0)
    if not lane then return nil end
    local got = redis.call('HMGET', ts.key, lane, lane .. ':avg')
    local credit = tonumber(got[1]) or 0
    local est = tonumber(got[2])
    if not est or est < 1 then est = math.max(1, math.ceil(ts.q)) end  -- one job a landing
    local w = 1
    if ts.weighted then w = tonumber(redis.call('HGET', Q.weights, lane)) or 1 end
    if lane ~= ts.head then credit = credit + ts.q * w end  -- a new turn
    ts.head = nil  -- only the first lane a claim sees can go on with a turn
    credit = tsBound(credit, ts.q, w)  -- a credit kept from a larger quantum shrinks
    if credit > 0 or ts.skips >= TS_SKIPS then
      ts.lane, ts.credit, ts.est, ts.w = lane, credit, est, w
      if credit <= 0 then return lane, 1 end
      return lane, math.ceil(credit / est)
    end
    redis.call('HSET', ts.key, lane, credit)
    redis.call('LMOVE', Q.ring, Q.ring, 'LEFT', 'RIGHT')
    ts.skips = ts.skips + 1
  end
end

-- @include "job_key"
-- @include "ts_bound"

-- tsCharge(ts, prefix, out, taken): the last `taken` jobs of the claim reply
-- `out` (8 entries each), from the lane tsLand answered, are charged its
-- estimate each: the lane's credit drops, and each row keeps its charge.
local function tsCharge(ts, prefix, out, taken)
  for i = #out - 8 * taken + 1, #out, 8 do
    redis.call('HSET', jobKey(prefix, out[i]), 'charge', ts.est)
  end
  ts.credit = ts.credit - taken * ts.est
  redis.call('HSET', ts.key, ts.lane, tsBound(ts.credit, ts.q, ts.w))
end

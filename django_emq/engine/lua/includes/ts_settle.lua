-- @include "timeshare"
-- @include "ts_bound"
-- @include "ts_key"

-- tsSettle(prefix, lane, jk, now): the job's attempt ended: its lane pays the
-- time since the claim instead of the charge made then, and the lane's average
-- and the queue's quantum learn from it. A row without a charge (claimed while
-- the queue was count-fair, or settled already) changes nothing. Call it
-- before the row is rewritten or deleted; tsActive checked the keys.
local function tsSettle(prefix, lane, jk, now)
  local row = redis.call('HMGET', jk, 'charge', 'claimed')
  local charge = tonumber(row[1])
  if not charge then return end
  local used = math.max(0, now - (tonumber(row[2]) or now))
  local key = tsKey(prefix)
  local got = redis.call('HMGET', key, lane, lane .. ':avg', 'quantum')
  local avg = tonumber(got[2])
  if avg and avg >= 1 then avg = avg + (used - avg) / TS_ALPHA else avg = used end
  avg = math.max(1, math.floor(avg + 0.5))
  local q = tonumber(got[3]) or 0
  q = math.max(avg, q - q / TS_DECAY, TS_MIN_QUANTUM)
  local w = tonumber(redis.call('HGET', prefix .. 'weights', lane)) or 1
  local credit = tsBound((tonumber(got[1]) or 0) + charge - used, q, w)
  redis.call('HSET', key, lane, credit, lane .. ':avg', avg, 'quantum', string.format('%.2f', q))
  redis.call('HDEL', jk, 'charge')
end

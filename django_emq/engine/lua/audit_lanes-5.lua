--[[
  audit_lanes: the doctor's check of lanes (reads only): the depth index
  holds each lane's real depth, the in-flight count its active set's size,
  and the lane is on the ring exactly when it is serviceable.

  KEYS[1]  onring    set    lanes on the ring
  KEYS[2]  paused    set    paused lanes
  KEYS[3]  ceilings  hash   lane -> concurrency ceiling
  KEYS[4]  inflight  hash   '@<tenant>' -> its lanes' jobs in flight
  KEYS[5]  depths    zset   lane -> pending depth
  derived: <prefix>g:<lane>:pending and :active (zsets) of each lane,
           <prefix>throttled (zset: a throttled lane is not serviceable)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2..] lanes    lane ids (validated by the caller)

  Returns a flat array, three entries per finding: lane, what, detail, where
  what is 'depth', 'inflight' or 'ring'. Keys of the wrong type are skipped
  (the doctor reports them on their own).
]]
-- @include "lane_active_key"
-- @include "lane_key"

local Q = {onring = KEYS[1], paused = KEYS[2], ceilings = KEYS[3], inflight = KEYS[4],
  depths = KEYS[5]}
local prefix = ARGV[1]
local out = {}
local function read(...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then return nil end
  return reply
end
for i = 2, #ARGV do
  local lane = ARGV[i]
  local depth = read('ZCARD', laneKey(prefix, lane))
  local active = read('ZCARD', laneActiveKey(prefix, lane))
  local indexed = tonumber(read('ZSCORE', Q.depths, lane)) or 0
  local counted = read('HGET', Q.inflight, lane)
  local report = function(what, detail)
    out[#out + 1] = lane; out[#out + 1] = what; out[#out + 1] = detail
  end
  if depth and indexed ~= depth then
    report('depth', 'the index says ' .. indexed .. ', the lane holds ' .. depth)
  end
  if counted then
    report('inflight', 'a count of ' .. counted .. ' in the in-flight hash, which counts '
      .. 'tenants (a lane\'s count is its active set\'s size, ' .. tostring(active) .. ')')
  end
  if depth and active then
    local ceiling = tonumber(read('HGET', Q.ceilings, lane))
    local serviceable = depth > 0 and read('SISMEMBER', Q.paused, lane) ~= 1
      and not (ceiling and active >= ceiling)
      and not read('ZSCORE', prefix .. 'throttled', lane)
    local onRing = read('SISMEMBER', Q.onring, lane) == 1
    if serviceable and not onRing then report('ring', 'serviceable but not on the ring') end
    -- An empty lane left on the ring by a cancel (hollow) is no fault: the next
    -- claim that lands on it drops it, as cancel-5.lua says.
    local hollow = depth == 0 and read('SISMEMBER', Q.paused, lane) ~= 1
      and not (ceiling and active >= ceiling)
    if onRing and not serviceable and not hollow then
      report('ring', 'on the ring but not serviceable')
    end
  end
end
return out

--[[
  mend_ring: the doctor's repair of a ring that disagrees with its on-ring
  set (a lane twice, or on one and not the other) and of a pending total that
  disagrees with the depth index. With ring = '1' the ring and the on-ring
  set are emptied: the doctor then puts every serviceable lane back with
  mend_lanes, in small steps (meanwhile claims serve the lanes already back,
  and an enqueue puts its lane back itself). With total = '1' the pending
  total is set to the sum of the depth index: O(lanes) in one step, run after
  the lanes are mended.

  KEYS[1]  ring      list   serviceable lanes in rotation order
  KEYS[2]  onring    set    lanes on the ring
  KEYS[3]  depths    zset   lane -> pending depth
  KEYS[4]  stats     hash   queue counters
  KEYS[5]  wake      list   wake tokens for parked workers

  ARGV[1]  ring      '1' to empty the ring, else '0'
  ARGV[2]  total     '1' to recount the pending total, else '0'
  ARGV[3..] rings    with ring = '1': the tenants' rings (<prefix>t:<tenant>:ring,
                     lists, includes/tenants.lua), emptied with it

  Returns the pending total (or -1 when it was not recounted).
]]
-- @include "check_q"

local Q = {ring = KEYS[1], onring = KEYS[2], depths = KEYS[3], stats = KEYS[4], wake = KEYS[5]}
checkQ(Q)
if ARGV[1] == '1' then
  redis.call('DEL', Q.ring, Q.onring)
  for i = 3, #ARGV do redis.call('DEL', ARGV[i]) end
end
local total = -1
if ARGV[2] == '1' then
  total = 0
  local scores = redis.call('ZRANGE', Q.depths, 0, -1, 'WITHSCORES')
  for i = 2, #scores, 2 do total = total + tonumber(scores[i]) end
  redis.call('HSET', Q.stats, 'pending', total)
end
return total

--[[
  set_weight: set a lane's weight, the number of jobs it may be served per
  turn of the ring. Weight 1 is the default and is stored as absence.

  KEYS[1]  weights   hash   lane -> weight

  ARGV[1]  lane      the lane id
  ARGV[2]  weight    an integer >= 1 (validated by the caller)

  Returns 1.
]]
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'hash' and t ~= 'none' then
  error({err = 'EMQCORRUPT ' .. KEYS[1] .. ' is a ' .. t .. ', not a hash'})
end
if ARGV[2] == '1' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
return 1

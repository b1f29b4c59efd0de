--[[
  set_weight: set a lane's weight, the number of jobs it may be served per
  turn of the ring. Weight 1 is the default and is stored as absence.

  KEYS[1]  weights   hash   lane -> weight

  ARGV[1]  lane      the lane id
  ARGV[2]  weight    an integer >= 1 (validated by the caller)

  derived: <prefix>policies (hash, the policy index: includes/check.lua),
           kept by the write

  Returns 1.
]]
-- @include "expect_type"
-- @include "index_policy"
-- @include "policy_indexed"

local prefix = string.sub(KEYS[1], 1, -8)  -- what precedes 'weights'
expectType(KEYS[1], 'hash')
policyIndexed(prefix)  -- the index follows (includes/check.lua)
if ARGV[2] == '1' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
indexPolicy(prefix, 'weights', ARGV[1], ARGV[2] ~= '1')
return 1

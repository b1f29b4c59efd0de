--[[
  set_max_depth: set or remove a lane's max depth (the most pending jobs it
  may hold; an enqueue beyond it is refused). Jobs already pending stay.

  KEYS[1]  maxdepth  hash   lane -> max depth

  ARGV[1]  lane      the lane id (validated by the caller)
  ARGV[2]  max_depth a positive integer, or '' to remove the lane's own
                     (the queue's default applies again, if it has one)

  derived: <prefix>policies (hash, the policy index: includes/check.lua),
           kept by the write

  Returns 1, or fails with EMQCORRUPT (nothing written) when the hash is no hash.
]]
-- @include "expect_type"
-- @include "index_policy"
-- @include "policy_indexed"

expectType(KEYS[1], 'hash')
policyIndexed(string.sub(KEYS[1], 1, -9))  -- the index follows (includes/check.lua)
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
indexPolicy(string.sub(KEYS[1], 1, -9), 'maxdepth', ARGV[1], ARGV[2] ~= '')
return 1

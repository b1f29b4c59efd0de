-- @include "check_tenant_of"
-- @include "expect_type"
-- @include "guard"
-- @include "lane_key"

-- dueLanes(prefix, now, limit): the throttled lanes whose slot is due (at
-- most `limit`), each lane's pending set checked to be a sorted set. Reads
-- only: unthrottle() writes.
local function dueLanes(prefix, now, limit)
  local due = guard(prefix .. 'throttled', 'ZRANGEBYSCORE', prefix .. 'throttled', '-inf', now,
    'LIMIT', 0, limit)
  for _, lane in ipairs(due) do
    expectType(laneKey(prefix, lane), 'zset')
    checkTenantOf(prefix, lane)  -- [tenants] a tenanted lane rejoins its tenant's ring
  end
  return due
end

-- @include "check_lane"
-- @include "check_tenant_of"
-- @include "guard"
-- @include "job_key"
-- @include "lane_dead_key"


-- deadBatch(Q, prefix, lane, limit, ids): the dead jobs one call works on.
-- With ids (a table, may be empty) those ids, each checked to be a dead job
-- (and of `lane`, when a lane is given); else up to `limit` of the lane's
-- dead jobs, oldest death first. Returns a list of {id, jk, lane, seq} and
-- the list of ids to drop from the dead sets (see below).
-- Reads only, checking every row and lane key it meets (check.lua), so the
-- caller writes after it. A lane's dead set member whose row is gone or not
-- dead is to be dropped from the dead sets, so a lane-wide loop always makes
-- progress. Q needs .dead.
local function deadBatch(Q, prefix, lane, limit, ids)
  local fromLane = #ids == 0
  if lane ~= '' then checkLane(prefix, lane) end
  if fromLane then
    ids = redis.call('ZRANGE', laneDeadKey(prefix, lane), 0, limit - 1)
  end
  local batch, stale, checked = {}, {}, {}
  for _, id in ipairs(ids) do
    local jk = jobKey(prefix, id)
    local row = guard(jk, 'HMGET', jk, 'state', 'group', 'seq')
    if row[1] == 'dead' and row[2] and (lane == '' or row[2] == lane) then
      if not checked[row[2]] then
        checkLane(prefix, row[2])
        checkTenantOf(prefix, row[2])  -- [tenants]
        checked[row[2]] = true
      end
      -- A row that lost its seq (edited by hand) goes to the head of its lane.
      batch[#batch + 1] = {id, jk, row[2], tonumber(row[3]) or 0}
    elseif fromLane then
      stale[#stale + 1] = {id, row[1] ~= 'dead'}
    end
  end
  return batch, stale
end

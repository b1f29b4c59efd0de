-- @include "item_keys"

-- deadBatch(Q, prefix, lane, limit, ids): the dead jobs one call works on.
-- With ids (a table, may be empty) those ids, each checked to be a dead job
-- (and of `lane`, when a lane is given); else up to `limit` of the lane's
-- dead jobs, oldest death first. Returns a list of {id, jk, lane, seq}.
-- A lane's dead set member whose row is gone or not dead is dropped from the
-- dead sets on the way, so a lane-wide loop always makes progress.
-- Q needs .dead.
local function deadBatch(Q, prefix, lane, limit, ids)
  local fromLane = #ids == 0
  if fromLane then
    ids = redis.call('ZRANGE', laneDeadKey(prefix, lane), 0, limit - 1)
  end
  local batch = {}
  for _, id in ipairs(ids) do
    local jk = jobKey(prefix, id)
    local row = redis.call('HMGET', jk, 'state', 'group', 'seq')
    if row[1] == 'dead' and row[2] and (lane == '' or row[2] == lane) then
      -- A row that lost its seq (edited by hand) goes to the head of its lane.
      batch[#batch + 1] = {id, jk, row[2], tonumber(row[3]) or 0}
    elseif fromLane then
      redis.call('ZREM', laneDeadKey(prefix, lane), id)
      if row[1] ~= 'dead' then redis.call('ZREM', Q.dead, id) end
    end
  end
  return batch
end

--[[
  audit_members: the doctor's check of one set's members (reads only). Each
  member must have a row whose state (and lane, for a lane's set) says it
  belongs in this set.

  KEYS[1]  set       zset   the set scanned (queue-wide or a lane's)
  derived: <prefix>job:<id> (hash) of each member

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  state     the state a member's row must have
  ARGV[3]  lane      the lane a member's row must name; '' for any
  ARGV[4..] ids      members found by ZSCAN

  Returns a flat array, three entries per finding: id, what, detail, where
  what is 'orphan' (no row, or a row that is not a hash) or 'stray' (the row
  says it belongs elsewhere: detail its state and lane). A member gone since
  the ZSCAN is skipped.
]]
-- @include "job_key"
-- @include "member"

local prefix, state, lane = ARGV[1], ARGV[2], ARGV[3]
local out = {}
for i = 4, #ARGV do
  local id = ARGV[i]
  if member(KEYS[1], id) then
    local row = redis.pcall('HMGET', jobKey(prefix, id), 'state', 'group')
    local what, detail = nil, ''
    if type(row) == 'table' and row.err then
      what = 'orphan'
    elseif not row[1] then
      what = 'orphan'
    elseif row[1] ~= state or (lane ~= '' and row[2] ~= lane) then
      what = 'stray'
      detail = tostring(row[1]) .. ' ' .. tostring(row[2])
    end
    if what then
      out[#out + 1] = id; out[#out + 1] = what; out[#out + 1] = detail
    end
  end
end
return out

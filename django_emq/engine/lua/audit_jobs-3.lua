--[[
  audit_jobs: the doctor's check of job rows (reads only). Each job must sit
  in exactly the places its row's state names (includes/places.lua).

  KEYS[1]  active    zset   claimed job ids by lease deadline (ms)
  KEYS[2]  schedule  zset   deferred job ids by due time (ms)
  KEYS[3]  dead      zset   dead job ids by time of death (ms)
  derived: <prefix>job:<id> (hash), <prefix>g:<lane>:pending, :active and
           :dead (zsets) of each job's lane

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2..] ids      the job ids (their rows were found by SCAN)

  Returns a flat array, three entries per finding: id, what, detail, where
  what is 'type' (the row is not a hash), 'row' (no known state or no lane),
  'missing' (not in a place its state names: detail the place) or 'extra'
  (in a place its state does not name: detail the place). A row gone since
  the SCAN is skipped.
]]
-- @include "job_key"
-- @include "places"

local Q = {active = KEYS[1], schedule = KEYS[2], dead = KEYS[3]}
local prefix = ARGV[1]
local out = {}
local function report(id, what, detail)
  out[#out + 1] = id; out[#out + 1] = what; out[#out + 1] = detail
end
for i = 2, #ARGV do
  local id = ARGV[i]
  local jk = jobKey(prefix, id)
  local kind = redis.call('TYPE', jk)['ok']
  if kind ~= 'none' then
    if kind ~= 'hash' then
      report(id, 'type', kind)
    else
      local row = redis.call('HMGET', jk, 'state', 'group')
      local want = PLACES_OF_STATE[row[1] or '']
      if not want or not row[2] then
        report(id, 'row', 'state ' .. tostring(row[1]) .. ', lane ' .. tostring(row[2]))
      else
        local at = places(Q, prefix, id, row[2])
        for _, place in ipairs({'pending', 'active', 'laneActive', 'schedule', 'dead', 'laneDead'}) do
          if want[place] and not at[place] then report(id, 'missing', place) end
          if at[place] and not want[place] then report(id, 'extra', place) end
        end
      end
    end
  end
end
return out

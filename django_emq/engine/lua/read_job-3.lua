--[[
  read_job: one job as the admin's job page shows it, in one call (reads
  only): its row, the server clock, its lease deadline, and the heartbeats
  of the workers its row keeps (`workers`, or a first attempt's `worker`), so the page can link the ones
  still alive and tell a running attempt whose lease is over.

  KEYS[1]  job       hash   the job row
  KEYS[2]  workers   hash   worker id -> heartbeat record (JSON)
  KEYS[3]  active    zset   claimed job ids by lease deadline (ms)

  ARGV[1]  id        the job id
  ARGV[2]  most      at most this many distinct worker ids are looked up
                     (a row edited by hand may name any number)

  Returns {row, time, beats, deadline}: the row as HGETALL answers it (empty:
  no such job), TIME's reply, a flat list id, record of each kept worker that
  has a heartbeat, and the job's lease deadline (ms; false when it holds no
  lease). A row of the wrong type fails the call (check.lua); a heartbeat
  hash or active set of the wrong type only leaves its part empty.
]]
-- @include "guard"

local row = guard(KEYS[1], 'HGETALL', KEYS[1])
local time = redis.call('TIME')
local beats = {}
local workers, worker
for i = 1, #row, 2 do
  if row[i] == 'workers' then workers = row[i + 1] end
  if row[i] == 'worker' then worker = row[i + 1] end
end
workers = workers or worker  -- a first attempt writes no `workers` (includes/tries.lua)
if workers then
  local ids, seen, most = {}, {}, tonumber(ARGV[2])
  for w in string.gmatch(workers, '[^,]+') do
    if #ids >= most then break end
    if not seen[w] then
      seen[w] = true
      ids[#ids + 1] = w
    end
  end
  if #ids > 0 then
    local found = redis.pcall('HMGET', KEYS[2], unpack(ids))
    if not found.err then
      for i, id in ipairs(ids) do
        if found[i] then
          beats[#beats + 1] = id
          beats[#beats + 1] = found[i]
        end
      end
    end
  end
end
local deadline = redis.pcall('ZSCORE', KEYS[3], ARGV[1])
if type(deadline) == 'table' then deadline = false end  -- an error reply
return {row, time, beats, deadline}

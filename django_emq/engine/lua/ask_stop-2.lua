--[[
  ask_stop: ask a live worker to stop after its current jobs
  (engine/worker_control.py). Live: its heartbeat record says it has not
  stopped and it beat within ARGV[2] ms (the window the admin's workers
  page uses). The request names the worker's incarnation (its start time
  and pid, from the record), so a later worker started with the same id
  ignores it. The check and the write are one step: a worker that stops or
  goes silent meanwhile is never asked.

  KEYS[1]  workers  hash   worker id -> heartbeat record (JSON)
  KEYS[2]  stops    hash   worker id -> stop request (JSON: at, of)

  ARGV[1]  worker   the worker id
  ARGV[2]  alive    ms: a beat older than this is a silent worker's

  Returns 1 when a request for that incarnation is in place (written now, or
  asked already), 0 when no live worker of that id reports (nothing written).
]]
-- @include "now_ms"

local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local ok, record = pcall(cjson.decode, raw)
if not ok or type(record) ~= 'table' then return 0 end
local beat, pid = tonumber(record['beat']), tonumber(record['pid'])
if record['stopped'] ~= nil or not beat or not pid then return 0 end
local now = nowMs()
if now - beat > tonumber(ARGV[2]) then return 0 end
local started = tonumber(record['started'])
local of = string.format('%s-%d', started and string.format('%d', started) or '', pid)

local asked = redis.call('HGET', KEYS[2], ARGV[1])
if asked then
  local read, request = pcall(cjson.decode, asked)
  if read and type(request) == 'table' and request['of'] == of then return 1 end
end
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode({at = now, of = of}))
return 1

--[[
  record_history: add what a caller gathered over many claims and completions
  to the queue's history (includes/history.lua), in one call: the claim and
  complete scripts write no history, so the hot path pays none per job. A
  worker gathers for a few hundred ms and calls this once per queue; the
  Python API calls it after each of its claims and completions
  (django_emq.engine.tally builds the arguments, computing the waits).

  KEYS[1]  finished  zset   the last FINISHED_WINDOW finished job ids by time of
                            finishing (ms)
  KEYS[2]  dueat     zset   jobs promoted before their first start, by due time
                            (ms; written by promote-9.lua)
  derived: <prefix>m:<minute> (hash: a minute's counters and wait histogram),
           <prefix>lw:<hour> (hash: every lane's wait histogram for one hour)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  nf        how many finished (done) job ids follow
  ARGV[..] nf ids    they enter the finished window and count in this
                     minute's `done`, both at this call's server time
  ARGV[..] nw        how many minute wait counts follow
  ARGV[..] nw triples  minute (epoch ms // 60000), bucket, count: jobs whose
                     first start fell in that minute with a wait in that bucket
  ARGV[..] nh        how many hours of lane wait counts follow, each:
           hour (epoch ms // 3600000), m, k, then m fields '<lane>:<bucket>',
           then k counts: the first k fields' (each other field counts 1, as
           most do: one argument per field)
  ARGV[..] ns        how many first starts the next argument holds
  ARGV[..] firsts    ns entries '<id> <lane> <start ms> <bucket>' joined by
                     ',', in one argument (most calls never read them: one
                     string is made of them, not one per job): each job
                     counted above, by the wait from its enqueue. One found
                     in KEYS[2] was deferred: its wait begins at its due time
                     instead, and its counts move to that wait's bucket (its
                     entry leaves KEYS[2]). Read only when KEYS[2] holds any
                     job.

  Every write goes through redis.pcall and its errors are dropped, as in
  includes/history.lua: the history is a by-product, and a damaged history
  key must not fail the call (the other keys' counts still land).

  Returns the number of first starts whose wait began at their due time.
]]
-- @include "counted"
-- @include "finished_jobs"
-- @include "history"
-- @include "now_ms"
-- @include "wait_bucket"

local prefix = ARGV[1]
local at = 2

-- nextArg(): the next argument (the sections have their counts in front)
local function nextArg()
  local value = ARGV[at]
  at = at + 1
  return value
end

-- move(key, from, to, ttl): one count moves from hash field `from` to `to`
-- (a field left at 0 is removed, as if never counted).
local function move(key, from, to, ttl)
  if redis.pcall('HINCRBY', key, from, -1) == 0 then redis.pcall('HDEL', key, from) end
  counted(key, to, 1, ttl)
end

local finished = {}
for i = 1, tonumber(nextArg()) do finished[i] = nextArg() end
-- the window is KEYS[1] (<prefix>finished, named for the cluster's routing);
-- the clock is read only when there is something to stamp
if #finished > 0 then finishedJobs(prefix, finished, nowMs(), 'done') end

for _ = 1, tonumber(nextArg()) do
  local minute, bucket, n = nextArg(), nextArg(), nextArg()
  counted(prefix .. 'm:' .. minute, 'w' .. bucket, n, METRIC_TTL_MS)
end

-- the lanes' counts, an hour at a time: the hour's fields are read by one
-- HMGET and written back added up by one HSET (with many lanes a round holds
-- each lane about once: one HINCRBY per field would be one command per job).
-- A field holding no whole number (edited by hand) is left as it is and its
-- count dropped, as HINCRBY would refuse it; the doctor reports it. (A whole
-- number of 16 digits or more is dropped too: Lua's numbers are doubles, and
-- no count of jobs gets near.)
for _ = 1, tonumber(nextArg()) do
  local key = prefix .. 'lw:' .. nextArg()
  local m, k = tonumber(nextArg()), tonumber(nextArg())
  local fields, counts = at, at + m
  at = counts + k
  local old = redis.pcall('HMGET', key, unpack(ARGV, fields, counts - 1))
  if type(old) == 'table' and not old.err then
    local sets = {}
    for i = 1, m do
      local n = 1
      if i <= k then n = tonumber(ARGV[counts + i - 1]) end
      local value = old[i]
      if value then
        value = string.match(value, '^-?%d+$') and #value < 16 and tonumber(value)
      else
        value = 0
      end
      if value then
        sets[#sets + 1] = ARGV[fields + i - 1]
        sets[#sets + 1] = value + n
      end
    end
    if #sets > 0 then redis.pcall('HSET', key, unpack(sets)) end
    redis.pcall('PEXPIRE', key, LANE_WAIT_TTL_MS)
  end
end

-- the first starts: looked up only when some promoted job waits for its first
-- start (most queues defer nothing: one ZCARD, and the ids are not read)
local ns, firsts = tonumber(nextArg()), nextArg()
local moved = 0
if ns > 0 and redis.pcall('ZCARD', KEYS[2]) ~= 0 then
  local starts, ids = {}, {}
  for id, lane, start, bucket in string.gmatch(firsts, '([^ ,]+) ([^ ,]+) (%d+) (%d+)') do
    starts[#starts + 1] = {lane, tonumber(start), bucket}
    ids[#ids + 1] = id
  end
  local dues = redis.pcall('ZMSCORE', KEYS[2], unpack(ids))
  if type(dues) == 'table' and not dues.err then
    local found = {}
    for i, due in ipairs(dues) do
      if due then
        found[#found + 1] = ids[i]
        local lane, start, old = starts[i][1], starts[i][2], starts[i][3]
        local new = tostring(waitBucket(math.max(0, start - tonumber(due))))
        if new ~= old then
          local minute = prefix .. 'm:' .. math.floor(start / 60000)
          local hour = prefix .. 'lw:' .. math.floor(start / 3600000)
          move(minute, 'w' .. old, 'w' .. new, METRIC_TTL_MS)
          move(hour, lane .. ':' .. old, lane .. ':' .. new, LANE_WAIT_TTL_MS)
        end
      end
    end
    if #found > 0 then redis.pcall('ZREM', KEYS[2], unpack(found)) end
    moved = #found
  end
end
return moved

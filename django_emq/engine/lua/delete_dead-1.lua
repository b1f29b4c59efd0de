--[[
  delete_dead: delete dead jobs, rows included. Works on the given ids, or on
  up to `limit` of one lane's dead jobs per call (the client loops).

  KEYS[1]  dead      zset   dead job ids by time of death (ms)
  derived: <prefix>g:<lane>:dead (zset), <prefix>job:<id> (hash)

  ARGV[1]  prefix    the queue's key prefix, emq:{q}:
  ARGV[2]  lane      only this lane's dead jobs; '' for any lane (ids only)
  ARGV[3]  limit     with no ids: at most this many of the lane's dead jobs
  ARGV[4..] ids      the job ids; none means "the lane's dead jobs"

  Returns {deleted, remaining}: remaining is the lane's dead jobs left
  (0 when no lane is given). Ids that are not dead jobs (of the lane) are
  skipped. Every key is checked before the first write (check.lua).
]]
-- @include "dead_batch"
-- @include "drop_stale"
-- @include "expect_type"
-- @include "lane_dead_key"

local Q = {dead = KEYS[1]}
local prefix, lane = ARGV[1], ARGV[2]
expectType(Q.dead, 'zset')
local batch, stale = deadBatch(Q, prefix, lane, tonumber(ARGV[3]), {unpack(ARGV, 4)})
dropStale(Q, prefix, lane, stale)
for _, job in ipairs(batch) do
  redis.call('ZREM', Q.dead, job[1])
  redis.call('ZREM', laneDeadKey(prefix, job[3]), job[1])
  redis.call('DEL', job[2])
end
local remaining = 0
if lane ~= '' then remaining = redis.call('ZCARD', laneDeadKey(prefix, lane)) end
return {#batch, remaining}

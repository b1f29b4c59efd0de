-- @include "now_ms"
-- @include "item_keys"
-- @include "fence"
-- @include "ring"

-- completeJobs(Q, prefix, ttl, argv, first): record the success of the jobs
-- named in argv[first..] (one triple each: id, token, result JSON), each
-- fenced by its own token. A refused job (no such job, stale token) changes
-- nothing and the others are still recorded. Each lane's in-flight count
-- drops once for all its jobs, so a lane held at its ceiling may rejoin the
-- ring. Returns one code per job: 1 recorded, -1 no such job, -2 stale token.
-- Q needs .ring, .onring, .active, .paused, .ceilings, .inflight, .stats, .wake.
local function completeJobs(Q, prefix, ttl, argv, first)
  local now = nowMs()
  local codes, done, byLane, lanes = {}, {}, {}, {}
  for i = first, #argv, 3 do
    local id = argv[i]
    local jk = jobKey(prefix, id)
    local lane = fence(jk, argv[i + 1])
    if type(lane) == 'number' then
      codes[#codes + 1] = lane
    else
      codes[#codes + 1] = 1
      done[#done + 1] = id
      if ttl > 0 then
        redis.call('HSET', jk, 'state', 'done', 'finished', now, 'result', argv[i + 2])
        redis.call('PEXPIRE', jk, ttl)
      else
        redis.call('DEL', jk)
      end
      local ids = byLane[lane]
      if not ids then
        ids = {}
        byLane[lane] = ids
        lanes[#lanes + 1] = lane
      end
      ids[#ids + 1] = id
    end
  end
  if #done > 0 then
    redis.call('ZREM', Q.active, unpack(done))
    redis.call('HINCRBY', Q.stats, 'completed', #done)
    for _, lane in ipairs(lanes) do
      local ids = byLane[lane]
      redis.call('ZREM', laneActiveKey(prefix, lane), unpack(ids))
      if redis.call('HINCRBY', Q.inflight, lane, -#ids) <= 0 then
        redis.call('HDEL', Q.inflight, lane)
      end
      joinRing(Q, lane, laneKey(prefix, lane))
    end
  end
  return codes
end

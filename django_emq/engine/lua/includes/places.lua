-- @include "lane_active_key"
-- @include "lane_dead_key"
-- @include "lane_key"
-- @include "member"


-- PLACES_OF_STATE: the places a job of each state must be in (and no other).
local PLACES_OF_STATE = {
  pending = {pending = true},
  active = {active = true, laneActive = true},
  scheduled = {schedule = true},
  dead = {dead = true, laneDead = true},
  done = {},
  cancelled = {},
}

-- places(Q, prefix, id, lane): where job id sits, as a table of flags:
-- pending (its lane's pending set), active, laneActive, schedule, dead,
-- laneDead. Q needs .active, .schedule, .dead.
local function places(Q, prefix, id, lane)
  return {
    pending = member(laneKey(prefix, lane), id),
    active = member(Q.active, id),
    laneActive = member(laneActiveKey(prefix, lane), id),
    schedule = member(Q.schedule, id),
    dead = member(Q.dead, id),
    laneDead = member(laneDeadKey(prefix, lane), id),
  }
end

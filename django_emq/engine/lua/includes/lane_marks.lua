-- @include "check"

-- laneMarks: documented in includes/check.lua.
local function laneMarks(prefix, name)
  if POLICY_FLAGS == nil then return nil end
  local marks = LANE_MARKS[name]
  if marks == nil then
    -- policiesOff's guarded read checked the index's type
    marks = redis.call('HGET', prefix .. 'policies', name) or ''
    -- a character that is no letter (a hand edit): unknown, ask the hashes
    if string.find(marks, POLICY_ALIEN) then marks = false end
    LANE_MARKS[name] = marks
  end
  return marks or nil
end

-- laneKey(prefix, lane), laneActiveKey(prefix, lane), laneDeadKey(prefix, lane)
-- and jobKey(prefix, id): the families of per-item keys, built exactly as
-- django_emq.engine.keys.QueueKeys.pending / .lane_active / .lane_dead / .job build them.
local function laneKey(prefix, lane)
  return prefix .. 'g:' .. lane .. ':pending'
end

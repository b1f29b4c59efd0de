-- laneKey(prefix, lane) and jobKey(prefix, id): the two families of per-item
-- keys, built exactly as django_emq.keys.QueueKeys.pending / .job build them.
local function laneKey(prefix, lane)
  return prefix .. 'g:' .. lane .. ':pending'
end

local function jobKey(prefix, id)
  return prefix .. 'job:' .. id
end

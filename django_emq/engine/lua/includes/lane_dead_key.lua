local function laneDeadKey(prefix, lane)
  return prefix .. 'g:' .. lane .. ':dead'
end

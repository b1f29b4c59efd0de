local function laneActiveKey(prefix, lane)
  return prefix .. 'g:' .. lane .. ':active'
end

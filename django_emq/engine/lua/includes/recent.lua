-- recent(list, id, keep): the comma-separated ids of `list` with id added, the
-- last `keep` kept: a row's `workers` and `tries` as a claim extends them (the
-- job's attempts counter says how many claims there were, see tries.lua).
local function recent(list, id, keep)
  if not list or list == '' then return id end
  local ids = {}
  for w in string.gmatch(list, '[^,]+') do ids[#ids + 1] = w end
  ids[#ids + 1] = id
  local from = math.max(1, #ids - keep + 1)
  return table.concat(ids, ',', from)
end

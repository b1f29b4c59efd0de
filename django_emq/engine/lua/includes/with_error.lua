-- withError(errorsJson, total, error, keep): the row's `errors` (a JSON array
-- of the latest failures' texts) and `errors_total` (how many failures there
-- were in all) once error is added, only the latest `keep` kept, so a row
-- stays the same size however often its job fails. A list that does not
-- decode (edited by hand) starts over. Returns (json, total).
local function withError(errorsJson, total, error, keep)
  local ok, errors = pcall(cjson.decode, errorsJson or '[]')
  if not ok or type(errors) ~= 'table' then errors = {} end
  errors[#errors + 1] = error
  local from = math.max(1, #errors - keep + 1)
  local kept = {}
  for i = from, #errors do kept[#kept + 1] = errors[i] end
  -- rows written before errors_total existed count what their list holds
  total = (tonumber(total) or (#errors - 1)) + 1
  -- cjson encodes an empty table as an object; kept is never empty here
  return cjson.encode(kept), total
end

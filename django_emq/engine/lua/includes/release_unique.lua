-- @include "release_unique_of"

-- releaseUnique(prefix, jk, id): a job that finishes (done, dead, drained,
-- moved away) frees the unique key it holds, if any. Call it while the row
-- still names its lane; the unique hash's type was checked (anyUnique). A
-- holder entry left by a row that could not be read is harmless: a holder
-- whose row is gone or finished holds nothing (uniqueHolder).
local function releaseUnique(prefix, jk, id)
  -- a row of the wrong type (drain deletes it all the same) holds nothing
  local row = redis.pcall('HMGET', jk, 'uniq', 'group')
  if row.err or not row[1] then return end
  releaseUniqueOf(prefix, jk, id, row[1], row[2])
end

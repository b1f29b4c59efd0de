-- @include "counted"
-- @include "history"

-- countEvent(prefix, now, field, n): add n to this minute's counter `field`.
local function countEvent(prefix, now, field, n)
  counted(prefix .. 'm:' .. math.floor(now / 60000), field, n, METRIC_TTL_MS)
end

-- @include "timeshare"

-- tsBound(credit, q, w): credit held within its bounds, a whole number of ms.
local function tsBound(credit, q, w)
  local most, least = TS_MOST * q * w, -TS_DEBT * q * w
  if credit > most then credit = most end
  if credit < least then credit = least end
  return math.floor(credit + 0.5)
end

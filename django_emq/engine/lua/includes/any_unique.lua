-- @include "in_use"

-- anyUnique(prefix): whether any job holds a unique key (most queues: none,
-- and then nothing finishing looks one up). A read that checks the hash's type.
local function anyUnique(prefix)
  return inUse(prefix .. 'unique')
end

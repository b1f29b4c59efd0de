-- @include "in_use"

-- anyUnique(prefix): whether any job holds a unique key (most queues: none,
-- and then nothing finishing looks one up). Reading the hash itself (inUse)
-- checks its type; after policiesOff the index answers, and a caller that
-- frees a key checks the hash's type first (includes/complete_jobs.lua).
local function anyUnique(prefix)
  return inUse(prefix .. 'unique')
end

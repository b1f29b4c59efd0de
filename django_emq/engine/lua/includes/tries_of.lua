-- triesOf(tries, claimed, workers): a row's `tries` as a later write extends
-- it. A first attempt writes neither `tries` nor `workers` (its one entry is
-- the row's `claimed`, see includes/tries.lua): `claimed` stands for it then.
-- nil when there is none to extend: never claimed, or a row from before
-- tries were kept (it has `workers` but no `tries`).
local function triesOf(tries, claimed, workers)
  if tries and tries ~= '' then return tries end
  if workers then return nil end
  return claimed
end

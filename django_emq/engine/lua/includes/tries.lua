-- A job row's `tries`: the latest attempts' times and outcomes, oldest first,
-- comma-separated, at most the queue's history (EMQ HISTORY) of them, like
-- `workers` (the claim appends, see claim_turns.lua: the same recent()).
-- One entry per claim:
--   <start>                      running (or ended with nothing recorded)
--   <start>+<ms><outcome>[<n>]   ended <ms> after it started (server clock)
-- outcome: d done, f failed (n: the failure's number, the row's errors_total
-- then, so the page finds its text in `errors`), x its lease expired (n when
-- that made it dead), r released (handed back by its worker).
-- Python reads this in django_emq.engine.rows (attempt_history).

-- endTry(tries, now, outcome): `tries` with its last entry ended now with
-- `outcome` ('d', 'f12', ...); nil when there is no running entry to end (a
-- row from before tries were kept, or edited by hand): nothing to write then.
local function endTry(tries, now, outcome)
  if not tries or tries == '' then return nil end
  local start = string.match(tries, '[^,]*$')
  if not string.match(start, '^%d+$') then return nil end
  local took = now - tonumber(start)
  if took < 0 then took = 0 end  -- the server's clock stepped back
  return tries .. '+' .. took .. outcome
end

-- withTry(fields, tries, now, outcome): fields (a flat HSET list) with
-- 'tries' and its ended value added when there is an entry to end.
local function withTry(fields, tries, now, outcome)
  local ended = endTry(tries, now, outcome)
  if ended then
    fields[#fields + 1] = 'tries'
    fields[#fields + 1] = ended
  end
  return fields
end

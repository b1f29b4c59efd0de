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

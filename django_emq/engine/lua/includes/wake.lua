-- wake(Q, n): leave n wake tokens for parked workers (each blocked BLPOP takes
-- one). The list is capped so tokens left while nobody waits stay few.
-- Q needs .wake.
local function wake(Q, n)
  if n <= 0 then return end
  local tokens = {}
  for i = 1, math.min(n, 64) do tokens[i] = '1' end
  redis.call('RPUSH', Q.wake, unpack(tokens))
  redis.call('LTRIM', Q.wake, -64, -1)
end

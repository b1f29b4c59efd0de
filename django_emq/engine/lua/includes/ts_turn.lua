-- tsTurn(ts, lane): the claim ends with `lane`'s turn cut short (it keeps the
-- head), or with no turn going on (lane nil).
local function tsTurn(ts, lane)
  if lane == ts.saved then return end
  if lane then
    redis.call('HSET', ts.key, 'head', lane)
  else
    redis.call('HDEL', ts.key, 'head')
  end
end

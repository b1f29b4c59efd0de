-- prefixOfQ(Q): the queue's key prefix, from Q.onring ('<prefix>onring').
local function prefixOfQ(Q)
  return string.sub(Q.onring, 1, -7)
end

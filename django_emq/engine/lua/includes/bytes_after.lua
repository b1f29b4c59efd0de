-- Whether string a sorts after string b byte by byte, as a sorted set orders
-- members of one score (Lua's own < follows the server's locale: not that).
local function bytesAfter(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end

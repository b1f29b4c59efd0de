local function jobKey(prefix, id)
  return prefix .. 'job:' .. id
end

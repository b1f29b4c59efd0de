-- corrupt: documented in includes/check.lua.
local function corrupt(key, detail)
  error({err = 'EMQCORRUPT ' .. key .. ' ' .. detail})
end

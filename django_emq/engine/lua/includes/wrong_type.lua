-- wrongType(key, err): the detail a corrupt error gives for key, whose
-- command failed with err.
local function wrongType(key, err)
  return 'is a ' .. redis.call('TYPE', key)['ok'] .. ' (' .. err .. ')'
end

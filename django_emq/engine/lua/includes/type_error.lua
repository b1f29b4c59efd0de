-- typeError(err): whether a command's error says its key or field holds the
-- wrong kind of value (anything else, an out-of-memory refusal say, is no
-- corruption and is raised as it is).
local function typeError(err)
  return string.find(err, 'WRONGTYPE', 1, true) ~= nil
    or string.find(err, 'not an integer', 1, true) ~= nil
    or string.find(err, 'not a valid float', 1, true) ~= nil
end

-- The checks a script makes before its first write. Valkey does not roll a
-- script back when a command inside it fails, so a key holding the wrong type
-- (edited by hand, or left by something else) must be found while nothing has
-- been written yet. Each check aborts the script with an error reply
--   EMQCORRUPT <key> <what is wrong>
-- which the library raises as django_emq.exceptions.CorruptKeyspace.
--
-- corrupt(key, detail): abort naming the key. Only before the first write.
-- expectType(key, want): TYPE check; a key that does not exist passes. Each
--   key is checked once per script call (a script that checked it already,
--   say the completion half of complete_claim, sends no second TYPE).
-- checkQ(Q, names): expectType on each named fixed key of Q (KEY_TYPES says
--   what each must be); with names nil, on every key Q holds.
-- inUse(key): whether the hash `key` has a field (a policy's hash: weights,
--   ceilings, rates, tenants, unique, timeshare), guarded, read once per
--   script call.
-- policiesOff(prefix): the hot paths' one read for every lane policy: true
--   when none of the policies' hashes (POLICY_HASHES) exists (a hash with no
--   field does not exist), one EXISTS over them all; inUse then answers
--   false for each without a command. When some exist (or one holds the wrong
--   type), each policy asks inUse as it would have.
-- guard(key, ...): run the command that first touches key (a read, or the
--   script's first write, which fails alone) through redis.pcall, aborting
--   with the corrupt error instead of a bare WRONGTYPE: a check that costs no
--   command of its own. Other errors (out of memory) pass as they are.
-- fail(key, err): abort as guard does, for a pcall the caller made itself.
-- checkLane(prefix, lane): expectType on the lane's pending, active and dead
--   sets.
-- @include "item_keys"

local KEY_TYPES = {ring = 'list', onring = 'set', active = 'zset', schedule = 'zset',
  dead = 'zset', paused = 'set', ceilings = 'hash', weights = 'hash', inflight = 'hash',
  depths = 'zset', stats = 'hash', seq = 'string', wake = 'list', turn = 'hash'}

local function corrupt(key, detail)
  error({err = 'EMQCORRUPT ' .. key .. ' ' .. detail})
end

local TYPE_CHECKED = {}

local function expectType(key, want)
  if TYPE_CHECKED[key] then return end
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= want and kind ~= 'none' then
    corrupt(key, 'is a ' .. kind .. ', not a ' .. want)
  end
  TYPE_CHECKED[key] = true
end

local function checkQ(Q, names)
  if names == nil then
    names = {}
    for name in pairs(Q) do names[#names + 1] = name end
    table.sort(names)
  end
  for _, name in ipairs(names) do expectType(Q[name], KEY_TYPES[name]) end
end

-- wrongType(key, err): the detail a corrupt error gives for key, whose
-- command failed with err.
local function wrongType(key, err)
  return 'is a ' .. redis.call('TYPE', key)['ok'] .. ' (' .. err .. ')'
end

-- typeError(err): whether a command's error says its key or field holds the
-- wrong kind of value (anything else, an out-of-memory refusal say, is no
-- corruption and is raised as it is).
local function typeError(err)
  return string.find(err, 'WRONGTYPE', 1, true) ~= nil
    or string.find(err, 'not an integer', 1, true) ~= nil
    or string.find(err, 'not a valid float', 1, true) ~= nil
end

-- fail(key, err): abort with the corrupt error when err is a type error, else
-- with err itself.
local function fail(key, err)
  if typeError(err) then corrupt(key, wrongType(key, err)) end
  error({err = err})
end

local function guard(key, ...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then fail(key, reply.err) end
  return reply
end

local IN_USE = {}

local function inUse(key)
  local known = IN_USE[key]
  if known == nil then
    known = guard(key, 'HLEN', key) > 0
    IN_USE[key] = known
  end
  return known
end

-- derived: <prefix>weights, ceilings, rates, tenants, unique, timeshare
-- (the hashes of includes/claim_turns.lua, rate.lua, tenants.lua,
-- policies.lua, timeshare.lua)
local POLICY_HASHES = {'weights', 'ceilings', 'rates', 'tenants', 'unique', 'timeshare'}
local POLICIES_OFF = nil

local function policiesOff(prefix)
  if POLICIES_OFF == nil then
    local keys = {}
    for i, name in ipairs(POLICY_HASHES) do keys[i] = prefix .. name end
    POLICIES_OFF = redis.call('EXISTS', unpack(keys)) == 0
    if POLICIES_OFF then
      for _, key in ipairs(keys) do IN_USE[key] = false end
    end
  end
  return POLICIES_OFF
end

local function checkLane(prefix, lane)
  expectType(laneKey(prefix, lane), 'zset')
  expectType(laneActiveKey(prefix, lane), 'zset')
  expectType(laneDeadKey(prefix, lane), 'zset')
end

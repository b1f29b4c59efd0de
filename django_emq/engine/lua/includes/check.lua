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
-- The policy index, <prefix>policies (hash): the hot paths' one read for the
--   lane policies. Field '*' holds the letter (POLICY_HASHES) of each policy
--   hash that may hold a field: a write that adds a field to one adds its
--   letter, a write that empties one drops it (a letter left on an empty hash
--   costs a lookup, never a wrong answer). A lane's field, or a tenant
--   entry's ('@<tenant>'), holds the letters of the per-lane hashes (those
--   POLICY_HASHES marks true) that hold a field for it, in POLICY_HASHES
--   order; no field: none. Every write of those hashes keeps it (indexPolicy);
--   the doctor audits and mends it (audit_index-1.lua, mend_index-1.lua).
--   A lane without a field pays no lookup for any per-lane policy.
-- policiesOff(prefix): reads the index's '*' (guarded: an index of the wrong
--   type aborts the script before any write); true when no letter is set.
--   inUse then answers each policy hash from it, and laneMarks reads lanes'
--   fields. The scripts that do not call it ask the hashes as before.
-- inUse(key): whether the policy hash `key` holds a field: from the index
--   when policiesOff read it, else one HLEN (guarded), once per script call.
-- laneMarks(prefix, name): the letters of the lane's (or tenant entry's)
--   per-lane settings ('' for none), one HGET per script call; nil when the
--   script did not read the index (policiesOff): then ask the hashes.
-- marked(marks, hash): whether marks (laneMarks) name the policy hash `hash`
--   ('weights', ...); true for marks nil (not known: look it up).
-- indexMarks(prefix, name): the letters the index must hold for `name` (a
--   lane, '@<tenant>', or '*'), read from the policy hashes (the doctor's).
-- indexPolicy(prefix, hash, name, added): a write of <prefix><hash> is done:
--   the index follows, for `name`'s field (nil: a hash that names no lanes)
--   and for '*'. `added`: the write added a field (the hash is in use: no
--   read). Never aborts: an index of the wrong type is left to the doctor
--   (the hot paths refuse it meanwhile).
-- guard(key, ...): run the command that first touches key (a read, or the
--   script's first write, which fails alone) through redis.pcall, aborting
--   with the corrupt error instead of a bare WRONGTYPE: a check that costs no
--   command of its own. Other errors (out of memory) pass as they are.
-- fail(key, err): abort as guard does, for a pcall the caller made itself.
-- checkLane(prefix, lane): expectType on the lane's pending, active and dead
--   sets.


local KEY_TYPES = {ring = 'list', onring = 'set', active = 'zset', schedule = 'zset',
  dead = 'zset', paused = 'set', ceilings = 'hash', weights = 'hash', inflight = 'hash',
  depths = 'zset', stats = 'hash', seq = 'string', wake = 'list', turn = 'hash'}
local TYPE_CHECKED = {}
local IN_USE = {}
-- derived: <prefix><name> for each name: {name, letter, whether its fields are
-- lanes' own settings}. Generated from the policy registry (each policy's
-- probe hashes, django_emq/engine/policies/): run
-- python -m django_emq.engine.policies.probe after adding a policy.
local POLICY_HASHES = {{'weights', 'w', true}, {'ceilings', 'c', true}, {'turn', 'n', false}, {'maxdepth', 'd', true}, {'rates', 'r', true}, {'throttled', 'h', false}, {'tenants', 't', true}, {'unique', 'u', false}, {'timeshare', 's', false}}
local POLICY_LETTER = {weights = 'w', ceilings = 'c', turn = 'n', maxdepth = 'd', rates = 'r', throttled = 'h', tenants = 't', unique = 'u', timeshare = 's'}
local POLICIES_OFF = nil
local POLICY_FLAGS = nil -- the index's '*' as this call read (and wrote) it
local LANE_MARKS = {}    -- name -> its letters in the index, read once a call

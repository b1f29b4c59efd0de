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
--   The index is in force when its '*' field is there ('' for no letter). A
--   queue without it is new (no policy key holds anything: the index is in
--   force, empty, and the first call that writes records '*'), or holds only
--   keys that name no lane (unique keys, time-fair credit, ...: '*' is built
--   from their EXISTS and recorded the same way), or was written by a
--   release before the index with lanes' settings (every policy is then
--   asked of its keys, as then, until the doctor's repair builds the index):
--   nothing changes for a queue on upgrade.
--   A '*' or a lane's field holding a character that is no letter
--   (POLICY_ALIEN: a hand edit) is read as unknown: such a '*' as no index
--   (every policy asked of its keys), such a field as nil (laneMarks).
-- policyIndexed(prefix): whether the index is in force, in the read phase
--   (guarded: an index of the wrong type aborts the script): one HGET of
--   '*', and when there is none one EXISTS over the policy keys. A script
--   that writes a policy key calls it before its first write.
-- policiesOff(prefix): the hot paths' one read for every lane policy
--   (policyIndexed): true when the index is in force and names no policy.
--   inUse then answers each policy key from it, and laneMarks reads lanes'
--   fields. An index not in force: false, and each policy is asked of its
--   keys. The scripts that do not call it ask the keys as before.
-- indexRecorded(prefix): a hot path's last write: '*' recorded for a queue
--   whose index policyIndexed found in force without one, so the next call
--   reads one field.
-- inUse(key, count): whether the policy key `key` holds anything: from the
--   index when policiesOff read it, else one `count` (HLEN, or ZCARD for a
--   sorted set; guarded), once per script call.
-- laneMarks(prefix, name): the letters of the lane's (or tenant entry's)
--   per-lane settings ('' for none), one HGET per script call; nil when the
--   script did not read the index (policiesOff), or the field is unknown:
--   then ask the hashes.
-- marked(marks, hash): whether marks (laneMarks) name the policy hash `hash`
--   ('weights', ...); true for marks nil (not known: look it up).
-- indexMarks(prefix, name): the letters the index must hold for `name` (a
--   lane, '@<tenant>', or '*'), read from the policy hashes (the doctor's).
-- indexPolicy(prefix, hash, name, added): a write of <prefix><hash> is done:
--   the index follows, for `name`'s field (nil: a hash that names no lanes)
--   and for '*'. `added`: the write added a field (the hash is in use: no
--   read). `name`'s field is kept whether or not the index is in force (a
--   repair building it, '*' last, misses no write made meanwhile); '*' only
--   where it is (policyIndexed, asked before the write; a write that frees
--   something may ask after: '*' is there).
--   Never aborts: an index of the wrong type is left to the doctor (the hot
--   paths refuse it meanwhile).
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
local POLICY_ALIEN = '[^wcndrhtus]'
local POLICY_LETTER = {weights = 'w', ceilings = 'c', turn = 'n', maxdepth = 'd', rates = 'r', throttled = 'h', tenants = 't', unique = 'u', timeshare = 's'}
local POLICIES_OFF = nil
local INDEXED = nil      -- whether the index is in force (policyIndexed)
local UNRECORDED = false -- in force by default (no '*', no policy key): '*' to write
local POLICY_FLAGS_READ = nil -- the index's '*' as this call read (and wrote) it
local POLICY_FLAGS = nil -- the same, once policiesOff answered from it
local LANE_MARKS = {}    -- name -> its letters in the index, read once a call

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


local KEY_TYPES = {ring = 'list', onring = 'set', active = 'zset', schedule = 'zset',
  dead = 'zset', paused = 'set', ceilings = 'hash', weights = 'hash', inflight = 'hash',
  depths = 'zset', stats = 'hash', seq = 'string', wake = 'list', turn = 'hash'}
local TYPE_CHECKED = {}
local IN_USE = {}
-- derived: <prefix><name> for each name. Generated from the policy registry
-- (each policy's probe hashes, django_emq/engine/policies/): run
-- python -m django_emq.engine.policies.probe after adding a policy.
local POLICY_HASHES = {'weights', 'ceilings', 'rates', 'tenants', 'unique', 'timeshare'}
local POLICIES_OFF = nil

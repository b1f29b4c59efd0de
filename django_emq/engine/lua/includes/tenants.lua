-- Tenant lanes: two levels of rotation (docs/tenants.md). A lane may belong to
-- a tenant (a tenant id is validated like a lane id). The top ring holds the
-- untenanted lanes and one entry '@<tenant>' per tenant that can be served;
-- each tenant has its own ring of its serviceable lanes. A claim that lands
-- on a tenant's entry serves the lane at the head of the tenant's ring. '@'
-- is never part of a lane id, so no lookup tells a lane from an entry.
--
-- derived: <prefix>tenants          hash: lane -> its tenant (recorded by enqueue)
--          <prefix>t:<tenant>:ring  list: the tenant's serviceable lanes, in
--                                   rotation order
--          <prefix>tturns           hash: tenant -> '<lane> <credit>': the rest
--                                   of the weighted turn of the lane at the head
--                                   of the tenant's ring, when a claim cut it short
-- The entry '@<tenant>' also stands for the tenant in the lanes' own keys:
-- ring and onring (the entry, while the tenant can be served: a lane on its
-- ring and headroom under its ceiling), weights (its weight: jobs per turn of
-- the top ring), ceilings (its ceiling: its lanes' jobs in flight together)
-- and inflight (its lanes' jobs in flight together). onring holds every lane
-- on a ring, the top one or its tenant's.
--
-- A script calls checkTenantOf (or anyTenants) in its read phase for every
-- lane it may put on or take off a ring: the writes below assume the types.


local tenantsSeen = nil -- whether the queue has tenanted lanes (read once a script)
local tenantMemo = {}    -- lane -> its tenant, or false (read once a script)
local ringChecked = {}   -- tenant -> true once its ring's type is checked
local cappedMemo = {}    -- tenant -> whether it has a ceiling (read once a script)

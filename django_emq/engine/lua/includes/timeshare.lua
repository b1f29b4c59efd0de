-- Time-fair share (a queue with FAIRNESS "time"): deficit round robin over
-- worker time. A lane that lands at the ring's head gets one quantum (x its
-- weight) added to its credit; a lane with credit is served, each job charged
-- the lane's average run time, and keeps the head while its credit lasts (a
-- claim cut short leaves the rest of the turn for the next: no new quantum
-- then); a lane still in debt after its quantum rotates on unserved. When a
-- job's attempt ends (done, failed, retried, released, reaped) its lane pays
-- what it really used instead: the time from its claim to now, both on the
-- server clock.
-- derived: <prefix>timeshare (hash): '<lane>' -> the lane's credit in ms
--          (negative: its debt), '<lane>:avg' -> the moving average run time
--          of its jobs in ms, 'quantum' -> the queue's quantum in ms (the
--          largest lane average lately, at least TS_MIN_QUANTUM), 'head' ->
--          the lane whose turn a claim cut short (it goes on without a new
--          quantum while that lane is still at the head);
--          <prefix>weights (hash, read); on a claimed job's row, 'charge'
--          (the ms its claim charged) until the attempt is settled.
-- Bounds: -TS_DEBT x quantum x weight <= credit <= TS_MOST x quantum x
-- weight (a long job costs at most TS_DEBT quanta of debt; a turn starts with
-- at most one quantum carried over); a lane left idle (nothing pending,
-- nothing in flight) forgets its credit, debt and average, so an idle lane
-- hoards nothing and the hash holds only lanes with work; one claim skips at
-- most TS_SKIPS lanes in debt, then serves the lane it lands on (its quantum
-- added) whatever its credit: O(1) in lanes.


local TS_MIN_QUANTUM = 10
local TS_DEBT = 8
local TS_MOST = 2
local TS_SKIPS = 16
-- the quantum forgets 1/TS_DECAY of itself per settled job; a lane's average
-- moves 1/TS_ALPHA of the way to each job's run time
local TS_DECAY = 128
local TS_ALPHA = 8

"""The keyspace of one queue. Every key carries the ``{q}`` hash tag.

The Lua scripts receive the fixed keys in ``KEYS`` and the prefix in ARGV so
they can derive the two families of per-item keys (a lane's pending set and a
job's hash) the same way :meth:`QueueKeys.pending` and :meth:`QueueKeys.job` do.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ids import validate_job_id, validate_lane, validate_queue_name, validate_tenant


@dataclass(frozen=True, slots=True)
class QueueKeys:
    """Names of every key of queue ``name``."""

    name: str

    def __post_init__(self) -> None:
        validate_queue_name(self.name)

    @property
    def prefix(self) -> str:
        """``emq:{name}:`` — the hash tag keeps every key of a queue in one slot."""
        return f"emq:{{{self.name}}}:"

    def _k(self, suffix: str) -> str:
        return self.prefix + suffix

    @property
    def ring(self) -> str:
        """List: the serviceable lanes in rotation order."""
        return self._k("ring")

    @property
    def on_ring(self) -> str:
        """Set: the lanes on the ring (membership without scanning the list)."""
        return self._k("onring")

    @property
    def active(self) -> str:
        """Sorted set: claimed job ids scored by lease deadline (server ms)."""
        return self._k("active")

    @property
    def schedule(self) -> str:
        """Sorted set: deferred or backing-off job ids scored by due time (ms)."""
        return self._k("schedule")

    @property
    def dead(self) -> str:
        """Sorted set: job ids that used up their attempts, scored by time of death."""
        return self._k("dead")

    @property
    def paused(self) -> str:
        """Set: paused lanes."""
        return self._k("paused")

    @property
    def ceilings(self) -> str:
        """Hash: lane -> concurrency ceiling."""
        return self._k("ceilings")

    @property
    def weights(self) -> str:
        """Hash: lane -> weight (absent means 1)."""
        return self._k("weights")

    @property
    def job_sets(self) -> list[str]:
        """The queue's keys a call that moves jobs between its sets (pending,
        active, scheduled, dead) writes, in the order ``retry-12.lua`` and
        ``mend_jobs-11.lua`` take them."""
        return [
            self.ring,
            self.on_ring,
            self.active,
            self.schedule,
            self.dead,
            self.paused,
            self.ceilings,
            self.inflight,
            self.depths,
            self.stats,
            self.wake,
        ]

    @property
    def turn(self) -> str:
        """Hash: ``lane``, ``credit``: the rest of the head lane's weighted turn
        when a claim cut it short (see ``lua/includes/claim_turns.lua``)."""
        return self._k("turn")

    @property
    def policies(self) -> str:
        """Hash: the policy index. ``*`` -> a letter for each policy hash that
        holds a field; ``<lane>`` (or ``@<tenant>``) -> the letters of the
        per-lane settings it has (absent: none). The hot paths read it instead
        of the policies' hashes (see ``lua/includes/check.lua``)."""
        return self._k("policies")

    @property
    def inflight(self) -> str:
        """Hash: ``@<tenant>`` -> its lanes' jobs in ``active`` (absent means 0).
        A lane's own in-flight count is the size of its ``lane_active`` set."""
        return self._k("inflight")

    @property
    def depths(self) -> str:
        """Sorted set: lane -> pending depth; only non-empty lanes are members."""
        return self._k("depths")

    @property
    def stats(self) -> str:
        """Hash: queue counters (``pending``, ``completed``, ...)."""
        return self._k("stats")

    @property
    def seq(self) -> str:
        """String: the mint-order counter that scores jobs inside their lane."""
        return self._k("seq")

    @property
    def wake(self) -> str:
        """List: wake tokens; idle workers park on it with a blocking pop."""
        return self._k("wake")

    @property
    def max_depths(self) -> str:
        """Hash: lane -> most pending jobs it may hold (an enqueue beyond raises ``LaneFull``)."""
        return self._k("maxdepth")

    @property
    def unique(self) -> str:
        """Hash: ``<lane>:<unique key>`` -> id of the unfinished job holding the key."""
        return self._k("unique")

    @property
    def rates(self) -> str:
        """Hash: lane -> its rate limit, ``<count>:<per_ms>``."""
        return self._k("rates")

    @property
    def throttled(self) -> str:
        """Sorted set: rate-limited lanes off the ring, by when their next start is allowed (ms)."""
        return self._k("throttled")

    @property
    def timeshare(self) -> str:
        """Hash: a time-fair queue's lanes' credit of worker time (``<lane>`` -> ms,
        negative in debt), their average run time (``<lane>:avg`` -> ms), the
        queue's ``quantum`` (ms) and ``head`` (the lane whose turn a claim cut
        short); see ``lua/includes/timeshare.lua``."""
        return self._k("timeshare")

    @property
    def ticks(self) -> str:
        """Hash: periodic schedule name -> its last enqueued tick (ms); ``<name>:job``
        -> that tick's job id."""
        return self._k("ticks")

    @property
    def workers(self) -> str:
        """Hash: worker id -> last heartbeat record (JSON)."""
        return self._k("workers")

    @property
    def stops(self) -> str:
        """Hash: worker id -> when an operator asked it to stop after its current
        jobs (ms); the worker's beat reads its own field (engine/worker_control.py)."""
        return self._k("stops")

    @property
    def finished(self) -> str:
        """Sorted set: the last finished job ids (done, dead, cancelled) by time of
        finishing (ms), at most ``FINISHED_WINDOW`` of them (lua/includes/history.lua)."""
        return self._k("finished")

    @property
    def due_at(self) -> str:
        """Sorted set: jobs a promote moved into their lanes before their first
        start, by when they became due (ms): where their wait begins. A record
        call (lua/record_history-2.lua) reads and removes them; kept at most a
        day and 100,000 of them (lua/promote-9.lua)."""
        return self._k("dueat")

    def minute(self, minute: int) -> str:
        """Hash: one minute's counters and wait histogram (``minute`` = epoch ms // 60000)."""
        return self._k(f"m:{minute}")

    def lane_waits(self, hour: int) -> str:
        """Hash: every lane's wait histogram for one hour (field ``<lane>:<bucket>``;
        ``hour`` = epoch ms // 3600000)."""
        return self._k(f"lw:{hour}")

    @property
    def tenants(self) -> str:
        """Hash: lane -> its tenant (``lua/includes/tenants.lua``)."""
        return self._k("tenants")

    @property
    def tenant_turns(self) -> str:
        """Hash: tenant -> ``<lane> <credit>``: the rest of the weighted turn of the
        lane at the head of the tenant's ring, when a claim cut it short."""
        return self._k("tturns")

    def tenant_ring(self, tenant: str) -> str:
        """List: a tenant's serviceable lanes in rotation order."""
        return self._k(f"t:{validate_tenant(tenant)}:ring")

    def pending(self, lane: str) -> str:
        """Sorted set: lane's pending job ids scored by mint order."""
        return self._k(f"g:{validate_lane(lane)}:pending")

    def lane_active(self, lane: str) -> str:
        """Sorted set: lane's claimed job ids scored by claim time (server ms)."""
        return self._k(f"g:{validate_lane(lane)}:active")

    def lane_dead(self, lane: str) -> str:
        """Sorted set: lane's dead job ids scored by time of death (ms)."""
        return self._k(f"g:{validate_lane(lane)}:dead")

    def starts(self, lane: str) -> str:
        """List: start times (ms) of a rate-limited lane's latest jobs, oldest first."""
        return self._k(f"g:{validate_lane(lane)}:starts")

    def job(self, job_id: str) -> str:
        """Hash: one job row."""
        return self._k(f"job:{validate_job_id(job_id)}")

"""The calls every queue answers, written once: a plain ``Queue`` and a
``ShardedQueue`` both take a ``JobSpec`` to enqueue and a
``ClaimRequest`` to claim; the keyword forms below build those values,
so the signatures live here and nowhere else.

A plain queue is a sharded queue of one: both answer ``shards``,
``shard_for_lane``, ``shard_for_job`` and ``claim_shard``, so callers never
ask which kind they hold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from .home import Home
from .records import Claim, ClaimRequest, Enqueued, JobSpec

#: Called once the job has been checked and encoded, before it is written: what
#: the caller must record only for a job that will be written (the Django layer
#: records the queue's name in its registry). What it raises refuses the enqueue.
type BeforeWrite = Callable[[], None] | None


class QueueAPI:
    """The keyword forms of enqueue and claim, over the typed values."""

    def enqueue_spec(self, spec: JobSpec, before_write: BeforeWrite = None) -> Enqueued:
        raise NotImplementedError

    def enqueue_specs(self, specs: Sequence[JobSpec]) -> list[Enqueued]:
        raise NotImplementedError

    def claim_shard(self, request: ClaimRequest) -> tuple[Home, list[Claim]] | None:
        raise NotImplementedError

    def enqueue(
        self,
        lane: str,
        task_path: str,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        job_id: str | None = None,
        run_after: datetime | None = None,
        max_attempts: int | None = None,
        meta: Mapping[str, Any] | None = None,
        unique_key: str | None = None,
        tenant: str | None = None,
        before_write: BeforeWrite = None,
    ) -> Enqueued:
        """Enqueue one job on ``lane``. Everything is validated before anything is written.

        An existing ``job_id`` answers ``duplicate=True`` and changes nothing;
        so does a ``unique_key`` an unfinished job of the lane holds (the answer
        names that job). A lane at its max depth raises ``LaneFull``. ``tenant``
        records the lane's tenant (see ``docs/tenants.md``; ``None`` keeps it).
        Raises ``ValueError``/``InvalidArguments`` for bad input and
        ``EnqueueError`` when the server cannot be reached or refuses the write
        (out of memory, a read-only replica, an ACL that forbids it).
        ``before_write`` is called once the job is checked, before it is written.
        """
        return self.enqueue_spec(
            JobSpec(
                lane,
                task_path,
                args,
                kwargs,
                job_id,
                run_after,
                max_attempts,
                meta,
                unique_key,
                tenant=tenant,
            ),
            before_write,
        )

    def enqueue_many(self, jobs: Iterable[JobSpec | Mapping[str, Any]]) -> list[Enqueued]:
        """Enqueue many jobs in one round trip (per shard). Each item is a
        ``JobSpec``, or a mapping of ``enqueue``'s arguments by name.

        Every job is validated first: one bad job refuses the whole batch and
        nothing is written. Each job is then admitted atomically on its own.
        """
        return self.enqueue_specs([JobSpec.of(job) for job in jobs])

    def claim(
        self,
        lease_ms: int,
        *,
        turns: int = 1,
        worker_id: str | None = None,
        max_jobs: int | None = None,
    ) -> list[Claim] | None:
        """Take the next turn(s) of the ring; ``None`` when no lane is serviceable.

        One turn serves the lane the ring lands on: one job, or up to its
        weight. ``turns > 1`` takes that many consecutive turns in one round
        trip (the rotation order is the same as that many single claims).
        ``max_jobs`` caps the jobs returned in all (a worker passes its free
        slots); a weighted turn cut short by it just serves fewer jobs.
        """
        found = self.claim_shard(ClaimRequest(lease_ms, turns, worker_id, max_jobs))
        return None if found is None else found[1]

"""A queue sharded across a Valkey Cluster: ``S`` ordinary queues behind one API.

Each shard is a :class:`~django_emq.engine.queue.Queue` with a hash tag of its own
(see :mod:`django_emq.engine.placement`), so each lives in one slot and every
script still touches one slot. A lane rides one shard (chosen by a stable
hash of its id), so a lane's jobs keep their first-in-first-out order and its
pause, ceiling and weight live where its jobs are. A claim takes the shards in
turn: one that has nothing to serve is passed over at once, never waited on.

:class:`ShardedQueue` answers the calls of :class:`~django_emq.engine.queue.Queue`
(the keyword forms of :mod:`.api` over the same typed values), but the
worker's one-round-trip pairs (``complete_then_claim``,
``complete_many_then_claim``: a worker claims from the shards themselves).
Calls that name a lane go to its shard; calls that name a job find the shard
in the job id (``<id>.s<k>``; ``complete_many`` sends one call per shard);
totals and the deepest lanes merge the shards' answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from . import ops
from .api import BeforeWrite, QueueAPI
from .exceptions import JobError, JobNotFound
from .ids import id_list, mint_job_id, validate_job_id, validate_lane
from .payload import text
from .placement import job_id_on, job_shard, lane_shard, shard_tags
from .policies import PolicyCalls
from .queue import Queue
from .records import Claim, ClaimRequest, Enqueued, JobSpec, LaneInfo, Totals, encode_outcomes
from .rotation import Rotation
from .runner import now

if TYPE_CHECKING:
    from .client import Client

#: Most lanes one call of :meth:`ShardedQueue.lanes` may return (as for a queue).
MAX_TOP = 10_000


class ShardedQueue(QueueAPI, PolicyCalls):
    """Queue ``name`` spread over ``shards`` shards; options as for :class:`Queue`."""

    #: Every shard, by number: shard ``k`` holds the lanes ``lane_shard(lane, S) == k``.
    shards: tuple[Queue, ...]

    def __init__(
        self, name: str = "default", shards: int = 2, *, connection: Client, **options: Any
    ) -> None:
        self.name = name
        self.connection = connection
        self.shards = tuple(
            Queue(tag, connection=connection, **options) for tag in shard_tags(name, shards)
        )
        self.max_attempts = self.shards[0].max_attempts
        #: The order claims take the shards in.
        self.rotation: Rotation[AnyQueue] = Rotation(self.shards)

    def __repr__(self) -> str:
        return f"<ShardedQueue {self.name!r} ({len(self.shards)} shards)>"

    # -- routing -------------------------------------------------------------

    def shard_for_lane(self, lane: str) -> Queue:
        """The shard that holds ``lane``."""
        return self.shards[lane_shard(lane, len(self.shards))]

    def shard_for_job(self, job_id: str) -> Queue:
        """The shard job ``job_id`` was enqueued on; ``JobNotFound`` if its id
        names no shard of this queue (it was never enqueued here)."""
        shard = job_shard(job_id, len(self.shards))
        if shard is None:
            raise JobNotFound(job_id, f"no such job: its id names no shard of {self.name!r}")
        return self.shards[shard]

    def _marked(self, spec: JobSpec) -> tuple[Queue, JobSpec]:
        """The lane's shard and ``spec`` with its job id marked for it (``.s<k>``)."""
        shard = lane_shard(spec.lane, len(self.shards))
        job_id = mint_job_id() if spec.job_id is None else spec.job_id
        return self.shards[shard], replace(spec, job_id=job_id_on(job_id, shard))

    # -- enqueue -------------------------------------------------------------

    def enqueue_spec(self, spec: JobSpec, before_write: BeforeWrite = None) -> Enqueued:
        """:meth:`Queue.enqueue` on the lane's shard. The job id answered (and a
        given ``job_id``) carries the shard's mark, ``.s<k>``."""
        shard, marked = self._marked(spec)
        return shard.enqueue_spec(marked, before_write)

    def enqueue_specs(self, specs: Sequence[JobSpec]) -> list[Enqueued]:
        """:meth:`Queue.enqueue_many`, one round trip per shard. Every job is
        checked and encoded (once) before any is written: one bad job refuses
        the whole batch."""
        routed = []
        for spec in specs:
            shard, marked = self._marked(spec)
            routed.append((shard, shard.prepare(marked)))
        answers: list[Enqueued | None] = [None] * len(routed)
        for shard in self.shards:
            places = [i for i, (owner, _) in enumerate(routed) if owner is shard]
            if places:
                done = shard.send_prepared([routed[i][1] for i in places])
                for i, enqueued in zip(places, done, strict=True):
                    answers[i] = enqueued
        return [enqueued for enqueued in answers if enqueued is not None]

    # -- the worker's side -----------------------------------------------------

    def claim_shard(self, request: ClaimRequest) -> tuple[Queue, list[Claim]] | None:
        """Claim from the shards in turn (see :func:`claim_in_turn`): an empty
        shard, or one whose node cannot answer, is passed over at once. Answers
        the shard with its claims, ``None`` when no shard has a serviceable lane."""
        found = claim_in_turn(self.rotation, request)
        if found is not None:
            found[0].record_history(found[1])
        return found

    def complete(self, job_id: str, token: int, result: Any = None) -> None:
        self.shard_for_job(job_id).complete(job_id, token, result)

    def complete_many(self, outcomes: Sequence[tuple[str, int, Any]]) -> list[JobError | None]:
        """:meth:`Queue.complete_many`, one call per shard named by the job ids;
        the refusals come back in the order of ``outcomes`` (an id that names
        no shard is ``JobNotFound``). Bad input raises before anything is sent."""
        encoded = encode_outcomes(outcomes)
        answers: list[JobError | None] = [None] * len(encoded)
        groups: dict[int, tuple[Queue, list[int]]] = {}
        for i, (job_id, _, _) in enumerate(encoded):
            try:
                shard = self.shard_for_job(job_id)
            except JobNotFound as exc:
                answers[i] = exc
                continue
            groups.setdefault(id(shard), (shard, []))[1].append(i)
        for shard, places in groups.values():
            call = shard.complete_call([encoded[i] for i in places])
            if call is None:
                continue
            for i, refusal in zip(places, shard.record(call), strict=True):
                answers[i] = refusal
        return answers

    def retry(self, job_id: str, token: int, error: str, delay_ms: int = 0) -> str:
        return self.shard_for_job(job_id).retry(job_id, token, error, delay_ms)

    def fail(self, job_id: str, token: int, error: str) -> None:
        self.shard_for_job(job_id).fail(job_id, token, error)

    def extend(self, job_id: str, token: int, lease_ms: int) -> int:
        return self.shard_for_job(job_id).extend(job_id, token, lease_ms)

    def release(self, job_id: str, token: int) -> None:
        self.shard_for_job(job_id).release(job_id, token)

    def reap(self) -> list[str]:
        """:meth:`Queue.reap` on every shard."""
        return [job_id for shard in self.shards for job_id in shard.reap()]

    def promote(self) -> tuple[int, int | None]:
        """:meth:`Queue.promote` on every shard: the total promoted, the earliest next due."""
        total, due = 0, []
        for shard in self.shards:
            count, next_due = shard.promote()
            total += count
            if next_due is not None:
                due.append(next_due)
        return total, min(due, default=None)

    # -- lane control ----------------------------------------------------------

    def pause(self, lane: str) -> bool:
        return self.shard_for_lane(lane).pause(lane)

    def resume(self, lane: str) -> bool:
        return self.shard_for_lane(lane).resume(lane)

    def drain(self, lane: str) -> int:
        return self.shard_for_lane(lane).drain(lane)

    def move(self, job_id: str, lane: str) -> bool:
        """:meth:`Queue.move` within one shard. A lane on another shard is refused
        with ``ValueError``: a move across shards would touch two slots, and no
        script may (nothing changes)."""
        shard = self.shard_for_job(job_id)
        if self.shard_for_lane(lane) is not shard:
            raise ValueError(
                f"cannot move job {job_id} to lane {lane}: that lane lives on another "
                f"shard of {self.name!r}"
            )
        return shard.move(job_id, lane)

    # -- job control -------------------------------------------------------------

    def run_now(self, job_id: str) -> None:
        self.shard_for_job(job_id).run_now(job_id)

    # -- dead jobs -------------------------------------------------------------

    def retry_dead(self, job_ids: Iterable[str] | None = None, *, lane: str | None = None) -> int:
        return self._dead(Queue.retry_dead, job_ids, lane)

    def delete_dead(self, job_ids: Iterable[str] | None = None, *, lane: str | None = None) -> int:
        return self._dead(Queue.delete_dead, job_ids, lane)

    def _dead(
        self,
        action: Callable[..., int],
        job_ids: Iterable[str] | None,
        lane: str | None,
    ) -> int:
        ids = None if job_ids is None else [validate_job_id(i) for i in id_list("job_ids", job_ids)]
        count = len(self.shards)
        if lane is not None:
            home = lane_shard(lane, count)
            mine = None if ids is None else [i for i in ids if job_shard(i, count) == home]
            return action(self.shards[home], mine, lane=lane)
        if ids is None:
            raise ValueError("name the dead jobs: give job ids, a lane, or both")
        total = 0
        for index, shard in enumerate(self.shards):
            mine = [i for i in ids if job_shard(i, count) == index]
            if mine:
                total += action(shard, mine)
        return total

    # -- observability ---------------------------------------------------------

    def depth(self, lane: str) -> int:
        return self.shard_for_lane(lane).depth(lane)

    def totals(self) -> Totals:
        """Every shard's :meth:`Queue.totals`, added up (one round trip per shard)."""
        parts = [shard.totals() for shard in self.shards]
        return Totals(
            pending=sum(t.pending for t in parts),
            active=sum(t.active for t in parts),
            scheduled=sum(t.scheduled for t in parts),
            dead=sum(t.dead for t in parts),
            lanes=sum(t.lanes for t in parts),
            ring=sum(t.ring for t in parts),
            throttled=sum(t.throttled for t in parts),
        )

    def lanes(self, top: int = 50, offset: int = 0) -> list[LaneInfo]:
        """The ``top`` deepest lanes of all shards from ``offset``, deepest first.

        Each shard's ``offset + top`` deepest lanes are read from its depth
        index and merged (ties in the order each shard ranks them: by lane id,
        descending), so the cost grows with the page, never with the lanes.
        """
        if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= MAX_TOP:
            raise ValueError(f"top must be an integer from 1 to {MAX_TOP}, not {top!r}")
        ranked: list[tuple[int, str]] = []
        for shard in self.shards:
            pairs: list[tuple[bytes, float]] = shard.connection.zrevrange(  # type: ignore[assignment]
                shard.keys.depths, 0, offset + top - 1, withscores=True
            )
            ranked += [(int(depth), text(lane)) for lane, depth in pairs]
        ranked.sort(reverse=True)
        return self.lanes_named([lane for _, lane in ranked[offset : offset + top]])

    def lane(self, lane: str) -> LaneInfo:
        return self.shard_for_lane(lane).lane(lane)

    def lanes_named(self, names: Sequence[str]) -> list[LaneInfo]:
        """The named lanes in the order given (two round trips per shard named)."""
        names = [validate_lane(lane) for lane in id_list("names", names)]
        found: dict[str, LaneInfo] = {}
        for shard in self.shards:
            mine = [lane for lane in names if self.shard_for_lane(lane) is shard]
            if mine:
                found.update((info.lane, info) for info in shard.lanes_named(mine))
        return [found[lane] for lane in names]

    def job(self, job_id: str) -> dict[str, str] | None:
        """The job's row, or ``None`` if there is none (or its id names no shard)."""
        shard = job_shard(job_id, len(self.shards))
        return None if shard is None else self.shards[shard].job(job_id)


#: A queue as the backend, the worker and the admin see it.
AnyQueue = Queue | ShardedQueue


def open_queue(name: str, *, connection: Client, shards: int = 1, **options: Any) -> AnyQueue:
    """Queue ``name``: a plain :class:`Queue`, or a :class:`ShardedQueue` when ``shards > 1``."""
    if shards > 1:
        return ShardedQueue(name, shards, connection=connection, **options)
    return Queue(name, connection=connection, **options)


def shards_of(queue: AnyQueue) -> tuple[Queue, ...]:
    """Every plain queue behind ``queue`` (itself, for a plain queue)."""
    return queue.shards


def home_of(queue: AnyQueue, lane: str) -> Queue:
    """The plain queue that holds ``lane``."""
    return queue.shard_for_lane(lane)


def claim_in_turn(
    rotation: Rotation[Queue] | Rotation[AnyQueue], request: ClaimRequest
) -> tuple[Queue, list[Claim]] | None:
    """One claim from ``rotation``'s queues in turn (see
    :class:`~django_emq.engine.rotation.Rotation`): the plain queue the claims
    came from and the claims, ``None`` when no queue has anything to serve (one
    round trip per queue tried)."""
    return now(rotation.turn(partial(_claim_turn, request=request)))


async def _claim_turn(queue: AnyQueue, request: ClaimRequest) -> tuple[Queue, list[Claim]] | None:
    if isinstance(queue, ShardedQueue):
        return await queue.rotation.turn(partial(_claim_turn, request=request))
    claims = await queue.runner.steps.run(ops.claim_for(queue, request))
    return (queue, claims) if claims else None

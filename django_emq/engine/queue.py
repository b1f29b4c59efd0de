"""A queue of fair lanes on one Valkey server: the engine's public surface.

Every state change is one Lua script (see ``django_emq/engine/lua/``); reads are
plain commands, pipelined so each public call is one round trip. The calls are
spread over small parts: the keyword forms (``.api``), lane control and dead
jobs (``.control``), the lane policies' calls (``.policies``, one module per
policy behind one registry), the reads (``.reads``) and the values they speak
in (``.records``); this module holds the job's path through the queue. Each
write is an operation of ``.ops`` (what it sends, how its reply reads) run
by the queue's public ``runner`` (``.runner.SyncRunner``), the same
operations the worker runs on its async runner.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import redis
from redis.exceptions import RedisClusterException

from . import calls, ops
from .api import BeforeWrite, QueueAPI
from .claim_reply import CLAIM_STRIDE
from .control import LaneControl
from .exceptions import CorruptKeyspace, EnqueueError, JobError, script_error, unreachable
from .ids import id_list, mint_job_id, validate_job_id, validate_lane, validate_task_path
from .keys import QueueKeys
from .ops import BATCH
from .payload import DEFAULT_MAX_PAYLOAD, encode_arguments, encode_meta
from .policies import PolicyCalls
from .policies.tenants import tenant_arg
from .reads import QueueReads
from .records import (
    DEFAULT_HISTORY,
    MAX_ATTEMPTS_LIMIT,
    MAX_BATCH,
    MAX_DELAY_MS,
    MAX_DEPTH_LIMIT,
    MAX_LEASE_MS,
    MAX_WEIGHT,
    RUN_AFTER_PAST_LIMIT,
    WORKER_ID_RE,
    Claim,
    ClaimRequest,
    Enqueued,
    JobSpec,
    LaneInfo,
    Totals,
    default_worker_id,
    encode_outcomes,
    error_text,
    fairness_mode,
    positive_int,
    rate_limit,
    run_after_ms,
    tick_arg,
    unique_key_arg,
)
from .runner import SyncRunner
from .tally import Tally, recorded

if TYPE_CHECKING:
    from .client import Client

logger = logging.getLogger("django_emq.engine")

__all__ = [
    "BATCH",
    "CLAIM_STRIDE",
    "MAX_BATCH",
    "MAX_WEIGHT",
    "RUN_AFTER_PAST_LIMIT",
    "WORKER_ID_RE",
    "Claim",
    "ClaimRequest",
    "Enqueued",
    "JobSpec",
    "LaneInfo",
    "Queue",
    "Totals",
    "default_worker_id",
    "encode_outcomes",
    "run_after_ms",
]


class Queue(QueueAPI, LaneControl, PolicyCalls, QueueReads):
    """One queue of fair lanes on one Valkey server.

    ``result_ttl`` is how long a finished job's row (its result) is kept,
    ``max_attempts`` how many failures a job may have before it is dead,
    ``max_expiries`` how many times its lease may expire (its worker died or
    froze) before it is dead, ``history`` how many of the latest claimers'
    ids and errors a row keeps, ``max_depth`` the most pending jobs a lane may
    hold and ``rate`` a ``(count, per_seconds)`` limit on the jobs each lane
    starts, unless it sets its own (``None``: no limit); ``fairness``: a turn
    is a number of jobs (``"count"``) or worker time (``"time"``).
    """

    #: A plain queue is a sharded queue of one.
    shards: tuple[Queue, ...]

    def __init__(
        self,
        name: str = "default",
        *,
        connection: Client,
        max_attempts: int = 3,
        max_expiries: int = 3,
        result_ttl: timedelta = timedelta(days=1),
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        history: int = DEFAULT_HISTORY,
        max_depth: int | None = None,
        rate: tuple[int, float | timedelta] | None = None,
        fairness: str = "count",
    ) -> None:
        self.name = name
        self.keys = QueueKeys(name)
        self.connection = connection
        self.max_attempts = positive_int("max_attempts", max_attempts, MAX_ATTEMPTS_LIMIT)
        self.max_expiries = positive_int("max_expiries", max_expiries, MAX_ATTEMPTS_LIMIT)
        self.result_ttl_ms = int(result_ttl.total_seconds() * 1000)
        self.max_payload = max_payload
        self.history = positive_int("history", history, 1000)
        self.max_depth = (
            None if max_depth is None else positive_int("max_depth", max_depth, MAX_DEPTH_LIMIT)
        )
        #: The default rate limit of every lane, ``(count, per_ms)``; ``None``: none.
        self.rate = None if rate is None else rate_limit(*rate)
        self.fairness = fairness_mode(fairness)
        #: Runs this queue's operations (:mod:`.ops`) on ``connection``.
        self.runner = SyncRunner(connection)
        self.shards = (self,)

    def __repr__(self) -> str:
        return f"<Queue {self.name!r}>"

    # -- routing: a plain queue is its only shard ------------------------------

    def shard_for_lane(self, lane: str) -> Queue:
        """The queue that holds ``lane``: this one."""
        return self

    def shard_for_job(self, job_id: str) -> Queue:
        """The queue job ``job_id`` was enqueued on: this one."""
        return self

    # -- enqueue -----------------------------------------------------------

    def prepare(self, spec: JobSpec) -> calls.Call:
        """The enqueue call for ``spec``, checked and encoded; raises on bad input
        (nothing has been sent then)."""
        validate_lane(spec.lane)
        validate_task_path(spec.task_path)
        job_id = mint_job_id() if spec.job_id is None else validate_job_id(spec.job_id)
        attempts = self.max_attempts if spec.max_attempts is None else spec.max_attempts
        positive_int("max_attempts", attempts, MAX_ATTEMPTS_LIMIT)
        args_json, kwargs_json = encode_arguments(spec.args, spec.kwargs, self.max_payload)
        meta_json = "" if not spec.meta else encode_meta(spec.meta, self.max_payload)
        unique = unique_key_arg(spec.unique_key)
        tick = tick_arg(spec.tick)
        return calls.enqueue(
            self.keys,
            job_id,
            spec.lane,
            spec.task_path,
            args_json,
            kwargs_json,
            attempts,
            run_after_ms(spec.run_after),
            meta_json,
            self.max_depth,
            unique,
            tick,
            tenant_arg(spec.tenant, self.fairness),
        )

    def enqueue_spec(self, spec: JobSpec, before_write: BeforeWrite = None) -> Enqueued:
        """``enqueue`` of one ``JobSpec``."""
        op = ops.enqueue(self.prepare(spec))
        if before_write is not None:
            before_write()
        try:
            reply = self.runner.script(op.call)
        except CorruptKeyspace:
            raise
        except (redis.RedisError, RedisClusterException) as exc:
            raise self._enqueue_error(exc) from exc
        return op.parse(reply)

    def enqueue_specs(self, specs: Sequence[JobSpec]) -> list[Enqueued]:
        """``enqueue_many`` of ``JobSpec`` values."""
        return self.send_prepared([self.prepare(spec) for spec in specs])

    def send_prepared(self, prepared: Sequence[calls.Call]) -> list[Enqueued]:
        """Run enqueue calls from ``prepare`` in one round trip."""
        if not prepared:
            return []
        try:
            replies = self.runner.replies(prepared)
        except (redis.RedisError, RedisClusterException) as exc:
            raise self._enqueue_error(exc) from exc
        for reply in replies:
            if isinstance(reply, CorruptKeyspace):
                raise reply
            if isinstance(reply, redis.RedisError):
                # Jobs before it in the batch may be admitted: retrying the batch
                # under the same job ids admits each job once.
                raise self._enqueue_error(reply) from reply
            if isinstance(reply, Exception):
                raise reply
        # A full lane refuses its job alone: the jobs before and after it in the
        # batch are admitted; LaneFull names the first refused one.
        return [
            ops.enqueue(call).parse(reply) for call, reply in zip(prepared, replies, strict=True)
        ]

    def _enqueue_error(self, exc: Exception) -> EnqueueError:
        if isinstance(exc, redis.ConnectionError | redis.TimeoutError | RedisClusterException):
            return EnqueueError(f"cannot enqueue on {self.name!r}: {unreachable(exc)}")
        return EnqueueError(f"Valkey refused to enqueue on {self.name!r}: {exc}")

    # -- the worker's side ---------------------------------------------------

    def claim_shard(self, request: ClaimRequest) -> tuple[Queue, list[Claim]] | None:
        """``claim`` answered with the queue the claims came from (this one)."""
        claims = self.runner.run(ops.claim_for(self, request))
        self.record_history(claims)
        return (self, claims) if claims else None

    def complete(self, job_id: str, token: int, result: Any = None) -> None:
        """Record success; raises ``StaleToken`` if the lease moved on (nothing changes)."""
        (error,) = self.complete_many([(job_id, token, result)])
        if error is not None:
            raise error

    def complete_many(self, outcomes: Sequence[tuple[str, int, Any]]) -> list[JobError | None]:
        """Record the success of every ``(job_id, token, result)`` in one round trip.

        Each job is fenced by its own token: the answer holds, in order, ``None``
        for a recorded job and the refusal (``StaleToken``, ``JobNotFound``) for
        one whose lease moved on, which changed nothing; the others are recorded
        all the same. Bad input (a result JSON cannot hold, a token that is not
        an attempt number, more than ``MAX_BATCH`` jobs) raises before anything
        is sent.
        """
        call = self.complete_call(encode_outcomes(outcomes))
        if call is None:
            return []
        return self.record(call)

    def record(self, call: calls.Call) -> list[JobError | None]:
        """Run a complete call from ``complete_call``; the refusals, in order."""
        refusals = self.runner.run(ops.completed(call))
        self.record_history(finished=recorded(call.args[calls.COMPLETE_OUTCOMES :: 3], refusals))
        return refusals

    def complete_call(self, encoded: Sequence[tuple[str, int, str]]) -> calls.Call | None:
        """The complete call for outcomes from ``encode_outcomes``."""
        return calls.complete(self.keys, encoded, self.result_ttl_ms) if encoded else None

    def complete_then_claim(
        self,
        job_id: str,
        token: int,
        result: Any,
        lease_ms: int,
        *,
        turns: int = 1,
        worker_id: str | None = None,
        max_jobs: int | None = None,
    ) -> tuple[list[Claim], Exception | None]:
        """``complete``, then ``claim``, in one round trip: a worker's next
        turn rides along with its last outcome.

        Answers the claims (empty when no lane is serviceable, or when the claim
        failed: the caller claims again on its own) and the complete's error
        (``StaleToken``...), returned instead of raised so the claims, whose
        leases are held, are never dropped. A lost connection raises: whether
        the complete landed is unknown, and retrying it with ``complete``
        is safe (it is fenced by the token); a claim that landed unseen is
        reaped when its lease runs out, like any lost claim reply.
        """
        claims, errors = self.complete_many_then_claim(
            [(job_id, token, result)], lease_ms, turns=turns, worker_id=worker_id, max_jobs=max_jobs
        )
        return claims, errors[0]

    def complete_many_then_claim(
        self,
        outcomes: Sequence[tuple[str, int, Any]],
        lease_ms: int,
        *,
        turns: int = 1,
        worker_id: str | None = None,
        max_jobs: int | None = None,
    ) -> tuple[list[Claim], list[Exception | None]]:
        """``complete_many``, then ``claim``, in one script call (one round
        trip): the worker's hot path.

        Answers the claims and one entry per outcome: ``None`` when recorded,
        else what refused it (``StaleToken``, ``JobNotFound``, or the server's
        refusal of the whole call, e.g. ``CorruptKeyspace``: then nothing was
        written and nothing claimed), returned rather than raised so claims,
        whose leases are held, are never dropped. Bad input raises before
        anything is sent; a lost connection raises, as in
        ``complete_then_claim``.
        """
        call = self.complete_claim_call(
            encode_outcomes(outcomes), ClaimRequest(lease_ms, turns, worker_id, max_jobs)
        )
        try:
            claims, refused = self.runner.run(ops.claimed_with(call))
        except redis.ResponseError as exc:
            return [], [script_error(exc)] * len(outcomes)
        done = recorded(call.args[calls.COMPLETE_CLAIM_OUTCOMES :: 3], refused)
        self.record_history(claims, done)
        return claims, list(refused)

    def complete_claim_call(
        self, encoded: Sequence[tuple[str, int, str | bytes]], request: ClaimRequest
    ) -> calls.Call:
        """The ``complete_claim`` call: ``encoded`` outcomes (from
        ``encode_outcomes``), then the claim ``request`` (``max_jobs`` 0:
        record only)."""
        if request.max_jobs == 0:
            checked = replace(request, max_jobs=1).checked()
            limit = 0
        else:
            checked = request.checked()
            assert checked.max_jobs is not None  # filled in by checked()
            limit = checked.max_jobs
        op = ops.complete_claim(
            self, encoded, checked.lease_ms, checked.turns, checked.worker, limit
        )
        return op.call

    def record_history(self, claims: Sequence[Claim] = (), finished: Sequence[str] = ()) -> None:
        """Add the first starts among ``claims`` (their waits) and the jobs
        ``finished`` (recorded done) to the queue's history now, in one round
        trip when there is any (see ``django_emq.engine.tally``). Every claim
        and completion made through this API does so at once; a worker
        gathers its own and sends them every ``tally.RECORD_EVERY`` seconds.
        The history is a by-product: a server that cannot take it now is
        logged, not raised (the claims and outcomes it follows stand). One
        ``str`` in place of the ``finished`` ids raises ``InvalidArguments``."""
        tally = Tally()
        tally.claimed(claims)
        tally.completed([validate_job_id(j) for j in id_list("finished", finished)])
        record = ops.record_history(self, tally)
        if not record:
            return
        try:
            answers = self.runner.run_many(record)
        except (redis.RedisError, RedisClusterException) as exc:
            answers = [exc]
        for answer in answers:
            if isinstance(answer, Exception):
                logger.warning("queue %r: history not recorded (%s)", self.name, answer)

    def retry(self, job_id: str, token: int, error: str, delay_ms: int = 0) -> str:
        """Record a failure; the job is retried after ``delay_ms`` or is dead when out of
        attempts. Returns the job's new state (``pending``, ``scheduled`` or ``dead``)."""
        positive_int("delay_ms", delay_ms, MAX_DELAY_MS, minimum=0)
        return self.runner.run(ops.retry(self, job_id, token, error_text(error), delay_ms))

    def fail(self, job_id: str, token: int, error: str) -> None:
        """Record a failure that retrying cannot fix: the job is dead now."""
        self.runner.run(ops.fail(self, job_id, token, error_text(error)))

    def extend(self, job_id: str, token: int, lease_ms: int) -> int:
        """Push the lease to server time + ``lease_ms``; returns the new deadline (ms)."""
        positive_int("lease_ms", lease_ms, MAX_LEASE_MS)
        return self.runner.run(ops.extend(self, job_id, token, lease_ms))

    def release(self, job_id: str, token: int) -> None:
        """Hand a claimed job back to the head of its lane (not counted as a failure)."""
        self.runner.run(ops.release(self, job_id, token))

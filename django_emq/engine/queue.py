"""A queue of fair lanes: the engine's public surface.

Every state change is one Lua script (see ``django_emq/engine/lua/``); reads are
plain commands, pipelined so each public call is one round trip.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import redis
from redis.exceptions import NoScriptError, RedisClusterException

from . import calls
from .exceptions import EnqueueError, JobError, check_code, refusal
from .ids import mint_job_id, validate_job_id, validate_lane, validate_task_path
from .keys import QueueKeys
from .payload import DEFAULT_MAX_PAYLOAD, decode, encode_arguments, encode_result, text
from .scripts import Scripts

if TYPE_CHECKING:
    from .client import Client

#: Largest weight a lane may carry: one turn serves at most this many of its jobs.
MAX_WEIGHT = 1000
#: How far in the past a ``run_after`` may be before it is taken for a mistake.
RUN_AFTER_PAST_LIMIT = timedelta(days=1)
WORKER_ID_RE = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")
#: Entries per job in the claim script's flat reply.
CLAIM_STRIDE = 11
#: Batch size of the looping maintenance calls (reap, promote, drain).
BATCH = 500
#: Most outcomes one ``complete_many`` call records.
MAX_BATCH = 1000


def default_worker_id() -> str:
    """``host:pid`` — what a worker records on the jobs it claims."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class Enqueued:
    """What enqueue answers: the job id, its state, whether it existed already,
    and the row's enqueue time (the server's clock, epoch ms)."""

    job_id: str
    state: str
    duplicate: bool
    enqueued_ms: int = 0


@dataclass(frozen=True, slots=True)
class Claim:
    """One claimed job. ``token`` (its attempt number) fences every later call."""

    job_id: str
    lane: str
    token: int
    task_path: str
    args: list[Any]
    kwargs: dict[str, Any]
    enqueued_ms: int
    deadline_ms: int
    worker_ids: tuple[str, ...] = ()
    started_ms: int = 0
    #: Times its lease expired before (a worker died or froze running it). Such a
    #: job ends its claim, and a worker records what it finished before running it.
    expiries: int = 0
    #: Why the job cannot run (its row is corrupt: a field missing or unreadable);
    #: ``None`` for a sound job. A worker makes such a job dead at once.
    defect: str | None = None


@dataclass(frozen=True, slots=True)
class LaneInfo:
    """One lane as the observability calls see it."""

    lane: str
    depth: int
    inflight: int
    ceiling: int | None
    weight: int
    paused: bool


@dataclass(frozen=True, slots=True)
class Totals:
    """Queue-wide counts, each read in O(1)."""

    pending: int
    active: int
    scheduled: int
    dead: int
    lanes: int
    ring: int


def _int(value: Any, default: int = 0) -> int:
    return default if value is None else int(value)


def _positive_int(name: str, value: object, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, not {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, not {value}")
    return value


def run_after_ms(run_after: datetime | None) -> int:
    """Epoch milliseconds for ``run_after``; 0 means now. Refuses naive or stale times."""
    if run_after is None:
        return 0
    if not isinstance(run_after, datetime):
        raise ValueError(f"run_after must be a datetime, not {type(run_after).__name__}")
    if run_after.tzinfo is None or run_after.utcoffset() is None:
        raise ValueError("run_after must be timezone-aware (use django.utils.timezone.now())")
    if run_after < datetime.now(UTC) - RUN_AFTER_PAST_LIMIT:
        raise ValueError(f"run_after {run_after.isoformat()} is more than a day in the past")
    return int(run_after.timestamp() * 1000)


class Queue:
    """One queue of fair lanes on one Valkey server.

    ``result_ttl`` is how long a finished job's row (its result) is kept,
    ``max_attempts`` how many failures a job may have before it is dead, and
    ``max_expiries`` how many times its lease may expire (its worker died or
    froze) before it is dead rather than returned to its lane.
    """

    def __init__(
        self,
        name: str = "default",
        *,
        connection: Client,
        max_attempts: int = 3,
        max_expiries: int = 3,
        result_ttl: timedelta = timedelta(days=1),
        max_payload: int = DEFAULT_MAX_PAYLOAD,
    ) -> None:
        self.name = name
        self.keys = QueueKeys(name)
        self.connection = connection
        self.max_attempts = _positive_int("max_attempts", max_attempts)
        self.max_expiries = _positive_int("max_expiries", max_expiries)
        self.result_ttl_ms = int(result_ttl.total_seconds() * 1000)
        self.max_payload = max_payload
        self._scripts = Scripts(connection)

    def __repr__(self) -> str:
        return f"<Queue {self.name!r}>"

    def _run(self, call: calls.Call, client: Any = None) -> Any:
        return self._scripts(call.script, call.keys, call.args, client)

    # -- enqueue -----------------------------------------------------------

    def _prepare(
        self,
        lane: str,
        task_path: str,
        args: Sequence[Any],
        kwargs: Mapping[str, Any] | None,
        job_id: str | None,
        run_after: datetime | None,
        max_attempts: int | None,
        meta: Mapping[str, Any] | None,
    ) -> calls.Call:
        validate_lane(lane)
        validate_task_path(task_path)
        job_id = mint_job_id() if job_id is None else validate_job_id(job_id)
        attempts = self.max_attempts if max_attempts is None else max_attempts
        _positive_int("max_attempts", attempts)
        args_json, kwargs_json = encode_arguments(args, kwargs, self.max_payload)
        meta_json = "" if not meta else encode_result(dict(meta))
        return calls.enqueue(
            self.keys,
            job_id,
            lane,
            task_path,
            args_json,
            kwargs_json,
            attempts,
            run_after_ms(run_after),
            meta_json,
        )

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
    ) -> Enqueued:
        """Enqueue one job on ``lane``. Everything is validated before anything is written.

        An existing ``job_id`` answers ``duplicate=True`` and changes nothing.
        Raises ``ValueError``/``InvalidArguments`` for bad input and
        ``EnqueueError`` when the server cannot be reached or refuses the write
        (out of memory, a read-only replica, an ACL that forbids it).
        """
        call = self._prepare(lane, task_path, args, kwargs, job_id, run_after, max_attempts, meta)
        try:
            reply = self._run(call)
        except (redis.RedisError, RedisClusterException) as exc:
            raise self._enqueue_error(exc) from exc
        return _enqueued(call, reply)

    def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[Enqueued]:
        """Enqueue many jobs in one round trip. Each item holds ``enqueue``'s arguments
        by name (``lane``, ``task_path``, ``args``, ``kwargs``, ``job_id``, ...).

        Every job is validated first: one bad job refuses the whole batch and
        nothing is written. Each job is then admitted atomically on its own.
        """
        prepared = [
            self._prepare(
                job["lane"],
                job["task_path"],
                job.get("args", ()),
                job.get("kwargs"),
                job.get("job_id"),
                job.get("run_after"),
                job.get("max_attempts"),
                job.get("meta"),
            )
            for job in jobs
        ]
        if not prepared:
            return []
        pipe = self.connection.pipeline(transaction=False)
        for call in prepared:
            self._scripts.pipelined(call.script, call.keys, call.args, pipe)
        try:
            replies = pipe.execute(raise_on_error=False)
            # After a SCRIPT FLUSH the server ran none of these: run them again.
            missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
            if missing:
                again = self.connection.pipeline(transaction=False)
                for i in missing:
                    self._run(prepared[i], again)
                for i, reply in zip(missing, again.execute(), strict=True):
                    replies[i] = reply
        except (redis.RedisError, RedisClusterException) as exc:
            raise self._enqueue_error(exc) from exc
        for reply in replies:
            if isinstance(reply, redis.RedisError):
                # Jobs before it in the batch may be admitted: retrying the batch
                # under the same job ids admits each job once.
                raise self._enqueue_error(reply) from reply
            if isinstance(reply, Exception):
                raise reply
        return [_enqueued(call, reply) for call, reply in zip(prepared, replies, strict=True)]

    def _enqueue_error(self, exc: Exception) -> EnqueueError:
        if isinstance(exc, redis.ConnectionError | redis.TimeoutError | RedisClusterException):
            return EnqueueError(f"could not reach Valkey to enqueue on {self.name!r}: {exc}")
        return EnqueueError(f"Valkey refused to enqueue on {self.name!r}: {exc}")

    # -- the worker's side ---------------------------------------------------

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
        flat = self._run(self._claim_call(lease_ms, turns, worker_id, max_jobs))
        return _claims(flat) or None

    def _claim_call(
        self, lease_ms: int, turns: int, worker_id: str | None, max_jobs: int | None
    ) -> calls.Call:
        _positive_int("lease_ms", lease_ms)
        _positive_int("turns", turns, MAX_WEIGHT)
        limit = turns * MAX_WEIGHT if max_jobs is None else _positive_int("max_jobs", max_jobs)
        worker = worker_id or default_worker_id()
        if not WORKER_ID_RE.fullmatch(worker):
            raise ValueError(f"{worker!r} is not a worker id: use 1-128 of A-Z a-z 0-9 _ . : @ -")
        return calls.claim(self.keys, lease_ms, turns, worker, limit)

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
        call = self._complete_call(outcomes)
        if call is None:
            return []
        return _refusals(call, self._run(call))

    def _complete_call(self, outcomes: Sequence[tuple[str, int, Any]]) -> calls.Call | None:
        encoded = encode_outcomes(outcomes)
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
        """:meth:`complete`, then :meth:`claim`, in one round trip: a worker's next
        turn rides along with its last outcome.

        Answers the claims (empty when no lane is serviceable, or when the claim
        failed: the caller claims again on its own) and the complete's error
        (``StaleToken``...), returned instead of raised so the claims, whose
        leases are held, are never dropped. A lost connection raises: whether
        the complete landed is unknown, and retrying it with :meth:`complete`
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
        """:meth:`complete_many`, then :meth:`claim`, in one round trip.

        Answers the claims and one entry per outcome: ``None`` when recorded,
        else what refused it (``StaleToken``, ``JobNotFound``, or the server's
        error for the whole batch, a lost connection included), returned rather
        than raised so the claims, whose leases are held, are never dropped. A
        connection lost before any reply raises, as in :meth:`complete_then_claim`.
        """
        take = self._claim_call(lease_ms, turns, worker_id, max_jobs)
        done = self._complete_call(outcomes)
        pipe = self.connection.pipeline(transaction=False)
        if done is not None:
            self._scripts.pipelined(done.script, done.keys, done.args, pipe)
        self._scripts.pipelined(take.script, take.keys, take.args, pipe)
        replies = pipe.execute(raise_on_error=False)
        done_reply, take_reply = replies if done is not None else (None, replies[0])
        # After a SCRIPT FLUSH the server ran neither: run them again, in order.
        # The claim may have run (another client loaded it meanwhile): whatever
        # the retried outcomes meet, its jobs are handed over, never dropped.
        if done is not None and isinstance(done_reply, NoScriptError):
            try:
                done_reply = self._run(done)
            except redis.RedisError as exc:
                done_reply = exc
        if isinstance(take_reply, NoScriptError):
            try:
                take_reply = self._run(take)
            except redis.RedisError:  # the outcomes are recorded: claim again later
                take_reply = None
        claims = [] if isinstance(take_reply, Exception) else _claims(take_reply)
        if done is None:
            return claims, []
        if isinstance(done_reply, Exception):
            return claims, [done_reply] * len(outcomes)
        return claims, list(_refusals(done, done_reply or []))

    def retry(self, job_id: str, token: int, error: str, delay_ms: int = 0) -> str:
        """Record a failure; the job is retried after ``delay_ms`` or is dead when out of
        attempts. Returns the job's new state (``pending``, ``scheduled`` or ``dead``)."""
        if delay_ms < 0:
            raise ValueError(f"delay_ms cannot be negative ({delay_ms})")
        reply = self._run(calls.retry(self.keys, job_id, token, error, delay_ms, dead=False))
        check_code(reply, job_id)
        return text(reply[1])

    def fail(self, job_id: str, token: int, error: str) -> None:
        """Record a failure that retrying cannot fix: the job is dead now."""
        reply = self._run(calls.retry(self.keys, job_id, token, error, 0, dead=True))
        check_code(reply, job_id)

    def extend(self, job_id: str, token: int, lease_ms: int) -> int:
        """Push the lease to server time + ``lease_ms``; returns the new deadline (ms)."""
        _positive_int("lease_ms", lease_ms)
        reply = self._run(calls.extend(self.keys, job_id, token, lease_ms))
        check_code(reply, job_id)
        return int(reply)

    def release(self, job_id: str, token: int) -> None:
        """Hand a claimed job back to the head of its lane (not counted as a failure)."""
        check_code(self._run(calls.release(self.keys, job_id, token)), job_id)

    def reap(self) -> list[str]:
        """Return every job whose lease expired to its lane; returns their ids.

        A job whose lease has expired as many times as its max attempts (its
        worker died or froze every time) is dead instead, with a
        ``LeaseExpired`` error: a poison job does not come back forever."""
        reaped: list[str] = []
        while True:
            batch = [text(i) for i in self._run(calls.reap(self.keys, BATCH, self.max_expiries))]
            reaped += batch
            if len(batch) < BATCH:
                return reaped

    def promote(self) -> tuple[int, int | None]:
        """Move every due scheduled job into its lane.

        Returns ``(promoted, next_due_ms)``; ``next_due_ms`` is ``None`` when
        nothing else is scheduled.
        """
        total = 0
        while True:
            count, next_due = self._run(calls.promote(self.keys, BATCH))
            total += int(count)
            if int(count) < BATCH:
                return total, (None if int(next_due) < 0 else int(next_due))

    # -- lane control -------------------------------------------------------

    def pause(self, lane: str) -> bool:
        """Take the lane off the ring; returns False if it was paused already."""
        return bool(self._run(calls.pause(self.keys, validate_lane(lane), True)))

    def resume(self, lane: str) -> bool:
        """Put a paused lane back; returns False if it was not paused."""
        return bool(self._run(calls.pause(self.keys, validate_lane(lane), False)))

    def set_limit(self, lane: str, ceiling: int | None) -> None:
        """Set the lane's concurrency ceiling (``None`` removes it)."""
        if ceiling is not None:
            _positive_int("ceiling", ceiling)
        self._run(calls.set_limit(self.keys, validate_lane(lane), ceiling))

    def set_weight(self, lane: str, weight: int) -> None:
        """Serve up to ``weight`` of the lane's jobs per turn (1 is the default)."""
        _positive_int("weight", weight, MAX_WEIGHT)
        self._run(calls.set_weight(self.keys, validate_lane(lane), weight))

    def drain(self, lane: str) -> int:
        """Delete the lane's pending jobs; keeps its settings and in-flight jobs.
        Works in batches, so a deep lane never blocks the server; returns the count."""
        validate_lane(lane)
        total = 0
        while True:
            deleted, remaining = self._run(calls.drain(self.keys, lane, BATCH))
            total += int(deleted)
            if int(remaining) == 0 or int(deleted) == 0:
                return total

    def move(self, job_id: str, lane: str) -> bool:
        """Move a pending or scheduled job to ``lane``, keeping its mint place.
        Returns False if it was in that lane already."""
        validate_job_id(job_id)
        reply = self._run(calls.move(self.keys, job_id, validate_lane(lane)))
        check_code(reply, job_id)
        return bool(reply)

    # -- dead jobs ----------------------------------------------------------

    def retry_dead(self, job_ids: Iterable[str] | None = None, *, lane: str | None = None) -> int:
        """Send dead jobs back to their lanes at their mint place, failures reset.

        ``job_ids`` names them (only those of ``lane`` when a lane is given);
        ``job_ids=None`` with a lane takes every dead job of the lane. Ids that
        are not dead jobs are skipped. Returns how many were retried.
        """
        return self._dead(calls.retry_dead, job_ids, lane)

    def delete_dead(self, job_ids: Iterable[str] | None = None, *, lane: str | None = None) -> int:
        """Delete dead jobs, rows included; chosen as :meth:`retry_dead` chooses them.
        Returns how many were deleted."""
        return self._dead(calls.delete_dead, job_ids, lane)

    def _dead(
        self,
        build: Callable[[QueueKeys, str, int, list[str]], calls.Call],
        job_ids: Iterable[str] | None,
        lane: str | None,
    ) -> int:
        lane_arg = "" if lane is None else validate_lane(lane)
        total = 0
        if job_ids is None:
            if lane is None:
                raise ValueError("name the dead jobs: give job ids, a lane, or both")
            while True:  # batches, so a lane with many dead jobs never blocks the server
                done, remaining = self._run(build(self.keys, lane_arg, BATCH, []))
                total += int(done)
                if int(remaining) == 0 or int(done) == 0:
                    return total
        ids = [validate_job_id(job_id) for job_id in job_ids]
        for i in range(0, len(ids), BATCH):
            done, _ = self._run(build(self.keys, lane_arg, BATCH, ids[i : i + BATCH]))
            total += int(done)
        return total

    # -- observability --------------------------------------------------------

    def depth(self, lane: str) -> int:
        """Pending jobs in ``lane``."""
        return int(self.connection.zcard(self.keys.pending(lane)))

    def totals(self) -> Totals:
        """Queue-wide counts in one round trip, each O(1)."""
        k = self.keys
        pipe = self.connection.pipeline(transaction=False)
        pipe.hget(k.stats, "pending")
        for key in (k.active, k.schedule, k.dead, k.depths):
            pipe.zcard(key)
        pipe.llen(k.ring)
        pending, active, scheduled, dead, lanes, ring = pipe.execute()
        return Totals(_int(pending), active, scheduled, dead, lanes, ring)

    def lanes(self, top: int = 50, offset: int = 0) -> list[LaneInfo]:
        """The ``top`` deepest lanes from ``offset``, deepest first, read from the
        depth index (two round trips, whatever the number of lanes)."""
        _positive_int("top", top, 10_000)
        k = self.keys
        ranked: list[tuple[bytes, float]] = self.connection.zrevrange(  # type: ignore[assignment]
            k.depths, offset, offset + top - 1, withscores=True
        )
        return self._describe([(text(lane), int(depth)) for lane, depth in ranked])

    def lane(self, lane: str) -> LaneInfo:
        """One lane's depth, in-flight count and settings."""
        return self._describe([(validate_lane(lane), self.depth(lane))])[0]

    def lanes_named(self, names: Sequence[str]) -> list[LaneInfo]:
        """The named lanes in the order given, empty ones too (two round trips)."""
        names = [validate_lane(lane) for lane in names]
        if not names:
            return []
        depths = self.connection.zmscore(self.keys.depths, names)
        return self._describe([(lane, _int(d)) for lane, d in zip(names, depths, strict=True)])

    def _describe(self, ranked: list[tuple[str, int]]) -> list[LaneInfo]:
        if not ranked:
            return []
        k = self.keys
        names = [lane for lane, _ in ranked]
        pipe = self.connection.pipeline(transaction=False)
        for key in (k.inflight, k.ceilings, k.weights):
            pipe.hmget(key, names)
        pipe.smismember(k.paused, names)
        inflight, ceilings, weights, paused = pipe.execute()
        return [
            LaneInfo(
                lane,
                depth,
                _int(inflight[i]),
                None if ceilings[i] is None else int(ceilings[i]),
                _int(weights[i], 1),
                bool(paused[i]),
            )
            for i, (lane, depth) in enumerate(ranked)
        ]

    def job(self, job_id: str) -> dict[str, str] | None:
        """The job's row as text fields, or ``None`` if there is none."""
        row = self.connection.hgetall(self.keys.job(job_id))
        return {text(f): text(v) for f, v in row.items()} if row else None


def _enqueued(call: calls.Call, reply: Sequence[Any]) -> Enqueued:
    """What the enqueue script's reply ``{new?, state, enq}`` stands for."""
    return Enqueued(str(call.args[0]), text(reply[1]), reply[0] == 0, _int(reply[2]))


def _lenient_int(value: Any) -> int:
    """A timestamp kept on a row; 0 when it is missing or unreadable."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def encode_outcomes(outcomes: Sequence[tuple[str, int, Any]]) -> list[tuple[str, int, str]]:
    """Check ``(job_id, token, result)`` outcomes and encode their results;
    raises on bad input (nothing has been sent then)."""
    if isinstance(outcomes, str | bytes) or not isinstance(outcomes, Sequence):
        raise TypeError("outcomes must be a sequence of (job_id, token, result) tuples")
    if len(outcomes) > MAX_BATCH:
        raise ValueError(f"at most {MAX_BATCH} outcomes per call, not {len(outcomes)}")
    encoded: list[tuple[str, int, str]] = []
    for entry in outcomes:
        if not isinstance(entry, tuple) or len(entry) != 3:
            raise TypeError(f"each outcome is a (job_id, token, result) tuple, not {entry!r}")
        job_id, token, result = entry
        if not isinstance(job_id, str) or not job_id:
            raise ValueError(f"job_id must be a non-empty str, not {job_id!r}")
        _positive_int("token", token)
        encoded.append((job_id, token, encode_result(result)))
    return encoded


def _claims(flat: Sequence[Any] | None) -> list[Claim]:
    """The claim script's flat reply, job by job."""
    if not flat:
        return []
    return [_claim(flat[i : i + CLAIM_STRIDE]) for i in range(0, len(flat), CLAIM_STRIDE)]


def _refusals(call: calls.Call, codes: Sequence[int]) -> list[JobError | None]:
    """The complete script's codes, one per job of ``call``, as refusals."""
    ids = call.args[2::3]
    return [refusal(code, str(job_id)) for code, job_id in zip(codes, ids, strict=True)]


def _claim(entry: Sequence[Any]) -> Claim:
    """One job of the claim script's reply. A row edited by hand may lack fields
    or hold unreadable ones: the claim then names its ``defect`` instead of
    raising, so one corrupt row cannot take the worker down."""
    job_id, lane, token, task, args, kwargs, enqueued, deadline, workers, started, expiries = entry
    problems = []
    if task is None or not text(task):
        problems.append("no task path")
    try:
        args = decode(args)
    except ValueError:
        args = None
        problems.append("args are not JSON")
    try:
        kwargs = decode(kwargs)
    except ValueError:
        kwargs = None
        problems.append("kwargs are not JSON")
    if not isinstance(args, list | None):
        problems.append(f"args are a JSON {type(args).__name__}, not a list")
    if not isinstance(kwargs, dict | None):
        problems.append(f"kwargs are a JSON {type(kwargs).__name__}, not an object")
    return Claim(
        job_id=text(job_id),
        lane=text(lane),
        token=int(token),
        task_path="" if task is None else text(task),
        args=args if isinstance(args, list) else [],
        kwargs=kwargs if isinstance(kwargs, dict) else {},
        enqueued_ms=_lenient_int(enqueued),
        deadline_ms=int(deadline),
        worker_ids=tuple(text(workers).split(",")),
        started_ms=_lenient_int(started),
        expiries=int(expiries),
        defect=f"corrupt job row: {'; '.join(problems)}" if problems else None,
    )

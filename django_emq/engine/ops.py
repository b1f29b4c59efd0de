"""Each protocol operation once, without I/O: what it sends and how its reply reads.

An :class:`Op` is a script call (:mod:`.calls` builds its name, keys and
arguments) with the parser of its reply (:mod:`.records`, :mod:`.claim_reply`,
:mod:`.exceptions`). It holds no client: a runner (:mod:`.runner`) sends it, the sync one for the
API, the admin and the tests, the async one for the worker, so both run the
same operation the same way. An operation that works in batches (reap,
promote, drain, the dead jobs of a lane) says with ``again`` whether a reply
asks for one more batch; the runner repeats it.

The builders take what they need of a queue as :class:`QueueShape` (its keys
and settings), checked already: validating input is the API's part.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from . import calls
from .calls import COMPLETE_CLAIM_OUTCOMES, Call
from .claim_reply import parse_claims
from .exceptions import JobError, check_code
from .keys import QueueKeys
from .payload import text
from .records import (
    Claim,
    ClaimRequest,
    Enqueued,
    fairness_arg,
    parse_enqueued,
    rate_arg,
    refusals,
)
from .tally import Tally, record_calls

#: Batch size of the looping maintenance calls (reap, promote, drain, dead jobs).
BATCH = 500


class QueueShape(Protocol):
    """What the operations read of a queue: its keys and settings."""

    keys: QueueKeys
    history: int
    result_ttl_ms: int
    max_expiries: int
    rate: tuple[int, int] | None
    fairness: str


@dataclass(frozen=True, slots=True)
class Op[T]:
    """One script call and the parser of its reply; ``again``: whether a reply
    asks for the next batch (``None``: one call is the whole operation)."""

    call: Call
    parse: Callable[[Any], T]
    again: Callable[[T], bool] | None = None


#: A claim's answer with the outcomes that rode along: the claims, one refusal
#: (or ``None``: recorded) per outcome.
ClaimedWith = tuple[list[Claim], list[JobError | None]]


def _checked(job_id: str, reply: Any) -> Any:
    check_code(reply, job_id)
    return reply


def _none(job_id: str, reply: Any) -> None:
    check_code(reply, job_id)


def _state(job_id: str, reply: Any) -> str:
    check_code(reply, job_id)
    return text(reply[1])


def _int(job_id: str, reply: Any) -> int:
    check_code(reply, job_id)
    return int(reply)


def _bool(job_id: str, reply: Any) -> bool:
    check_code(reply, job_id)
    return bool(reply)


def _pair(reply: Any) -> tuple[int, int]:
    first, second = reply
    return int(first), int(second)


def _reply(reply: Any) -> Any:
    return reply


# -- a job's path --------------------------------------------------------------


def enqueue(call: Call) -> Op[Enqueued]:
    """An enqueue call (built by ``Queue.prepare``); parses to ``Enqueued``."""
    return Op(call, partial(parse_enqueued, str(call.args[0]), str(call.args[1])))


def _claim_args(
    q: QueueShape, lease_ms: int, turns: int, worker: str, limit: int
) -> tuple[int, int, str, int, int, str, str]:
    """A claim's arguments after the keys, as ``calls.claim`` and
    ``calls.complete_claim`` both take them."""
    return lease_ms, turns, worker, limit, q.history, rate_arg(q.rate), fairness_arg(q.fairness)


def claim(q: QueueShape, lease_ms: int, turns: int, worker: str, limit: int) -> Op[list[Claim]]:
    call = calls.claim(q.keys, *_claim_args(q, lease_ms, turns, worker, limit))
    return Op(call, parse_claims)


def claim_for(q: QueueShape, request: ClaimRequest) -> Op[list[Claim]]:
    """The claim ``request`` asks for, checked first (``ValueError`` if bad)."""
    checked = request.checked()
    assert checked.max_jobs is not None  # filled in by checked()
    return claim(q, checked.lease_ms, checked.turns, checked.worker, checked.max_jobs)


def completed(call: Call) -> Op[list[JobError | None]]:
    """A complete call (``calls.complete``); parses to one refusal (or ``None``:
    recorded) per outcome."""
    return Op(call, partial(refusals, call.args[2::3]))


def complete(
    q: QueueShape, encoded: Sequence[tuple[str, int, str | bytes]]
) -> Op[list[JobError | None]]:
    """Record the success of each encoded ``(job_id, token, result_json)``."""
    return completed(calls.complete(q.keys, encoded, q.result_ttl_ms))


def _claimed_with(job_ids: Sequence[object], reply: Any) -> ClaimedWith:
    codes, flat = reply
    return parse_claims(flat), refusals(job_ids, codes)


def claimed_with(call: Call) -> Op[ClaimedWith]:
    """A complete-then-claim call (``calls.complete_claim``); parses to the
    claims and one refusal (or ``None``) per outcome."""
    return Op(call, partial(_claimed_with, call.args[COMPLETE_CLAIM_OUTCOMES::3]))


def complete_claim(
    q: QueueShape,
    encoded: Sequence[tuple[str, int, str | bytes]],
    lease_ms: int,
    turns: int,
    worker: str,
    limit: int,
) -> Op[ClaimedWith]:
    """Record ``encoded`` outcomes, then claim up to ``limit`` jobs (0: none)."""
    args = _claim_args(q, lease_ms, turns, worker, limit)
    return claimed_with(calls.complete_claim(q.keys, encoded, q.result_ttl_ms, *args))


def retry(q: QueueShape, job_id: str, token: int, error: str, delay_ms: int) -> Op[str]:
    """A failure to retry after ``delay_ms``; parses to the job's new state."""
    call = calls.retry(q.keys, job_id, token, error, delay_ms, False, q.history)
    return Op(call, partial(_state, job_id))


def fail(q: QueueShape, job_id: str, token: int, error: str) -> Op[None]:
    """A failure retrying cannot fix: the job is dead."""
    call = calls.retry(q.keys, job_id, token, error, 0, True, q.history)
    return Op(call, partial(_none, job_id))


def extend(q: QueueShape, job_id: str, token: int, lease_ms: int) -> Op[int]:
    """Push the lease on; parses to the new deadline (ms)."""
    return Op(calls.extend(q.keys, job_id, token, lease_ms), partial(_int, job_id))


def release(q: QueueShape, job_id: str, token: int) -> Op[None]:
    return Op(calls.release(q.keys, job_id, token), partial(_none, job_id))


def _moved(reply: Any) -> int:
    return int(reply)


def record_history(q: QueueShape, tally: Tally) -> list[Op[int]]:
    """Send ``tally`` to the queue's history (see :mod:`.tally`): its calls (none
    when it is empty), each answering how many of its first starts waited from
    their due time rather than their enqueue."""
    return [Op(call, _moved) for call in record_calls(q.keys, tally)]


# -- the beat's upkeep -------------------------------------------------------------


def _reaped(reply: Any) -> list[str]:
    return [text(job_id) for job_id in reply]


def reap(q: QueueShape) -> Op[list[str]]:
    """Return a batch of expired leases' jobs to their lanes; their ids."""
    call = calls.reap(q.keys, BATCH, q.max_expiries, q.history)
    return Op(call, _reaped, lambda ids: len(ids) >= BATCH)


def _promoted(reply: Any) -> tuple[int, int, int]:
    count, next_due, lanes = reply
    return int(count), int(next_due), int(lanes)


def promote(q: QueueShape) -> Op[tuple[int, int, int]]:
    """Move a batch of due jobs and throttled lanes back: ``(count, next_due, lanes)``."""
    return Op(
        calls.promote(q.keys, BATCH),
        _promoted,
        lambda r: r[0] >= BATCH or r[2] >= BATCH,
    )


def promoted(batches: Sequence[tuple[int, int, int]]) -> tuple[int, int | None]:
    """A whole promote's answer: jobs promoted, and the next due time (ms) or ``None``."""
    due = batches[-1][1]
    return sum(count for count, _, _ in batches), (None if due < 0 else due)


# -- lane control and dead jobs ------------------------------------------------------


def _more(reply: tuple[int, int]) -> bool:
    done, remaining = reply
    return remaining != 0 and done != 0


def pause(q: QueueShape, lane: str, paused: bool) -> Op[bool]:
    return Op(calls.pause(q.keys, lane, paused), bool)


def set_limit(q: QueueShape, lane: str, ceiling: int | None) -> Op[Any]:
    return Op(calls.set_limit(q.keys, lane, ceiling), _reply)


def set_weight(q: QueueShape, lane: str, weight: int) -> Op[Any]:
    return Op(calls.set_weight(q.keys, lane, weight), _reply)


def set_tenant_limit(q: QueueShape, tenant: str, ceiling: int | None) -> Op[Any]:
    return Op(calls.set_tenant_limit(q.keys, tenant, ceiling), _reply)


def set_max_depth(q: QueueShape, lane: str, max_depth: int | None) -> Op[Any]:
    return Op(calls.set_max_depth(q.keys, lane, max_depth), _reply)


def set_rate(q: QueueShape, lane: str, limit: tuple[int, int] | None) -> Op[Any]:
    return Op(calls.set_rate(q.keys, lane, limit), _reply)


def drain(q: QueueShape, lane: str) -> Op[tuple[int, int]]:
    """Delete a batch of the lane's pending jobs: ``(deleted, remaining)``."""
    return Op(calls.drain(q.keys, lane, BATCH), _pair, _more)


def move(q: QueueShape, job_id: str, lane: str) -> Op[bool]:
    return Op(calls.move(q.keys, job_id, lane), partial(_bool, job_id))


#: ``calls.retry_dead`` or ``calls.delete_dead``.
DeadCall = Callable[[QueueKeys, str, int, list[str]], Call]


def dead(q: QueueShape, build: DeadCall, lane: str, job_ids: list[str]) -> Op[tuple[int, int]]:
    """Retry or delete dead jobs: the named ones, or (no ids) a batch of the
    lane's; ``(done, remaining)``."""
    call = build(q.keys, lane, BATCH, job_ids)
    return Op(call, _pair, None if job_ids else _more)


# -- job control -----------------------------------------------------------------


def cancel(q: QueueShape, job_id: str, error: str) -> Op[str]:
    call = calls.cancel(q.keys, job_id, q.result_ttl_ms, error, q.history)
    return Op(call, lambda reply: text(_checked(job_id, reply)))


def due_now(q: QueueShape, job_id: str) -> Op[None]:
    return Op(calls.due_now(q.keys, job_id), partial(_none, job_id))


def ask_stop(q: QueueShape, worker_id: str, alive_ms: int) -> Op[bool]:
    """Ask live worker ``worker_id`` to stop; whether a request for it is in place."""
    return Op(calls.ask_stop(q.keys, worker_id, alive_ms), bool)


def page(key: str, count: int, after: tuple[str, str] | None) -> Op[list[tuple[str, str]]]:
    """``(member, score)`` pairs of sorted set ``key`` after ``after``, at most ``count``."""
    return Op(calls.page(key, count, after), _pairs)


def _pairs(reply: Any) -> list[tuple[str, str]]:
    flat = [text(x) for x in reply]
    return list(zip(flat[::2], flat[1::2], strict=True))


def progress(q: QueueShape, job_id: str, done: float, note: str) -> Op[bool]:
    return Op(calls.progress(q.keys, job_id, done, note), partial(_bool, job_id))

"""Argument building for every script: ``(name, keys, args)``, run elsewhere.

Kept apart from running so the key layout of each call can be read and
tested on its own (every key carries the queue's ``{q}`` hash tag).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .keys import QueueKeys
from .records import rate_arg

#: Where a complete call's outcome triples start in its arguments.
COMPLETE_OUTCOMES = 2
#: Where a complete_claim call's outcome triples start in its arguments.
COMPLETE_CLAIM_OUTCOMES = 9


class Call(NamedTuple):
    """One script invocation, ready to run."""

    script: str
    keys: list[str]
    args: list[str | int | bytes]


def enqueue(
    k: QueueKeys,
    job_id: str,
    lane: str,
    task_path: str,
    args_json: str,
    kwargs_json: str,
    max_attempts: int,
    run_after_ms: int,
    meta: str,
    max_depth: int | None = None,
    unique_key: str = "",
    tick: tuple[str, int] | None = None,
    tenant: str = "",
) -> Call:
    """``tenant``: the lane's tenant ('' keeps the recorded one)."""
    keys = [
        k.ring,
        k.on_ring,
        k.schedule,
        k.paused,
        k.ceilings,
        k.inflight,
        k.depths,
        k.stats,
        k.seq,
        k.wake,
        k.job(job_id),
        k.pending(lane),
    ]
    args: list[str | int | bytes] = [
        job_id,
        lane,
        task_path,
        args_json,
        kwargs_json,
        max_attempts,
        run_after_ms,
        meta,
        k.prefix,
        "" if max_depth is None else max_depth,
        unique_key,
        "" if tick is None else tick[0],
        0 if tick is None else tick[1],
        tenant,
    ]
    return Call("enqueue", keys, args)


def claim(
    k: QueueKeys,
    lease_ms: int,
    turns: int,
    worker: str,
    limit: int,
    history: int,
    rate: str = "",
    fairness: str = "",
) -> Call:
    """``rate``: the queue's default rate limit per lane, ``<count>:<per_ms>``; '' for none.
    ``fairness``: ``time`` for a time-fair queue, '' for count-fair."""
    keys = [
        k.ring,
        k.on_ring,
        k.active,
        k.paused,
        k.ceilings,
        k.weights,
        k.inflight,
        k.depths,
        k.stats,
        k.turn,
    ]
    return Call("claim", keys, [k.prefix, lease_ms, turns, worker, limit, history, rate, fairness])


def complete(k: QueueKeys, outcomes: Sequence[tuple[str, int, str | bytes]], ttl_ms: int) -> Call:
    """Record the success of each ``(job_id, token, result_json)`` of ``outcomes``."""
    keys = [
        k.ring,
        k.on_ring,
        k.active,
        k.paused,
        k.ceilings,
        k.inflight,
        k.stats,
        k.wake,
    ]
    args: list[str | int | bytes] = [k.prefix, ttl_ms]
    assert len(args) == COMPLETE_OUTCOMES
    for job_id, token, result_json in outcomes:
        args += (job_id, token, result_json)
    return Call("complete", keys, args)


def complete_claim(
    k: QueueKeys,
    outcomes: Sequence[tuple[str, int, str | bytes]],
    ttl_ms: int,
    lease_ms: int,
    turns: int,
    worker: str,
    limit: int,
    history: int,
    rate: str = "",
    fairness: str = "",
) -> Call:
    """Record ``outcomes`` as :func:`complete` does, then claim as :func:`claim`
    does (``limit`` 0: claim nothing), in one script call. The outcomes start at
    ``COMPLETE_CLAIM_OUTCOMES`` of the arguments."""
    keys = [
        k.ring,
        k.on_ring,
        k.active,
        k.paused,
        k.ceilings,
        k.weights,
        k.inflight,
        k.depths,
        k.stats,
        k.turn,
        k.wake,
    ]
    args: list[str | int | bytes] = [
        k.prefix,
        ttl_ms,
        lease_ms,
        turns,
        worker,
        limit,
        history,
        rate,
        fairness,
    ]
    assert len(args) == COMPLETE_CLAIM_OUTCOMES
    for job_id, token, result_json in outcomes:
        args += (job_id, token, result_json)
    return Call("complete_claim", keys, args)


def retry(
    k: QueueKeys, job_id: str, token: int, error: str, delay_ms: int, dead: bool, history: int
) -> Call:
    keys = [*k.job_sets, k.job(job_id)]
    mode = "dead" if dead else "retry"
    return Call("retry", keys, [k.prefix, job_id, token, error, delay_ms, mode, history])


def extend(k: QueueKeys, job_id: str, token: int, lease_ms: int) -> Call:
    return Call("extend", [k.active, k.job(job_id)], [job_id, token, lease_ms])


def release(k: QueueKeys, job_id: str, token: int) -> Call:
    keys = [
        k.ring,
        k.on_ring,
        k.active,
        k.paused,
        k.ceilings,
        k.inflight,
        k.depths,
        k.stats,
        k.wake,
        k.job(job_id),
    ]
    return Call("release", keys, [k.prefix, job_id, token])


def reap(k: QueueKeys, limit: int, max_expiries: int, history: int) -> Call:
    keys = [
        k.ring,
        k.on_ring,
        k.active,
        k.paused,
        k.ceilings,
        k.inflight,
        k.depths,
        k.stats,
        k.wake,
        k.dead,
    ]
    return Call("reap", keys, [k.prefix, limit, max_expiries, history])


def promote(k: QueueKeys, limit: int) -> Call:
    keys = [
        k.ring,
        k.on_ring,
        k.schedule,
        k.paused,
        k.ceilings,
        k.inflight,
        k.depths,
        k.stats,
        k.wake,
    ]
    return Call("promote", keys, [k.prefix, limit])


def pause(k: QueueKeys, lane: str, paused: bool) -> Call:
    keys = [k.ring, k.on_ring, k.paused, k.ceilings, k.inflight, k.wake, k.pending(lane)]
    return Call("pause", keys, [lane, "1" if paused else "0"])


def set_limit(k: QueueKeys, lane: str, ceiling: int | None) -> Call:
    keys = [k.ring, k.on_ring, k.paused, k.ceilings, k.inflight, k.wake, k.pending(lane)]
    return Call("set_limit", keys, [lane, "" if ceiling is None else ceiling])


def set_max_depth(k: QueueKeys, lane: str, max_depth: int | None) -> Call:
    return Call("set_max_depth", [k.max_depths], [lane, "" if max_depth is None else max_depth])


def set_rate(k: QueueKeys, lane: str, rate: tuple[int, int] | None) -> Call:
    keys = [
        k.ring,
        k.on_ring,
        k.paused,
        k.ceilings,
        k.inflight,
        k.wake,
        k.pending(lane),
        k.rates,
        k.throttled,
        k.starts(lane),
    ]
    return Call("set_rate", keys, [lane, rate_arg(rate)])


def set_weight(k: QueueKeys, lane: str, weight: int) -> Call:
    return Call("set_weight", [k.weights], [lane, weight])


def set_tenant_limit(k: QueueKeys, tenant: str, ceiling: int | None) -> Call:
    keys = [k.ring, k.on_ring, k.ceilings, k.inflight, k.wake]
    return Call("set_tenant_limit", keys, [tenant, "" if ceiling is None else ceiling])


def drain(k: QueueKeys, lane: str, limit: int) -> Call:
    keys = [k.ring, k.on_ring, k.depths, k.stats, k.pending(lane)]
    return Call("drain", keys, [k.prefix, lane, limit])


def move(k: QueueKeys, job_id: str, to_lane: str) -> Call:
    keys = [
        k.ring,
        k.on_ring,
        k.paused,
        k.ceilings,
        k.inflight,
        k.depths,
        k.stats,
        k.wake,
        k.job(job_id),
        k.pending(to_lane),
    ]
    return Call("move", keys, [k.prefix, job_id, to_lane])


def retry_dead(k: QueueKeys, lane: str, limit: int, job_ids: list[str]) -> Call:
    keys = [
        k.ring,
        k.on_ring,
        k.dead,
        k.paused,
        k.ceilings,
        k.inflight,
        k.depths,
        k.stats,
        k.wake,
    ]
    return Call("retry_dead", keys, [k.prefix, lane, limit, *job_ids])


def delete_dead(k: QueueKeys, lane: str, limit: int, job_ids: list[str]) -> Call:
    return Call("delete_dead", [k.dead], [k.prefix, lane, limit, *job_ids])


def cancel(k: QueueKeys, job_id: str, ttl_ms: int, error: str, history: int) -> Call:
    keys = [k.schedule, k.depths, k.stats, k.job(job_id), k.wake]
    return Call("cancel", keys, [k.prefix, job_id, ttl_ms, error, history])


def ask_stop(k: QueueKeys, worker_id: str, alive_ms: int) -> Call:
    return Call("ask_stop", [k.workers, k.stops], [worker_id, alive_ms])


def page(key: str, count: int, after: tuple[str, str] | None) -> Call:
    """The next ``count`` members of sorted set ``key`` (one of a queue's, so
    it carries the hash tag) after ``after`` = (score as the set printed it,
    member); from the first with ``None``."""
    score, member = after or ("", "")
    return Call("page", [key], [count, score, member])


def progress(k: QueueKeys, job_id: str, done: float, note: str) -> Call:
    return Call("progress", [k.job(job_id)], [repr(float(done)), note])


def due_now(k: QueueKeys, job_id: str) -> Call:
    return Call("due_now", [k.schedule, k.job(job_id)], [job_id])


def read_job(k: QueueKeys, job_id: str, most: int) -> Call:
    """The admin's job page: the row, the clock, the heartbeats of ``most`` of
    its workers, its lease deadline."""
    return Call("read_job", [k.job(job_id), k.workers, k.active], [job_id, most])

"""Bounds: leases, delays and offsets are checked before anything is sent;
arguments that cannot be encoded raise ``InvalidArguments`` naming the
problem; a job's row stays the same size however often it is claimed or fails.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis

from django_emq import enqueue_for
from django_emq.conf import emq_settings
from django_emq.engine.ids import lane_id
from django_emq.engine.queue import Queue
from django_emq.engine.records import (
    MAX_ATTEMPTS_LIMIT,
    MAX_CEILING,
    MAX_DELAY_MS,
    MAX_DEPTH_LIMIT,
    MAX_LEASE_MS,
)
from django_emq.engine.rows import Row
from django_emq.exceptions import InvalidArguments
from tests.chaos_tasks import add
from tests.test_worker import backend

from .helpers import dump
from .invariants import check_invariants

A = lane_id("USR", 1)
TASK = "tests.tasks.noop"


@contextmanager
def nothing_written(r: redis.Redis) -> Iterator[None]:
    before = dump(r)
    yield
    assert dump(r) == before, "a refused call wrote something"


def claimed(queue: Queue) -> tuple[str, int]:
    queue.enqueue(A, TASK, job_id="one")
    claims = queue.claim(60_000, worker_id="w:1")
    assert claims is not None
    return claims[0].job_id, claims[0].token


@pytest.mark.parametrize("lease_ms", [MAX_LEASE_MS + 1, 10**19, 0, -1, 1.5, True])
def test_a_claim_refuses_a_lease_out_of_bounds(r: redis.Redis, queue: Queue, lease_ms: Any) -> None:
    queue.enqueue(A, TASK)
    with nothing_written(r), pytest.raises(ValueError, match="lease_ms must be"):
        queue.claim(lease_ms)


def test_a_lease_of_24_hours_is_allowed(queue: Queue) -> None:
    queue.enqueue(A, TASK)
    claims = queue.claim(MAX_LEASE_MS, worker_id="w:1")
    assert claims is not None
    assert queue.extend(claims[0].job_id, claims[0].token, MAX_LEASE_MS) > 0


@pytest.mark.parametrize("lease_ms", [MAX_LEASE_MS + 1, 10**30, 0, float("nan")])
def test_extend_refuses_a_lease_out_of_bounds(r: redis.Redis, queue: Queue, lease_ms: Any) -> None:
    job_id, token = claimed(queue)
    with nothing_written(r), pytest.raises(ValueError, match="lease_ms must be"):
        queue.extend(job_id, token, lease_ms)


@pytest.mark.parametrize(
    "delay_ms", [float("nan"), float("inf"), 1.5, -5, True, "10", MAX_DELAY_MS + 1]
)
def test_retry_refuses_a_delay_that_is_no_whole_number_in_bounds(
    r: redis.Redis, queue: Queue, delay_ms: Any
) -> None:
    job_id, token = claimed(queue)
    with nothing_written(r), pytest.raises(ValueError, match="delay_ms must be"):
        queue.retry(job_id, token, "boom", delay_ms)
    assert queue.retry(job_id, token, "boom", 0) == "pending"


@pytest.mark.parametrize("offset", [-5, -1, 1.5, None])
def test_lanes_refuse_an_offset_that_is_no_whole_number_from_0(queue: Queue, offset: Any) -> None:
    with pytest.raises(ValueError, match="offset must be"):
        queue.lanes(offset=offset)


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


BAD_ARGUMENTS: dict[str, tuple[Callable[[Queue], object], str]] = {
    "nested 100,000 deep": (lambda q: q.enqueue(A, TASK, [nested(100_000)]), "nested too deeply"),
    "a nested kwarg": (lambda q: q.enqueue(A, TASK, (), {"a": nested(100_000)}), "nested too"),
    "a lone surrogate": (lambda q: q.enqueue(A, TASK, ["\udc80"]), "lone surrogate"),
    "a surrogate kwarg": (lambda q: q.enqueue(A, TASK, (), {"a": "x\ud800"}), "lone surrogate"),
    "a surrogate in meta": (lambda q: q.enqueue(A, TASK, meta={"a": "\udc80"}), "surrogate"),
    "NaN": (lambda q: q.enqueue(A, TASK, [float("nan")]), "JSON-serialisable"),
    "over the size limit": (lambda q: q.enqueue(A, TASK, ["x" * 2_000_000]), "over the"),
    "in a batch": (
        lambda q: q.enqueue_many(
            [{"lane": A, "task_path": TASK}, {"lane": A, "task_path": TASK, "args": ["\udc80"]}]
        ),
        "lone surrogate",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_arguments_that_cannot_be_encoded_raise_invalid_arguments(
    r: redis.Redis, queue: Queue, case: str
) -> None:
    call, message = BAD_ARGUMENTS[case]
    with nothing_written(r), pytest.raises(InvalidArguments, match=message):
        call(queue)


def test_a_result_with_a_lone_surrogate_is_refused_and_the_job_still_completes(
    queue: Queue,
) -> None:
    job_id, token = claimed(queue)
    with pytest.raises(InvalidArguments, match="lone surrogate"):
        queue.complete(job_id, token, "\udc80")
    queue.complete(job_id, token, "fine")
    assert queue.job(job_id)[Row.STATE] == "done"  # type: ignore[index]


def test_an_error_text_with_a_lone_surrogate_is_kept_readable(queue: Queue) -> None:
    job_id, token = claimed(queue)
    assert queue.retry(job_id, token, "bad \udc80 text") == "pending"
    assert queue.job(job_id)[Row.ERROR] == "bad ? text"  # type: ignore[index]


#: Most bytes one ``tries`` entry takes: a start (13 digits), then its length
#: in ms, an outcome letter and a failure number (as many digits as the
#: row's own ``errors_total``): bounded, not growing with the claims.
TRY_BYTES = 13 + 1 + 9 + 1 + 9 + 1


def row_size(r: redis.Redis, queue: Queue, job_id: str) -> int:
    key = queue.keys.job(job_id)
    return sum(int(r.hstrlen(key, f)) for f in (Row.WORKERS, Row.ERRORS))


def tries_size(r: redis.Redis, queue: Queue, job_id: str) -> int:
    return int(r.hstrlen(queue.keys.job(job_id), Row.TRIES))


def test_a_row_stays_the_same_size_over_thousands_of_claims(r: redis.Redis) -> None:
    queue = Queue("q", connection=r, history=4)
    queue.enqueue(A, TASK, job_id="one")
    sizes = []
    for cycle in range(1, 2001):
        claims = queue.claim(60_000, worker_id=f"w:{cycle:05d}")
        assert claims is not None
        queue.release("one", claims[0].token)
        if cycle in (10, 2000):
            sizes.append(row_size(r, queue, "one"))
    assert sizes[0] == sizes[1]
    assert tries_size(r, queue, "one") <= 4 * TRY_BYTES
    row = queue.job("one")
    assert row is not None
    assert row[Row.WORKERS] == "w:01997,w:01998,w:01999,w:02000"
    assert len(row[Row.TRIES].split(",")) == 4
    assert row[Row.ATTEMPTS] == "2000"
    check_invariants(queue)


def test_a_row_stays_the_same_size_over_thousands_of_failures(r: redis.Redis) -> None:
    queue = Queue("q", connection=r, history=3, max_attempts=1)
    queue.enqueue(A, TASK, job_id="one")
    sizes = []
    for cycle in range(1, 1001):
        claims = queue.claim(60_000, worker_id="w:1")
        assert claims is not None
        assert queue.retry("one", claims[0].token, f"failure {cycle:04d}") == "dead"
        if cycle in (10, 1000):
            sizes.append(row_size(r, queue, "one"))
        assert queue.retry_dead(["one"]) == 1
    assert sizes[0] == sizes[1]
    assert tries_size(r, queue, "one") <= 3 * TRY_BYTES
    row = queue.job("one")
    assert row is not None
    assert row[Row.ERRORS] == '["failure 0998","failure 0999","failure 1000"]'
    assert row[Row.ERRORS_TOTAL] == "1000"
    assert [t.rpartition("f")[2] for t in row[Row.TRIES].split(",")] == ["998", "999", "1000"]
    check_invariants(queue)


def test_the_history_kept_follows_the_setting(r: redis.Redis) -> None:
    queue = Queue("q", connection=r, history=1)
    queue.enqueue(A, TASK, job_id="one")
    for worker in ("w:1", "w:2"):
        claims = queue.claim(60_000, worker_id=worker)
        assert claims is not None
        queue.release("one", claims[0].token)
    claims = queue.claim(60_000, worker_id="w:3")
    assert claims is not None
    # one id per claim: the ones the row no longer keeps stand as "?"
    assert claims[0].worker_ids == ("?", "?", "w:3")


def test_a_results_attempts_count_every_claim_past_the_history(
    emq: redis.Redis, settings: Any
) -> None:
    settings.EMQ = {**settings.EMQ, "HISTORY": 2}
    queue = backend().queue("default")
    result = enqueue_for(A, add, 1, 2)
    for n in range(1, 6):
        claims = queue.claim(60_000, worker_id=f"w:{n}")
        assert claims is not None
        queue.release(result.id, claims[0].token)
    found = backend().get_result(result.id)
    assert found.attempts == 5
    assert found.worker_ids == ["?", "?", "?", "w:4", "w:5"]


def test_a_backend_may_keep_a_history_of_its_own(emq: redis.Redis, settings: Any) -> None:
    backend_path = "django_emq.backend.FairLanesBackend"
    settings.TASKS = {
        "default": {"BACKEND": backend_path, "QUEUES": ["default"]},
        "short": {"BACKEND": backend_path, "QUEUES": ["short"], "OPTIONS": {"HISTORY": 2}},
    }
    assert emq_settings("short").queue_options()["history"] == 2
    assert emq_settings("default").queue_options()["history"] == 10


OVER_BOUNDS: dict[str, tuple[Callable[[Queue], object], str]] = {
    "set_limit above MAX_CEILING": (
        lambda q: q.set_limit(A, MAX_CEILING + 1),
        f"ceiling must be at most {MAX_CEILING}",
    ),
    "set_limit 2**63": (lambda q: q.set_limit(A, 2**63), "ceiling must be at most"),
    "set_tenant_limit 10**18": (
        lambda q: q.set_tenant_limit(lane_id("ORG", 1), 10**18),
        "ceiling must be at most",
    ),
    "set_max_depth 2**63": (
        lambda q: q.set_max_depth(A, 2**63),
        f"max_depth must be at most {MAX_DEPTH_LIMIT}",
    ),
    "enqueue max_attempts 10**30": (
        lambda q: q.enqueue(A, TASK, max_attempts=10**30),
        f"max_attempts must be at most {MAX_ATTEMPTS_LIMIT}",
    ),
    "set_rate per inf": (lambda q: q.set_rate(A, 1, math.inf), "per_seconds must be from"),
    "set_rate per -inf": (lambda q: q.set_rate(A, 1, -math.inf), "per_seconds must be from"),
    "set_rate per 1e308": (lambda q: q.set_rate(A, 1, 1e308), "per_seconds must be from"),
    "set_rate per 10**400": (lambda q: q.set_rate(A, 1, 10**400), "per_seconds must be from"),
    "meta over MAX_PAYLOAD": (
        lambda q: q.enqueue(A, TASK, meta={"x": "y" * q.max_payload}),
        "job meta is 1048584 bytes as JSON, over the 1048576-byte limit",
    ),
}


@pytest.mark.parametrize("case", sorted(OVER_BOUNDS))
def test_a_value_past_its_documented_maximum_is_refused_before_anything(
    r: redis.Redis, queue: Queue, case: str
) -> None:
    """Every bound holds exactly in a Lua number (a double), and one past it is
    a ValueError that names it, never an OverflowError or a stored value."""
    queue.enqueue(A, TASK, job_id="there")
    call, message = OVER_BOUNDS[case]
    with nothing_written(r), pytest.raises(ValueError, match=re.escape(message)):
        call(queue)


def test_the_maximums_themselves_are_accepted(r: redis.Redis, queue: Queue) -> None:
    queue.set_limit(A, MAX_CEILING)
    queue.set_tenant_limit(lane_id("ORG", 1), MAX_CEILING)
    queue.set_max_depth(A, MAX_DEPTH_LIMIT)
    queue.enqueue(A, TASK, max_attempts=MAX_ATTEMPTS_LIMIT, meta={"x": "y" * 1000})
    assert queue.lane(A).ceiling == MAX_CEILING
    assert queue.lane(A).max_depth == MAX_DEPTH_LIMIT
    check_invariants(queue)


@pytest.mark.parametrize("option", ["max_attempts", "max_expiries"])
def test_a_queue_refuses_a_default_past_the_maximum(r: redis.Redis, option: str) -> None:
    options: dict[str, Any] = {option: MAX_ATTEMPTS_LIMIT + 1}
    with pytest.raises(ValueError, match=f"{option} must be at most {MAX_ATTEMPTS_LIMIT}"):
        Queue("q", connection=r, **options)
    with pytest.raises(ValueError, match=f"max_depth must be at most {MAX_DEPTH_LIMIT}"):
        Queue("q", connection=r, max_depth=MAX_DEPTH_LIMIT + 1)

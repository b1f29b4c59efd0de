"""Enqueueing: validation before any write, idempotency, batches, deferred jobs."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_emq.engine.queue import Queue
from django_emq.exceptions import EnqueueError, InvalidArguments

from .helpers import (
    LONG_LEASE,
    TASK,
    claim_one,
    counting_client,
    due_on_server,
    dump,
    fill,
    lane,
    pending,
    ring,
    wait_until,
)

BAD_LANES: list[Any] = [
    None,
    "",
    "usr0000000001a",
    "USR}x",
    "USR:1",
    "USR{q}0000000",
    "USR0000000001",  # one digit short
    "USR000000000001",  # one digit long
    "USR0000000000\n",
    "USR" + "0" * 10_000,
    "USRééééééééééé",
    "ÜSR00000000001",
    42,
    b"USR00000000001",
]

BAD_TASKS: list[Any] = [
    None,
    "",
    "noop",
    "tests..noop",
    "tests.noop.",
    ".tests.noop",
    "1tests.noop",
    "tests.no-op",
    "tests.noop()",
    "tests.nöop",
    "tests." + "a" * 600,
    42,
]


class _Opaque:
    pass


BAD_ARGUMENTS: list[tuple[Any, Any]] = [
    ([_Opaque()], None),
    ([{1, 2}], None),
    ([float("nan")], None),
    ([float("inf")], None),
    ([{1: "a"}], None),
    ([{(1, 2): "a"}], None),
    ([b"bytes"], None),
    ([], {1: "a"}),
    ([], {"x": float("nan")}),
    ([], {"x": {2: "b"}}),
    ([], {"x": datetime.now(UTC)}),
    ("abc", None),
    ({"a": 1}, None),
    ([], ["not", "a", "dict"]),
]


def _good(**overrides: Any) -> dict[str, Any]:
    return {"lane": lane(1), "task_path": TASK, "args": [1], **overrides}


# -- a job is written ----------------------------------------------------------


def test_enqueue_writes_a_pending_job_row(r: redis.Redis, queue: Queue) -> None:
    done = queue.enqueue(lane(1), TASK, [1, "two"], {"three": 3.0}, meta={"by": "me"})
    assert (done.state, done.duplicate) == ("pending", False)
    row = queue.job(done.job_id)
    assert row is not None
    assert {k: row[k] for k in ("state", "attempts", "fails", "group", "task", "max")} == {
        "state": "pending",
        "attempts": "0",
        "fails": "0",
        "group": lane(1),
        "task": TASK,
        "max": str(queue.max_attempts),
    }
    assert (row["args"], row["kwargs"], row["meta"]) == (
        '[1,"two"]',
        '{"three":3.0}',
        '{"by":"me"}',
    )
    assert pending(r, queue, lane(1)) == [done.job_id]
    assert ring(r, queue) == [lane(1)]
    assert queue.totals().pending == 1


def test_arguments_come_back_from_a_claim_as_json_gives_them(queue: Queue) -> None:
    args = [1, 2.5, "é", None, True, [1, (2, 3)], {"k": {"n": []}}]
    kwargs = {"a": [1], "b": {"c": None}}
    queue.enqueue(lane(1), TASK, tuple(args), kwargs)
    c = claim_one(queue)
    assert c.args == [1, 2.5, "é", None, True, [1, [2, 3]], {"k": {"n": []}}]
    assert c.kwargs == kwargs


def test_given_job_id_is_kept(queue: Queue) -> None:
    done = queue.enqueue(lane(1), TASK, job_id="order-42.confirm_email")
    assert done.job_id == "order-42.confirm_email"
    assert claim_one(queue).job_id == "order-42.confirm_email"


def test_duplicate_job_id_answers_duplicate_and_changes_nothing(
    r: redis.Redis, queue: Queue
) -> None:
    first = queue.enqueue(lane(1), TASK, [1], job_id="JOBonce")
    before = dump(r)
    again = queue.enqueue(lane(2), "other.task", [2], job_id="JOBonce")
    assert (again.job_id, again.state, again.duplicate) == ("JOBonce", "pending", True)
    assert first.duplicate is False
    assert dump(r) == before


def test_duplicate_of_a_claimed_job_answers_its_state(r: redis.Redis, queue: Queue) -> None:
    queue.enqueue(lane(1), TASK, job_id="JOBonce")
    claim_one(queue)
    before = dump(r)
    again = queue.enqueue(lane(1), TASK, job_id="JOBonce")
    assert (again.state, again.duplicate) == ("active", True)
    assert dump(r) == before


def test_duplicates_inside_enqueue_many_are_reported_per_job(r: redis.Redis, queue: Queue) -> None:
    queue.enqueue(lane(1), TASK, job_id="JOBa")
    done = queue.enqueue_many(
        [_good(job_id="JOBa"), _good(job_id="JOBb"), _good(job_id="JOBb", args=[9])]
    )
    assert [(d.job_id, d.duplicate) for d in done] == [
        ("JOBa", True),
        ("JOBb", False),
        ("JOBb", True),
    ]
    assert pending(r, queue, lane(1)) == ["JOBa", "JOBb"]


# -- batches -----------------------------------------------------------------


def test_enqueue_many_is_one_round_trip(r: redis.Redis) -> None:
    with counting_client(r) as (client, counter):
        q = Queue("q", connection=client)
        q.enqueue(lane(9), TASK)  # the server has the engine's library now
        fcall_before = _calls(r, "fcall")
        counter.sent = 0
        done = q.enqueue_many(_good(lane=lane(i % 7 + 1), args=[i]) for i in range(100))
        assert counter.sent == 1
    assert _calls(r, "fcall") - fcall_before == 100
    assert [d.duplicate for d in done] == [False] * 100
    assert len({d.job_id for d in done}) == 100
    assert Queue("q", connection=r).totals().pending == 101


def _calls(r: redis.Redis, command: str) -> int:
    stats: Any = r.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


def test_enqueue_many_keeps_the_order_inside_each_lane(r: redis.Redis, queue: Queue) -> None:
    done = queue.enqueue_many(_good(lane=lane(i % 2 + 1), args=[i]) for i in range(10))
    assert pending(r, queue, lane(1)) == [d.job_id for d in done[0::2]]
    assert pending(r, queue, lane(2)) == [d.job_id for d in done[1::2]]


def test_enqueue_many_of_nothing_writes_nothing(r: redis.Redis, queue: Queue) -> None:
    assert queue.enqueue_many([]) == []
    assert r.dbsize() == 0


@pytest.mark.parametrize(
    "bad",
    [
        {"lane": "USR:1"},
        {"lane": None},
        {"task_path": "noop"},
        {"args": [object()]},
        {"kwargs": {1: "a"}},
        {"job_id": "bad id"},
        {"max_attempts": 0},
        {"run_after": datetime(2030, 1, 1)},
    ],
    ids=lambda bad: next(iter(bad)),
)
def test_one_bad_job_refuses_the_whole_batch(
    r: redis.Redis, queue: Queue, bad: dict[str, Any]
) -> None:
    jobs = [_good(args=[i]) for i in range(5)] + [_good(**bad)] + [_good(args=[9])]
    with pytest.raises(
        ValueError, match=r"lane id|task path|JSON|argument|job id|max_attempts|run_after"
    ):
        queue.enqueue_many(jobs)
    assert r.dbsize() == 0


# -- refusals ------------------------------------------------------------------


@pytest.mark.parametrize("bad", BAD_LANES, ids=repr)
def test_enqueue_without_a_valid_lane_is_refused(r: redis.Redis, queue: Queue, bad: Any) -> None:
    with pytest.raises(ValueError, match="lane id"):
        queue.enqueue(bad, TASK)
    assert r.dbsize() == 0


@pytest.mark.parametrize("bad", BAD_TASKS, ids=repr)
def test_bad_task_path_is_refused(r: redis.Redis, queue: Queue, bad: Any) -> None:
    with pytest.raises(ValueError, match="task path"):
        queue.enqueue(lane(1), bad)
    assert r.dbsize() == 0


@pytest.mark.parametrize(("args", "kwargs"), BAD_ARGUMENTS, ids=repr)
def test_arguments_that_do_not_survive_json_are_refused(
    r: redis.Redis, queue: Queue, args: Any, kwargs: Any
) -> None:
    with pytest.raises(InvalidArguments):
        queue.enqueue(lane(1), TASK, args, kwargs)
    assert r.dbsize() == 0


def test_circular_or_very_deep_arguments_are_refused_writing_nothing(
    r: redis.Redis, queue: Queue
) -> None:
    loop: list[Any] = []
    loop.append(loop)
    deep: list[Any] = []
    inner = deep
    for _ in range(100_000):
        inner.append([])
        inner = inner[0]
    for args, kwargs in [([loop], None), ([], {"x": loop}), ([deep], None), ([], {"x": deep})]:
        with pytest.raises(InvalidArguments, match="task arguments"):
            queue.enqueue(lane(1), TASK, args, kwargs)
    assert r.dbsize() == 0


def test_meta_json_cannot_hold_is_refused_as_meta(r: redis.Redis, queue: Queue) -> None:
    loop: dict[str, Any] = {}
    loop["me"] = loop
    metas: list[dict[str, Any]] = [{"x": object()}, {"x": float("nan")}, loop]
    for meta in metas:
        with pytest.raises(InvalidArguments, match=r"^job meta ") as refused:
            queue.enqueue(lane(1), TASK, meta=meta)
        assert "return value" not in str(refused.value)
    assert r.dbsize() == 0


@pytest.mark.parametrize("bad", ["", "bad id", "-x", "a/b", "x" * 129, "JOB{q}", 7])
def test_bad_job_id_is_refused(r: redis.Redis, queue: Queue, bad: Any) -> None:
    with pytest.raises(ValueError, match="job id"):
        queue.enqueue(lane(1), TASK, job_id=bad)
    assert r.dbsize() == 0


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_bad_max_attempts_is_refused(r: redis.Redis, queue: Queue, bad: Any) -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        queue.enqueue(lane(1), TASK, max_attempts=bad)
    assert r.dbsize() == 0


def test_payload_over_max_payload_is_refused(r: redis.Redis) -> None:
    q = Queue("q", connection=r, max_payload=100)
    with pytest.raises(InvalidArguments, match="100-byte limit"):
        q.enqueue(lane(1), TASK, ["x" * 100])
    with pytest.raises(InvalidArguments, match="100-byte limit"):
        q.enqueue(lane(1), TASK, [], {"k": "é" * 50})
    assert r.dbsize() == 0


def test_payload_at_max_payload_is_accepted(r: redis.Redis) -> None:
    q = Queue("q", connection=r, max_payload=100)
    # ["<94 x>"] is 98 bytes, {} is 2 more: exactly 100.
    assert q.enqueue(lane(1), TASK, ["x" * 94]).state == "pending"


def test_naive_run_after_is_refused(r: redis.Redis, queue: Queue) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        queue.enqueue(lane(1), TASK, run_after=datetime.now() + timedelta(minutes=1))
    assert r.dbsize() == 0


def test_run_after_more_than_a_day_in_the_past_is_refused(r: redis.Redis, queue: Queue) -> None:
    with pytest.raises(ValueError, match="more than a day in the past"):
        queue.enqueue(lane(1), TASK, run_after=datetime.now(UTC) - timedelta(days=1, minutes=1))
    assert r.dbsize() == 0


def test_run_after_that_is_not_a_datetime_is_refused(r: redis.Redis, queue: Queue) -> None:
    with pytest.raises(ValueError, match="datetime"):
        queue.enqueue(lane(1), TASK, run_after=1_700_000_000)  # type: ignore[arg-type]
    assert r.dbsize() == 0


def test_run_after_in_the_recent_past_is_pending_now(r: redis.Redis, queue: Queue) -> None:
    done = queue.enqueue(lane(1), TASK, run_after=datetime.now(UTC) - timedelta(hours=1))
    assert done.state == "pending"
    assert ring(r, queue) == [lane(1)]


def test_future_run_after_makes_the_job_scheduled(r: redis.Redis, queue: Queue) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    done = queue.enqueue(lane(1), TASK, run_after=later)
    assert done.state == "scheduled"
    due = int(later.timestamp() * 1000)
    assert r.zscore(queue.keys.schedule, done.job_id) == due
    assert queue.depth(lane(1)) == 0
    assert ring(r, queue) == []
    assert queue.claim(LONG_LEASE) is None
    assert queue.promote() == (0, due)
    assert queue.totals().scheduled == 1


def test_promote_moves_a_due_scheduled_job_into_its_lane(r: redis.Redis, queue: Queue) -> None:
    soon, _ = due_on_server(r)
    done = queue.enqueue(lane(1), TASK, ["deferred"], run_after=soon)
    wait_until(lambda: queue.promote()[0] == 1)
    assert pending(r, queue, lane(1)) == [done.job_id]
    assert ring(r, queue) == [lane(1)]
    assert queue.promote() == (0, None)
    c = claim_one(queue)
    assert (c.job_id, c.args) == (done.job_id, ["deferred"])


def test_promoted_job_keeps_its_mint_place(r: redis.Redis, queue: Queue) -> None:
    soon, _ = due_on_server(r)
    deferred = queue.enqueue(lane(1), TASK, run_after=soon)
    later = fill(queue, lane(1), 2)
    wait_until(lambda: queue.promote()[0] == 1)
    assert pending(r, queue, lane(1)) == [deferred.job_id, *later]


def test_promote_into_a_paused_lane_keeps_it_off_the_ring(r: redis.Redis, queue: Queue) -> None:
    queue.pause(lane(1))
    soon, _ = due_on_server(r)
    queue.enqueue(lane(1), TASK, run_after=soon)
    wait_until(lambda: queue.promote()[0] == 1)
    assert queue.depth(lane(1)) == 1
    assert ring(r, queue) == []


# -- the server ------------------------------------------------------------------


def test_scripts_survive_script_flush(r: redis.Redis, queue: Queue) -> None:
    fill(queue, lane(1), 2)
    claim_one(queue)
    r.script_flush()
    c = claim_one(queue)
    queue.complete(c.job_id, c.token)
    r.script_flush()
    assert queue.enqueue(lane(2), TASK).state == "pending"
    r.script_flush()
    assert len(fill(queue, lane(3), 3)) == 3
    assert queue.depth(lane(3)) == 3


def test_enqueue_many_right_after_script_flush_admits_every_job_once(
    r: redis.Redis, queue: Queue
) -> None:
    fill(queue, lane(1), 1)
    r.script_flush()
    done = queue.enqueue_many(_good(args=[i]) for i in range(5))
    assert [d.duplicate for d in done] == [False] * 5
    assert pending(r, queue, lane(1))[1:] == [d.job_id for d in done]


def test_enqueue_raises_enqueue_error_when_the_server_is_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = redis.Redis(host="127.0.0.1", port=port, retry=Retry(NoBackoff(), 0))
    q = Queue("q", connection=client)
    with pytest.raises(EnqueueError, match="could not reach Valkey"):
        q.enqueue(lane(1), TASK)
    with pytest.raises(EnqueueError, match="could not reach Valkey"):
        q.enqueue_many([_good()])

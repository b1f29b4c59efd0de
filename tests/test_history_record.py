"""The history off the hot path: the claim and complete scripts write none;
what the console and metrics read (waits, finished jobs, per-minute counts)
is gathered from their replies and sent in one ``record_history`` call, at
once by the Python API and every ``RECORD_EVERY`` seconds (and at its stop)
by a worker. A wait starts when a job becomes due, so a job deferred with
``run_after`` does not count its deferral."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
import redis
import redis.asyncio as aredis
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone

from django_emq import enqueue_for
from django_emq.admin.display import short_duration
from django_emq.admin.job_detail import job_facts
from django_emq.engine import history, ops
from django_emq.engine.payload import text
from django_emq.engine.queue import Queue
from django_emq.engine.records import encode_outcomes
from django_emq.engine.rows import filled
from django_emq.engine.runner import AsyncRunner
from django_emq.engine.tally import MOST_PER_CALL, Tally, record_calls, record_history, wait_bucket
from django_emq.worker.recorder import Recorder
from django_emq.worker.shard import Shard
from tests import tasks

from .helpers import LONG_LEASE, claim_one, fill, lane
from .invariants import check_invariants

A, B = lane(1), lane(2)


def history_written(r: redis.Redis, queue: Queue) -> list[str]:
    """What the history holds besides the enqueues' counts (the enqueue script
    counts its own): the keys of lanes' waits and the finished window, and the
    minutes' fields."""
    keys = [text(k) for k in r.keys(queue.keys.prefix + "*")]
    found = [k for k in keys if k.startswith((queue.keys.prefix + "lw:", queue.keys.finished))]
    for minute in (k for k in keys if k.startswith(queue.keys.prefix + "m:")):
        found += [text(f) for f in r.hkeys(minute) if text(f) != "enq"]
    return found


def scripts_run(r: redis.Redis) -> int:
    """Scripts run since the last ``CONFIG RESETSTAT``."""
    stats: dict[str, dict[str, Any]] = r.info("commandstats")
    return sum(  # by FCALL (the Function library) or EVALSHA (no Functions)
        int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("fcall", "evalsha")
    )


def test_the_claim_and_complete_scripts_write_no_history(r: redis.Redis, queue: Queue) -> None:
    fill(queue, A, 2)
    (first,) = queue.runner.run(ops.claim(queue, LONG_LEASE, 1, "w:1", 1))
    outcomes = encode_outcomes([(first.job_id, first.token, None)])
    claims, refused = queue.runner.run(ops.complete_claim(queue, outcomes, LONG_LEASE, 1, "w:1", 1))
    assert len(claims) == 1
    assert refused == [None]
    assert history_written(r, queue) == [], "the per-job scripts leave the history to the caller"


def test_the_api_records_each_claim_and_completion_at_once(r: redis.Redis, queue: Queue) -> None:
    """The API's claims and completions are in the history as soon as they
    return: the console shows them as it shows a worker's."""
    fill(queue, A, 2)
    fill(queue, B, 1)
    claims = [claim_one(queue) for _ in range(3)]
    assert sum(sum(h.values()) for h in history.lane_waits(queue, [A, B]).values()) == 3
    queue.complete(claims[0].job_id, claims[0].token)
    queue.complete_many([(c.job_id, c.token, None) for c in claims[1:]])
    (minute,) = history.series(queue, step_minutes=1, count=1)
    assert (minute.count("done"), sum(minute.waits.values())) == (3, 3)
    assert int(r.zcard(queue.keys.finished)) == 3
    check_invariants(queue)


def test_a_second_attempt_counts_no_second_wait(queue: Queue) -> None:
    """Only a job's first start waits: a release, a retry, a reaped lease
    claim it again under a later attempt number."""
    fill(queue, A, 1)
    first = claim_one(queue)
    queue.release(first.job_id, first.token)
    again = claim_one(queue)
    queue.retry(again.job_id, again.token, "boom")
    claim_one(queue)
    (minute,) = history.series(queue, step_minutes=1, count=1)
    assert sum(minute.waits.values()) == 1
    assert sum(history.lane_waits(queue, [A])[A].values()) == 1


def test_a_worker_sends_its_history_in_one_call_per_round(r: redis.Redis, queue: Queue) -> None:
    """A worker's shard gathers the waits and finished jobs of its claims and
    completions; one record call sends them all, added up."""
    for n in range(1, 21):
        fill(queue, lane(n), 2)
    kwargs = r.connection_pool.connection_kwargs

    async def work() -> None:
        client = aredis.Redis(host=kwargs["host"], port=kwargs["port"])
        shard = Shard(queue, AsyncRunner(client))
        try:
            claims, _ = await shard.claim(16, LONG_LEASE, "w:1")
            for _ in range(3):
                outcomes = [(c.job_id, c.token, b"null") for c in claims]
                claims, refused = await shard.claim(8, LONG_LEASE, "w:1", outcomes)
                assert not any(refused)
            assert history_written(r, queue) == [], "nothing is sent before the round"
            r.config_resetstat()
            await Recorder([shard]).record()
            assert scripts_run(r) == 1
            await Recorder([shard]).record()
            assert scripts_run(r) == 1, "an empty tally sends nothing"
        finally:
            await client.aclose()

    asyncio.run(work())
    (minute,) = history.series(queue, step_minutes=1, count=1)
    assert (minute.count("done"), sum(minute.waits.values())) == (16 + 8 + 8, 16 + 3 * 8)
    assert int(r.zcard(queue.keys.finished)) == 32
    check_invariants(queue)


def test_a_tally_larger_than_one_call_is_sent_in_several() -> None:
    queue = Queue("q", connection=redis.Redis())  # never connects: builds calls only
    tally = Tally()
    tally.completed(f"J{i}" for i in range(MOST_PER_CALL + 1))
    built = record_calls(queue.keys, tally)
    assert len(built) == 2
    assert [c.args[1] for c in built] == [MOST_PER_CALL, 1]
    assert record_calls(queue.keys, Tally()) == []
    assert built[0] == record_history(queue.keys, tally.finished[:MOST_PER_CALL], [], [], [])


@pytest.mark.django_db
def test_a_deferred_jobs_wait_starts_when_it_becomes_due(emq: redis.Redis) -> None:
    """A job deferred 1.5 seconds (``run_after``) run by a real worker: its wait
    counts from its due time, not from its enqueue, in the minute histogram and
    in its lane's; the worker's last round is sent when it stops."""
    user = User.objects.create_user("ada")
    run_after = timezone.now() + timedelta(seconds=1.5)
    result = enqueue_for(user, tasks.record.using(run_after=run_after), "late")
    queue = Queue("default", connection=emq)
    row = {text(k): text(v) for k, v in emq.hgetall(queue.keys.job(result.id)).items()}
    enqueued, due = int(row["enq"]), int(row["due"])
    assert due > enqueued
    while int(emq.time()[0]) * 1000 + int(emq.time()[1]) // 1000 <= due:
        asyncio.run(asyncio.sleep(0.02))
    call_command("run_emq_worker", "--burst", "--lease", "5", verbosity=0)
    # a first attempt's start is its claim: the row writes no `started` for it
    # (docs/engine.md, attempt times on the row)
    started = int(emq.hget(queue.keys.job(result.id), "claimed") or 0)
    waited = wait_bucket(started - due)
    assert waited != wait_bucket(started - enqueued), "the two waits fall in different buckets"
    assert [text(k) for k in emq.zrange(queue.keys.finished, 0, -1)] == [result.id]
    lanes = history.lane_waits(queue, [row["group"]])
    assert lanes[row["group"]] == {waited: 1}
    (minute,) = history.series(queue, step_minutes=1, count=1, now_ms=started)
    assert minute.waits == {waited: 1}
    assert emq.zcard(queue.keys.due_at) == 0, "the due time is read once, then forgotten"
    # the job page says the same: it waited from its due time
    done = filled({text(k): text(v) for k, v in emq.hgetall(queue.keys.job(result.id)).items()})
    assert int(done["due"]) == due
    assert job_facts(done, started)["waited"] == short_duration(started - due)


def recorded_now(queue: Queue, built: Any) -> int:
    """Run one record call; its answer (first starts that waited from their due time)."""
    (moved,) = queue.runner.run_many([ops.Op(built, int)])
    assert not isinstance(moved, Exception), moved
    return int(moved)


def test_lane_waits_add_up_one_read_and_one_write_per_hour(r: redis.Redis, queue: Queue) -> None:
    """A call's lane counts, once and more than once, add to what the hour
    holds; the hour's fields are read by one HMGET and written by one HSET,
    however many lanes (with many lanes a round holds each about once)."""
    hour = 480_000
    key = queue.keys.lane_waits(hour)
    r.hset(key, f"{A}:4", 5)
    counts = [((hour, f"{A}:4"), 3), ((hour, f"{A}:6"), 1)]
    counts += [((hour, f"{lane(n)}:2"), 1) for n in range(3, 103)]
    r.config_resetstat()
    assert recorded_now(queue, record_history(queue.keys, [], [], counts, [])) == 0
    stats: dict[str, dict[str, Any]] = r.info("commandstats")
    assert (stats["cmdstat_hmget"]["calls"], stats["cmdstat_hset"]["calls"]) == (1, 1)
    assert "cmdstat_hincrby" not in stats
    held = {text(k): int(v) for k, v in r.hgetall(key).items()}
    assert held == {f"{A}:4": 8, f"{A}:6": 1} | {f"{lane(n)}:2": 1 for n in range(3, 103)}
    assert 0 < r.pttl(key) <= 2 * 3600 * 1000


def test_a_hand_edited_lane_wait_drops_its_count_and_fails_nothing(
    r: redis.Redis, queue: Queue
) -> None:
    """A lane wait field that holds no whole number keeps what it holds (the
    doctor reports it) and its count is dropped, the other fields' land; an
    hour's key of another type fails nothing either: the minute's counts and
    the finished window still land."""
    hour = 480_000
    key = queue.keys.lane_waits(hour)
    r.hset(key, mapping={f"{A}:4": "x", f"{A}:5": "1.5"})
    counts = [((hour, f"{A}:4"), 2), ((hour, f"{A}:5"), 1), ((hour, f"{B}:4"), 1)]
    assert recorded_now(queue, record_history(queue.keys, [], [], counts, [])) == 0
    held = {text(k): text(v) for k, v in r.hgetall(key).items()}
    assert held == {f"{A}:4": "x", f"{A}:5": "1.5", f"{B}:4": "1"}
    r.delete(key)
    r.set(key, "not a hash")
    waits = [((hour * 60, 4), 1)]
    built = record_history(queue.keys, ["J1"], waits, counts, [])
    assert recorded_now(queue, built) == 0
    assert text(r.get(key)) == "not a hash"
    assert r.hget(queue.keys.minute(hour * 60), "w4") == b"1"
    assert [text(m) for m in r.zrange(queue.keys.finished, 0, -1)] == ["J1"]


def test_only_deferred_first_starts_move_to_their_due_times_bucket(
    r: redis.Redis, queue: Queue
) -> None:
    """The first starts travel in one argument; when the queue holds promoted
    jobs waiting for their first start, those among them are found, their
    counts moved to the bucket of their wait from their due time, and their
    entries leave the due set (the others' stay)."""
    hour, start = 480_000, 480_000 * 3_600_000 + 5_000
    minute = start // 60_000
    firsts = [("J1", A, start, 30), ("J2", B, start, 30), ("J3", A, start, 30)]
    r.zadd(queue.keys.due_at, {"J1": start - 100, "J3": start, "J9": 1})
    waits = [((minute, 30), 3)]
    counts = [((hour, f"{A}:30"), 2), ((hour, f"{B}:30"), 1)]
    assert recorded_now(queue, record_history(queue.keys, [], waits, counts, firsts)) == 2
    assert {text(k): int(v) for k, v in r.hgetall(queue.keys.minute(minute)).items()} == {
        "w30": 1,
        f"w{wait_bucket(100)}": 1,
        "w0": 1,
    }
    assert {text(k): int(v) for k, v in r.hgetall(queue.keys.lane_waits(hour)).items()} == {
        f"{B}:30": 1,
        f"{A}:{wait_bucket(100)}": 1,
        f"{A}:0": 1,
    }
    assert [text(m) for m in r.zrange(queue.keys.due_at, 0, -1)] == ["J9"]

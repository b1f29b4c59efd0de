"""Sharded queues on the single test server: shards are queues with their own
hash tag, so everything but placement on nodes can be checked here (the
cluster itself is exercised in tests/test_cluster.py)."""

from __future__ import annotations

import zlib
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from django.core.checks import run_checks
from django.tasks import task_backends
from django.test import Client
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_emq import conf, get_queue
from django_emq.backend import FairLanesBackend
from django_emq.engine import browse
from django_emq.engine.ids import lane_id
from django_emq.engine.placement import (
    MAX_SHARDS,
    job_id_on,
    job_shard,
    lane_shard,
    shard_tags,
    slot_range,
)
from django_emq.engine.queue import Queue
from django_emq.engine.records import ClaimRequest
from django_emq.engine.rotation import Rotation
from django_emq.engine.rows import parse_heartbeat
from django_emq.engine.runner import SyncRunner
from django_emq.engine.shards import (
    ShardedQueue,
    claim_in_turn,
    home_of,
    open_queue,
    shards_of,
)
from django_emq.exceptions import InvalidArguments, JobNotFound, StaleToken
from tests import tasks
from tests.helpers import free_port

from .helpers import LONG_LEASE, TASK, dump, plain, sleep_past
from .invariants import check_invariants

S = 3


def lanes_on(shard: int, count: int, start: int = 1) -> list[str]:
    """``count`` lanes (user ids from ``start`` up) that ride shard ``shard`` of ``S``."""
    found: list[str] = []
    pk = start
    while len(found) < count:
        lane = lane_id("USR", pk)
        if lane_shard(lane, S) == shard:
            found.append(lane)
        pk += 1
    return found


@pytest.fixture
def sq(r: redis.Redis) -> ShardedQueue:
    return ShardedQueue("q", S, connection=r)


def fill(queue: ShardedQueue, lane: str, n: int) -> list[str]:
    done = queue.enqueue_many({"lane": lane, "task_path": TASK, "args": [i]} for i in range(n))
    return [e.job_id for e in done]


def check_every_shard(queue: ShardedQueue) -> None:
    for shard in queue.shards:
        check_invariants(shard)


# -- placement -------------------------------------------------------------------


@pytest.mark.parametrize("count", [2, 3, 4, 6, 16])
@pytest.mark.parametrize("name", ["default", "q", "emails", "reports.daily"])
def test_each_shard_takes_its_own_range_of_slots(name: str, count: int) -> None:
    tags = shard_tags(name, count)
    assert len(tags) == count
    assert sorted(slot_range(tag, count) for tag in tags) == list(range(count))
    for k, tag in enumerate(tags):
        assert tag == f"{name}.{k}" or tag.startswith(f"{name}.{k}-")


def test_shard_names_are_plain_where_they_can_be() -> None:
    assert shard_tags("default", 3) == ("default.0", "default.1", "default.2")
    assert shard_tags("q", 3) == ("q.0", "q.1-1", "q.2")


def test_shard_counts_out_of_range_are_refused() -> None:
    for bad in (0, MAX_SHARDS + 1, True):
        with pytest.raises(ValueError, match="shards"):
            shard_tags("default", bad)
    with pytest.raises(ValueError, match="is not a queue name"):
        shard_tags("x" * 64, 2)


def test_a_lane_rides_the_shard_its_crc32_names() -> None:
    lane = lane_id("USR", 42)
    assert lane_shard(lane, 3) == zlib.crc32(lane.encode()) % 3
    assert lane_shard(lane, 3) == 2  # the same on every machine, in every process


def test_lanes_spread_over_the_shards() -> None:
    counts = Counter(lane_shard(lane_id("USR", pk), S) for pk in range(1, 1001))
    assert counts == {0: 338, 1: 326, 2: 336}


def test_a_job_id_carries_its_shard() -> None:
    assert job_id_on("JOB0abc", 2) == "JOB0abc.s2"
    assert job_id_on("JOB0abc.s2", 2) == "JOB0abc.s2"  # marking is idempotent
    assert job_id_on("order.s2", 1) == "order.s2.s1"
    assert job_shard("JOB0abc.s2", 3) == 2
    assert job_shard("order.s2.s1", 3) == 1
    for unmarked in ("JOB0abc", "x.s3", "x.s01", "x.s", "x.2"):
        assert job_shard(unmarked, 3) is None
    with pytest.raises(ValueError, match="is not a job id"):
        job_id_on("x" * 127, 1)


# -- enqueue ---------------------------------------------------------------------


def test_a_job_is_written_to_its_lanes_shard_only(sq: ShardedQueue, r: redis.Redis) -> None:
    lane = lanes_on(1, 1)[0]
    enqueued = sq.enqueue(lane, TASK, [1])
    assert enqueued.job_id.endswith(".s1")
    assert enqueued.state == "pending"
    assert {key.split("}")[0] for key in dump(r)} == {"emq:{" + sq.shards[1].name}
    assert sq.shards[1].depth(lane) == 1
    assert sq.depth(lane) == 1
    check_every_shard(sq)


def test_a_given_job_id_is_marked_and_stays_idempotent(sq: ShardedQueue) -> None:
    lane = lanes_on(2, 1)[0]
    first = sq.enqueue(lane, TASK, job_id="order-7")
    again = sq.enqueue(lane, TASK, job_id="order-7")
    with_mark = sq.enqueue(lane, TASK, job_id=first.job_id)
    assert first.job_id == again.job_id == with_mark.job_id == "order-7.s2"
    assert (first.duplicate, again.duplicate, with_mark.duplicate) == (False, True, True)
    assert sq.totals().pending == 1


def test_enqueue_many_answers_in_order_across_shards(sq: ShardedQueue) -> None:
    lanes = [lanes_on(k, 2)[i] for i in range(2) for k in range(S)]
    jobs = [{"lane": lane, "task_path": TASK, "args": [i]} for i, lane in enumerate(lanes)]
    done = sq.enqueue_many(jobs)
    assert [job_shard(e.job_id, S) for e in done] == [lane_shard(lane, S) for lane in lanes]
    for e, lane in zip(done, lanes, strict=True):
        row = sq.job(e.job_id)
        assert row is not None
        assert row["group"] == lane
    assert sq.totals().pending == len(lanes)
    check_every_shard(sq)


def test_enqueue_many_repeats_of_one_id_answer_each(sq: ShardedQueue) -> None:
    lane = lanes_on(0, 1)[0]
    done = sq.enqueue_many([{"lane": lane, "task_path": TASK, "job_id": "same"}] * 2)
    assert [(e.job_id, e.duplicate) for e in done] == [("same.s0", False), ("same.s0", True)]


def test_one_bad_job_refuses_the_whole_batch_on_every_shard(
    sq: ShardedQueue, r: redis.Redis
) -> None:
    good = [{"lane": lane, "task_path": TASK} for lane in lanes_on(0, 3)]
    bad = {"lane": lanes_on(2, 1)[0], "task_path": TASK, "args": [float("nan")]}
    with pytest.raises(ValueError, match="JSON"):
        sq.enqueue_many([*good, bad])
    with pytest.raises(ValueError, match="is not a lane id"):
        sq.enqueue_many([*good, {"lane": "nobody", "task_path": TASK}])
    assert dump(r) == {}


# -- claims, in turn across the shards -----------------------------------------------


def test_claims_take_the_shards_in_turn(sq: ShardedQueue) -> None:
    for k in range(S):
        for lane in lanes_on(k, 2):
            fill(sq, lane, 2)
    served = []
    for _ in range(9):
        found = sq.claim_shard(ClaimRequest(LONG_LEASE))
        assert found is not None
        shard, claims = found
        served.append(sq.shards.index(shard))
        assert all(job_shard(c.job_id, S) == served[-1] for c in claims)
    assert served == [0, 1, 2] * 3


def test_an_empty_shard_is_passed_over_at_once(sq: ShardedQueue) -> None:
    for lane in lanes_on(0, 1) + lanes_on(2, 1):
        fill(sq, lane, 3)
    served = []
    while (found := sq.claim_shard(ClaimRequest(LONG_LEASE))) is not None:
        served.append(sq.shards.index(found[0]))
    assert served == [0, 2, 0, 2, 0, 2]
    assert sq.claim(LONG_LEASE) is None


def test_claims_serve_every_lane_once_per_turn_within_each_shard(sq: ShardedQueue) -> None:
    lanes = [lane_id("USR", pk) for pk in range(1, 31)]
    for lane in lanes:
        fill(sq, lane, 4)
    counts: Counter[str] = Counter()
    for _ in range(30):
        claims = sq.claim(LONG_LEASE)
        assert claims is not None
        counts.update(c.lane for c in claims)
    per_shard = Counter(lane_shard(lane, S) for lane in lanes)
    for lane in lanes:  # each shard took 10 turns over its own lanes
        turns, share = 10, per_shard[lane_shard(lane, S)]
        assert turns // share <= counts[lane] <= -(-turns // share)


def test_the_whole_life_of_a_job_goes_to_its_shard(sq: ShardedQueue) -> None:
    lanes = [lanes_on(k, 1)[0] for k in range(S)]
    for lane in lanes:
        fill(sq, lane, 3)
    outcomes = []
    for _ in range(S):
        claims = sq.claim(LONG_LEASE)
        assert claims is not None
        outcomes += claims
    done, failed, freed = outcomes
    assert sq.extend(done.job_id, done.token, LONG_LEASE) > 0
    sq.complete(done.job_id, done.token, {"ok": 1})
    assert sq.retry(failed.job_id, failed.token, "boom", 0) == "pending"
    sq.release(freed.job_id, freed.token)
    with pytest.raises(StaleToken):
        sq.complete(freed.job_id, freed.token)
    row = sq.job(done.job_id)
    assert row is not None
    assert row["state"] == "done"
    dead = sq.claim(LONG_LEASE)
    assert dead is not None
    sq.fail(dead[0].job_id, dead[0].token, "no")
    assert sq.totals().dead == 1
    check_every_shard(sq)


def test_complete_many_records_across_shards_in_order(sq: ShardedQueue, r: redis.Redis) -> None:
    lanes = [lanes_on(k, 1)[0] for k in range(S)]
    for lane in lanes:
        fill(sq, lane, 2)
    claims = []
    for _ in range(2 * S):
        claimed = sq.claim(LONG_LEASE)
        assert claimed is not None
        claims += claimed
    stale = claims[0]
    sq.release(stale.job_id, stale.token)
    outcomes: list[tuple[str, int, Any]] = [(c.job_id, c.token, i) for i, c in enumerate(claims)]
    outcomes.append(("JOB0000", 1, None))  # names no shard
    before = dump(r)
    with pytest.raises(InvalidArguments):  # bad input on the last shard: nothing sent
        sq.complete_many([*outcomes[1:], (claims[-1].job_id, claims[-1].token, float("nan"))])
    assert dump(r) == before
    answers = sq.complete_many(outcomes)
    assert isinstance(answers[0], StaleToken)
    assert answers[1 : 2 * S] == [None] * (2 * S - 1)
    assert isinstance(answers[-1], JobNotFound)
    for i, c in enumerate(claims[1:], start=1):
        row = sq.job(c.job_id)
        assert row is not None
        assert (row["state"], row["result"]) == ("done", str(i))
    check_every_shard(sq)


def test_a_job_id_that_names_no_shard_is_not_found(sq: ShardedQueue) -> None:
    with pytest.raises(JobNotFound, match="names no shard"):
        sq.complete("JOB0000", 1)
    with pytest.raises(JobNotFound):
        sq.extend("JOB0000.s7", 1, LONG_LEASE)
    assert sq.job("JOB0000") is None
    assert sq.job("JOB0000.s1") is None


def test_reap_and_promote_cover_every_shard(sq: ShardedQueue, r: redis.Redis) -> None:
    lanes = [lanes_on(k, 1)[0] for k in range(S)]
    for lane in lanes:
        fill(sq, lane, 1)
    claimed = [c for _ in range(S) for c in sq.claim(1) or []]
    assert len(claimed) == S
    sleep_past(r, max(c.deadline_ms for c in claimed))
    assert sorted(sq.reap()) == sorted(c.job_id for c in claimed)
    assert sq.totals().pending == S
    later = [datetime.now(UTC) + timedelta(minutes=m) for m in (3, 1, 2)]
    for lane, when in zip(lanes, later, strict=True):
        sq.enqueue(lane, TASK, run_after=when)
    promoted, next_due = sq.promote()
    assert promoted == 0
    assert next_due == int(min(later).timestamp() * 1000)
    assert sq.totals().scheduled == S
    check_every_shard(sq)


# -- lanes and dead jobs ---------------------------------------------------------------


def test_lane_controls_go_to_the_lanes_shard(sq: ShardedQueue) -> None:
    lane = lanes_on(1, 1)[0]
    fill(sq, lane, 5)
    home = sq.shards[1]
    assert sq.pause(lane)
    assert home.lane(lane).paused
    assert sq.resume(lane)
    sq.set_limit(lane, 2)
    sq.set_weight(lane, 3)
    info = sq.lane(lane)
    assert (info.ceiling, info.weight, info.depth) == (2, 3, 5)
    claims = sq.claim(LONG_LEASE)
    assert claims is not None
    assert len(claims) == 2  # weight 3, but the ceiling holds it to 2
    assert sq.drain(lane) == 3
    assert home.depth(lane) == 0
    check_every_shard(sq)


def test_a_move_stays_within_one_shard(sq: ShardedQueue) -> None:
    here, there = lanes_on(0, 2)
    elsewhere = lanes_on(1, 1)[0]
    job = fill(sq, here, 1)[0]
    assert sq.move(job, there)
    with pytest.raises(ValueError, match="another shard"):
        sq.move(job, elsewhere)
    assert sq.depth(there) == 1
    check_every_shard(sq)


def test_dead_jobs_are_retried_and_deleted_by_lane_or_by_id(sq: ShardedQueue) -> None:
    lanes = [lanes_on(k, 1)[0] for k in range(S)]
    for lane in lanes:
        fill(sq, lane, 2)
    dead = []
    while (claims := sq.claim(LONG_LEASE)) is not None:
        for c in claims:
            sq.fail(c.job_id, c.token, "no")
            dead.append(c)
    assert sq.totals().dead == 6
    first = [c.job_id for c in dead if c.lane == lanes[0]]
    assert sq.retry_dead([*first, dead[-1].job_id], lane=lanes[0]) == 2  # others' ids skipped
    assert sq.retry_dead([c.job_id for c in dead if c.lane == lanes[1]]) == 2
    assert sq.delete_dead(lane=lanes[2]) == 2
    assert sq.delete_dead(["JOB0unmarked"]) == 0
    with pytest.raises(ValueError, match="name the dead jobs"):
        sq.retry_dead()
    totals = sq.totals()
    assert (totals.dead, totals.pending) == (0, 4)
    check_every_shard(sq)


def test_totals_add_up_the_shards(sq: ShardedQueue) -> None:
    for k in range(S):
        for lane in lanes_on(k, k + 1):
            fill(sq, lane, 2)
    sq.claim(LONG_LEASE)
    totals = sq.totals()
    parts = [shard.totals() for shard in sq.shards]
    assert totals.pending == sum(p.pending for p in parts) == 11
    assert totals.active == 1
    assert totals.lanes == 6
    assert totals.ring == sum(p.ring for p in parts)


def test_the_deepest_lanes_are_merged_across_shards_page_by_page(sq: ShardedQueue) -> None:
    lanes = [lane_id("USR", pk) for pk in range(1, 41)]
    for i, lane in enumerate(lanes):
        fill(sq, lane, 1 + i % 7)
    expected = sorted(((1 + i % 7, lane) for i, lane in enumerate(lanes)), reverse=True)
    whole = [(info.depth, info.lane) for info in sq.lanes(top=100)]
    assert whole == expected
    pages = [info.lane for offset in range(0, 40, 15) for info in sq.lanes(15, offset)]
    assert pages == [lane for _, lane in expected]
    with pytest.raises(ValueError, match="top"):
        sq.lanes(top=0)


def test_lanes_named_answers_in_the_order_asked(sq: ShardedQueue) -> None:
    lanes = [lanes_on(k, 1)[0] for k in (2, 0, 1)]
    fill(sq, lanes[1], 3)
    infos = sq.lanes_named(lanes)
    assert [i.lane for i in infos] == lanes
    assert [i.depth for i in infos] == [0, 3, 0]


# -- the pieces the backend, worker and admin use -----------------------------------


def test_open_queue_shards_only_when_asked(r: redis.Redis) -> None:
    assert isinstance(open_queue("q", connection=r), Queue)
    sharded = open_queue("q", connection=r, shards=S)
    assert isinstance(sharded, ShardedQueue)
    assert [s.name for s in shards_of(sharded)] == list(shard_tags("q", S))
    plain_queue = Queue("q", connection=r)
    assert shards_of(plain_queue) == (plain_queue,)
    lane = lane_id("USR", 5)
    assert home_of(plain_queue, lane) is plain_queue
    assert home_of(sharded, lane) is sharded.shard_for_lane(lane)


def test_claim_shard_answers_the_shard_that_served(sq: ShardedQueue, r: redis.Redis) -> None:
    lane = lanes_on(2, 1)[0]
    fill(sq, lane, 1)
    found = sq.claim_shard(ClaimRequest(LONG_LEASE, turns=1, worker_id="w", max_jobs=1))
    assert found is not None
    assert found[0] is sq.shards[2]
    assert sq.claim_shard(ClaimRequest(LONG_LEASE, turns=1, worker_id="w", max_jobs=1)) is None
    assert (
        Queue("p", connection=r).claim_shard(
            ClaimRequest(LONG_LEASE, turns=1, worker_id="w", max_jobs=1)
        )
        is None
    )


def test_a_rotation_passes_over_a_queue_whose_server_is_away(r: redis.Redis) -> None:
    nobody = redis.Redis(port=free_port(), socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    away = Queue("q", connection=nobody)
    here = Queue("q", connection=r)
    here.enqueue(lane_id("USR", 1), TASK)
    rotation = Rotation([away, here])
    request = ClaimRequest(LONG_LEASE)
    found = claim_in_turn(rotation, request)
    assert found is not None
    assert found[0] is here
    assert claim_in_turn(rotation, request) is None  # the one that answered has nothing left
    with pytest.raises(redis.ConnectionError):
        claim_in_turn(Rotation([away]), request)
    with pytest.raises(redis.ConnectionError):
        claim_in_turn(Rotation([away, Queue("other", connection=nobody)]), request)


def test_one_server_parks_on_every_wake_list_at_once(sq: ShardedQueue, r: redis.Redis) -> None:
    keys = [shard.keys.wake for shard in sq.shards]
    runner = SyncRunner(r)
    groups = runner.wake_groups(keys)
    assert groups == [keys]
    assert not runner.park(groups, 0.05)
    fill(sq, lanes_on(1, 1)[0], 1)
    assert runner.park(groups, 5.0)


def test_the_overview_interleaves_the_shards_rings(sq: ShardedQueue) -> None:
    lanes = {k: lanes_on(k, 2) for k in range(S)}
    for k in range(S):
        for lane in lanes[k]:
            fill(sq, lane, k + 1)
    sq.shards[0].connection.hset(
        sq.shards[0].keys.workers, "w1", '{"host": "h", "pid": 1, "done": 0, "beat": 5}'
    )
    sq.shards[2].connection.hset(
        sq.shards[2].keys.workers, "w1", '{"host": "h", "pid": 1, "done": 3, "beat": 9}'
    )
    view = browse.overview(sq, ring_count=4)
    assert view.ring_head == [lanes[0][0], lanes[1][0], lanes[2][0], lanes[0][1]]
    assert [(w.worker_id, w.done) for w in view.workers] == [("w1", 3)]
    assert view.deepest == 3
    oldest = browse.oldest_enqueued(sq, [lanes[2][1], lanes[0][0], lane_id("USR", 99999)])
    assert list(oldest) == [lanes[2][1], lanes[0][0], lane_id("USR", 99999)]
    assert oldest[lane_id("USR", 99999)] is None
    assert all(oldest[lane] for lane in (lanes[2][1], lanes[0][0]))


# -- settings, the backend, the worker and the admin -----------------------------------


def backend() -> FairLanesBackend:
    b = task_backends["default"]
    assert isinstance(b, FairLanesBackend)
    return b


@pytest.fixture
def sharded(emq: redis.Redis, settings: Any) -> ShardedQueue:
    """Django with the ``default`` queue on 3 shards."""
    settings.EMQ = {**settings.EMQ, "SHARDS": {"default": S}}
    queue = backend().engine("default")
    assert isinstance(queue, ShardedQueue)
    return queue


def test_shards_setting_is_validated(settings: Any) -> None:
    for value, message in [
        ([3], "must be a dict"),
        ({"default": 0}, "0 shards"),
        ({"default": MAX_SHARDS + 1}, "shards: use 1 to"),
        ({"x" * 64: 2}, "is not a queue name"),
    ]:
        settings.EMQ = {**settings.EMQ, "URL": "redis://localhost:1/0", "SHARDS": value}
        problems = conf.problems()
        assert len(problems) == 1
        assert "EMQ['SHARDS']" in problems[0]
        assert message in problems[0]
    settings.EMQ = {**settings.EMQ, "SHARDS": {"default": 1, "other": 2}}
    assert conf.emq_settings().shards == {"other": 2}


def test_checks_catch_a_queue_named_like_a_shard_and_a_sharded_queue_nobody_serves(
    settings: Any,
) -> None:
    settings.EMQ = {"URL": "redis://localhost:1/0", "SHARDS": {"default": 3, "nobody": 2}}
    settings.TASKS = {
        "default": {
            "BACKEND": "django_emq.backend.FairLanesBackend",
            "QUEUES": ["default", "default.1", "other"],
        }
    }
    found = [(m.id, str(m.msg)) for m in run_checks(tags=["emq"]) if m.id != "emq.W002"]
    assert [code for code, _ in found] == ["emq.E005", "emq.W003"]
    assert "'default.1'" in found[0][1]
    assert "'nobody'" in found[1][1]


@pytest.mark.django_db
def test_the_backend_runs_tasks_on_a_sharded_queue(sharded: ShardedQueue) -> None:
    with pytest.raises(ValueError, match="has 3 shards"):
        backend().queue("default")
    assert isinstance(get_queue("default"), ShardedQueue)
    assert isinstance(get_queue("other"), Queue)
    from django_emq import lane as riding

    results = []
    for pk in range(1, 13):
        with riding(lane_id("USR", pk)):
            results.append(tasks.add.enqueue(pk, 1))
    assert {job_shard(res.id, S) for res in results} == {0, 1, 2}
    from django.core.management import call_command

    call_command("run_emq_worker", "--burst", "--lease", "5", verbosity=0)
    for pk, res in enumerate(results, start=1):
        assert backend().get_result(res.id).return_value == pk + 1
    totals = sharded.totals()
    assert (totals.pending, totals.active) == (0, 0)
    check_every_shard(sharded)
    # the worker reported in on every shard, and left a stopped record on every one
    records = [plain(s.connection).hgetall(s.keys.workers) for s in sharded.shards]
    assert [len(r) for r in records] == [1, 1, 1]
    assert all(
        parse_heartbeat(str(w), raw).stopped_ms is not None for r in records for w, raw in r.items()
    )


@pytest.mark.django_db
def test_enqueue_on_a_sharded_queue_answers_the_time_a_read_gives(
    sharded: ShardedQueue,
) -> None:
    """Single and bulk enqueues on a sharded queue answer each row's own
    enqueue time (the server clock of the shard that holds it)."""
    from django_emq import lane as riding

    for pk in range(1, 7):
        with riding(lane_id("USR", pk)):
            result = tasks.add.enqueue(pk, 1)
        read = backend().get_result(result.id)
        assert result.enqueued_at == read.enqueued_at
        assert result == read
    answers = sharded.enqueue_many(
        [{"lane": lane_id("USR", pk), "task_path": TASK} for pk in range(1, 13)]
    )
    assert {job_shard(a.job_id, S) for a in answers} == {0, 1, 2}
    for answer in answers:
        row = sharded.job(answer.job_id)
        assert row is not None
        assert answer.enqueued_ms == int(row["enq"]) > 0


@pytest.mark.django_db
def test_the_admin_shows_and_acts_on_a_sharded_queue(
    sharded: ShardedQueue, django_user_model: Any
) -> None:
    user = django_user_model.objects.create_superuser("boss", "boss@example.com", None)
    client = Client()
    client.force_login(user)
    lanes = [lanes_on(k, 1)[0] for k in range(S)]
    for k, lane in enumerate(lanes):
        fill(sharded, lane, k + 1)
    page = client.get("/admin/django_emq/lane/?queue=default")
    assert page.status_code == 200
    assert page.context["totals"].pending == 6
    assert [row["info"].lane for row in page.context["lanes"]] == lanes[::-1]
    detail = client.get(f"/admin/django_emq/lane/default/{lanes[2]}/")
    assert detail.status_code == 200
    assert len(detail.context["pending"]["rows"]) == 3
    paused = client.post(f"/admin/django_emq/lane/default/{lanes[1]}/pause/")
    assert paused.status_code == 302
    assert sharded.shards[1].lane(lanes[1]).paused
    assert sharded.totals().ring == 2


@pytest.mark.django_db
def test_the_job_page_of_a_sharded_queue_lists_the_attempts_of_the_jobs_shard(
    sharded: ShardedQueue, django_user_model: Any
) -> None:
    user = django_user_model.objects.create_superuser("boss", "boss@example.com", None)
    client = Client()
    client.force_login(user)
    lane = lanes_on(2, 1)[0]
    (job,) = fill(sharded, lane, 1)
    for _ in range(2):
        claims = sharded.claim(60_000, worker_id="w:1")
        assert claims is not None
        sharded.retry(job, claims[0].token, "boom")
    page = client.get(f"/admin/django_emq/job/default/{job}/")
    assert page.status_code == 200
    assert [a["outcome"] for a in page.context["job"]["attempts"]] == ["failed", "failed"]
    assert all(a["started"] and a["ended"] for a in page.context["job"]["attempts"])


def test_complete_many_refuses_more_than_a_batch_across_shards(sq: ShardedQueue) -> None:
    from django_emq.engine.queue import MAX_BATCH

    with pytest.raises(ValueError, match="at most"):
        sq.complete_many([(f"JOB{i:017d}.s0", 1, None) for i in range(MAX_BATCH + 1)])
